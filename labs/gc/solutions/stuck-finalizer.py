"""The ReplicaSet waits (foregroundDeletion) for a Pod that is being deleted but holds a finalizer
of its own. Find that Pod, remove its finalizer (only that one), and let the GC finish."""

import json

from labkit.exercises import wait_for, write_answer
from labkit.apiserver.target import for_env


def solve(env):
    target = for_env(env)
    pods = json.loads(target.kubectl("get", "pods", "-n", "shop", "-l", "app=reports", "-o", "json"))["items"]
    stuck = next(p for p in pods if p["metadata"].get("finalizers"))
    name, finalizers = stuck["metadata"]["name"], stuck["metadata"]["finalizers"]
    index = next(i for i, f in enumerate(finalizers) if f not in ("orphan", "foregroundDeletion"))
    target.kubectl("patch", "pod", name, "-n", "shop", "--type=json", "-p",
                   json.dumps([{"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizers[index]},
                               {"op": "remove", "path": f"/metadata/finalizers/{index}"}]))
    # watch it finish: the node removes the Pod, then the GC the ReplicaSet's foregroundDeletion
    client = target.client()
    wait_for(lambda: client.get_or_none("apps/v1", "replicasets", "reports", "shop") is None, timeout=60)
    write_answer(env, "stuck-finalizer", {"pod": name, "finalizer": finalizers[index]})
