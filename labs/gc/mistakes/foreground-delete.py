"""Common wrong solutions to foreground-delete."""

from labkit.apiserver.target import for_env
from labkit.exercises import mistake, wait_for, write_answer


def _delete_and_answer(env, cascade, answer):
    target = for_env(env)
    target.kubectl("delete", "deployment", "api", "-n", "shop", f"--cascade={cascade}", "--timeout=60s")
    client = target.client()
    wait_for(lambda: not client.list("v1", "pods", "shop", label_selector="app=api")[0], timeout=60)
    write_answer(env, "foreground-delete", answer)


@mistake("propagationPolicy Background")
def background_cascade(env):
    """Deletes the Deployment with kubectl's default cascade (background)."""
    _delete_and_answer(env, "background", {"finalizer": "foregroundDeletion", "last": "Deployment"})


@mistake("answer is not right", "does not say how many of its 2 parts")
def orphan_finalizer(env):
    """Deletes it in the foreground, then names the orphan finalizer."""
    _delete_and_answer(env, "foreground", {"finalizer": "orphan", "last": "Deployment"})


@mistake("answer is not right", "does not say how many of its 2 parts")
def pods_last(env):
    """Deletes it in the foreground and thinks the Pods, which take their grace period, go last."""
    _delete_and_answer(env, "foreground", {"finalizer": "foregroundDeletion", "last": "Pod"})


@mistake("by hand", "finalizers", "Deployment api")
def removes_the_gc_finalizer_by_hand(env):
    """Deletes it in the foreground, then takes foregroundDeletion off the Deployment by hand (so it goes at
    once), and answers foregroundDeletion and Deployment."""
    target = for_env(env)
    target.kubectl("delete", "deployment", "api", "-n", "shop", "--cascade=foreground", "--wait=false")
    target.kubectl("patch", "deployment", "api", "-n", "shop", "--type=json",
                   "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    client = target.client()
    wait_for(lambda: not client.list("v1", "pods", "shop", label_selector="app=api")[0], timeout=60)
    write_answer(env, "foreground-delete", {"finalizer": "foregroundDeletion", "last": "Deployment"})


@mistake("before you deleted the Deployment", "Deployment api")
def scales_first(env):
    """`kubectl scale deploy api -n shop --replicas=0`, waits, then deletes it in the foreground."""
    target = for_env(env)
    target.kubectl("scale", "deployment", "api", "-n", "shop", "--replicas=0")
    client = target.client()
    wait_for(lambda: not client.list("v1", "pods", "shop", label_selector="app=api")[0], timeout=60)
    _delete_and_answer(env, "foreground", {"finalizer": "foregroundDeletion", "last": "Deployment"})


@mistake("yourself", "ReplicaSet api-", "while the foreground deletion went on")
def deletes_the_waiting_replicaset_by_hand(env):
    """Deletes it in the foreground, then `kubectl delete rs -l app=api` (kubectl's default, Background) while
    the ReplicaSet waits: that drops its foregroundDeletion, the Deployment goes before the Pods. Answers
    foregroundDeletion and Deployment all the same."""
    target = for_env(env)
    target.kubectl("delete", "deployment", "api", "-n", "shop", "--cascade=foreground", "--wait=false")
    client = target.client()
    wait_for(lambda: any(rs["metadata"].get("deletionTimestamp")
                         for rs in client.list("apps/v1", "replicasets", "shop", label_selector="app=api")[0]),
             timeout=60)
    target.kubectl("delete", "replicaset", "-n", "shop", "-l", "app=api", "--wait=false")
    wait_for(lambda: not client.list("v1", "pods", "shop", label_selector="app=api")[0], timeout=60)
    write_answer(env, "foreground-delete", {"finalizer": "foregroundDeletion", "last": "Deployment"})
