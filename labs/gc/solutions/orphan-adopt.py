"""Delete the ReplicaSet with --cascade=orphan (the GC removes its owner reference from each Pod,
then the orphan finalizer), then create a ReplicaSet with the same selector: the ReplicaSet
controller adopts the matching orphans instead of creating Pods."""

import json

from labkit.exercises import wait_for
from labkit.apiserver.target import for_env


def solve(env):
    target = for_env(env)
    rs = json.loads(target.kubectl("get", "rs", "worker", "-n", "shop", "-o", "json"))
    target.kubectl("delete", "rs", "worker", "-n", "shop", "--cascade=orphan", "--timeout=60s")
    # the Pods are orphans once none names the old ReplicaSet any more
    wait_for(lambda: not any(r.get("name") == "worker" for p in json.loads(target.kubectl(
        "get", "pods", "-n", "shop", "-l", "app=worker", "-o", "json"))["items"]
        for r in p["metadata"].get("ownerReferences") or []), timeout=30)
    new = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
           "metadata": {"name": "worker-v2", "namespace": "shop", "labels": rs["metadata"].get("labels", {})},
           "spec": {"replicas": rs["spec"]["replicas"], "selector": rs["spec"]["selector"],
                    "template": rs["spec"]["template"]}}
    target.kubectl("apply", "-f", "-", input=json.dumps(new))
    client = target.client()

    def adopted():      # each Pod has worker-v2 as its controller
        return all(any(r.get("name") == "worker-v2" and r.get("controller") for r in p["metadata"].get("ownerReferences")
                       or []) for p in client.list("v1", "pods", "shop", label_selector="app=worker")[0])
    wait_for(adopted, timeout=30)
