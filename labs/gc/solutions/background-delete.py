"""kubectl's default cascade is background: the Deployment goes at once, then the GC deletes its
ReplicaSet (whose owner is gone), then the ReplicaSet's Pods."""

import yaml

from labkit.exercises import answer_path
from labkit.apiserver.target import for_env


def solve(env):
    for_env(env).kubectl("delete", "deployment", "cart", "-n", "shop", "--cascade=background", "--wait=false")
    path = answer_path(env.lab.id, "background-delete")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"order": ["Deployment", "ReplicaSet", "Pod"]}))
