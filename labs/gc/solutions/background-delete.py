"""kubectl's default cascade is background: the Deployment goes at once, then the GC deletes its
ReplicaSet (whose owner is gone), then the ReplicaSet's Pods. Wait until they are gone, as a
student watching `kubectl get pods -w` would, then write the order down."""

from labkit.exercises import wait_for, write_answer
from labkit.apiserver.target import for_env


def solve(env):
    target = for_env(env)
    target.kubectl("delete", "deployment", "cart", "-n", "shop", "--cascade=background")
    client = target.client()
    wait_for(lambda: not client.list("v1", "pods", "shop", label_selector="app=cart")[0], timeout=60)
    write_answer(env, "background-delete", {"order": ["Deployment", "ReplicaSet", "Pod"]})
