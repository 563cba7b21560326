"""The ReplicaSet waits (foregroundDeletion) for a Pod that is being deleted but holds a finalizer
of its own. Find that Pod, remove its finalizer (only that one), and let the GC finish."""

import json

import yaml

from labkit.exercises import answer_path
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
    path = answer_path(env.lab.id, "stuck-finalizer")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"pod": name, "finalizer": finalizers[index]}))
