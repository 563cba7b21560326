"""--cascade=foreground: the API server gives the Deployment the foregroundDeletion finalizer; the
GC deletes the ReplicaSet (itself in the foreground, as it has dependents) and the Pods, and
removes the finalizers once nothing blocks: the Deployment is removed last. kubectl waits."""

import yaml

from labkit.exercises import answer_path
from labkit.apiserver.target import for_env


def solve(env):
    for_env(env).kubectl("delete", "deployment", "api", "-n", "shop", "--cascade=foreground", "--timeout=60s")
    path = answer_path(env.lab.id, "foreground-delete")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"finalizer": "foregroundDeletion", "last": "Deployment"}))
