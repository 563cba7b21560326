"""--cascade=foreground: the API server gives the Deployment the foregroundDeletion finalizer; the
GC deletes the ReplicaSet (itself in the foreground, as it has dependents) and the Pods, and
removes the finalizers once nothing blocks: the Deployment is removed last. kubectl waits."""

from labkit.exercises import write_answer
from labkit.apiserver.target import for_env


def solve(env):
    for_env(env).kubectl("delete", "deployment", "api", "-n", "shop", "--cascade=foreground", "--timeout=60s")
    write_answer(env, "foreground-delete", {"finalizer": "foregroundDeletion", "last": "Deployment"})
