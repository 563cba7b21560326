"""kubectl's default cascade is background: the Deployment goes at once, then the GC deletes its
ReplicaSet (whose owner is gone), then the ReplicaSet's Pods. Wait until they are gone, as a
student watching `kubectl get pods -w` would, then write the order down."""

import yaml

from labkit.exercises import answer_path, wait_for
from labkit.apiserver.target import for_env


def solve(env):
    target = for_env(env)
    target.kubectl("delete", "deployment", "cart", "-n", "shop", "--cascade=background")
    client = target.client()
    wait_for(lambda: not client.list("v1", "pods", "shop", label_selector="app=cart")[0], timeout=60)
    path = answer_path(env.lab.id, "background-delete")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"order": ["Deployment", "ReplicaSet", "Pod"]}))
