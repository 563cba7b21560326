"""Common wrong solutions to background-delete."""

from labkit.apiserver.target import for_env
from labkit.exercises import mistake, wait_for, write_answer


def _delete_and_answer(env, cascade, order):
    target = for_env(env)
    target.kubectl("delete", "deployment", "cart", "-n", "shop", f"--cascade={cascade}", "--timeout=60s")
    client = target.client()
    if cascade == "orphan":     # the ReplicaSet and Pods stay: wait for none of them to be on its way out
        wait_for(lambda: not [p for p in client.list("v1", "pods", "shop", label_selector="app=cart")[0]
                              if p["metadata"].get("deletionTimestamp")], timeout=60)
    else:                       # the garbage collector deletes them after the Deployment went: wait for all
        wait_for(lambda: not client.list("apps/v1", "replicasets", "shop", label_selector="app=cart")[0]
                 and not client.list("v1", "pods", "shop", label_selector="app=cart")[0], timeout=60)
    write_answer(env, "background-delete", {"order": order})


@mistake("propagationPolicy Foreground")
def foreground_cascade(env):
    """Deletes the Deployment with --cascade=foreground."""
    _delete_and_answer(env, "foreground", ["Deployment", "ReplicaSet", "Pod"])


@mistake("propagationPolicy Orphan")
def orphan_cascade(env):
    """Deletes the Deployment with --cascade=orphan: its ReplicaSet and Pods stay."""
    _delete_and_answer(env, "orphan", ["Deployment", "ReplicaSet", "Pod"])


@mistake("order:", "not the order")
def dependents_first(env):
    """Deletes the right way, then writes the order a foreground deletion would end in."""
    _delete_and_answer(env, "background", ["Pod", "ReplicaSet", "Deployment"])


@mistake("yourself", "left to the garbage collector", "changed the situation")
def own_pod_deletes_count(env):
    """Deletes the Pods first (`kubectl delete pod -l app=cart`), then the Deployment, and writes the order
    the audit log then shows: Pod, Deployment, ReplicaSet."""
    target = for_env(env)
    target.kubectl("delete", "pod", "-l", "app=cart", "-n", "shop", "--wait=false")
    _delete_and_answer(env, "background", ["Pod", "Deployment", "ReplicaSet"])


@mistake("deleted 1 ReplicaSet of cart yourself", "left to the garbage collector")
def deletes_the_replicaset_first(env):
    """`kubectl delete rs <cart's ReplicaSet> -n shop --wait=false`, then the Deployment, and
    writes Deployment, ReplicaSet, Pod."""
    target = for_env(env)
    rs = target.client().list("apps/v1", "replicasets", "shop", label_selector="app=cart")[0][0]
    target.kubectl("delete", "rs", rs["metadata"]["name"], "-n", "shop", "--wait=false")
    _delete_and_answer(env, "background", ["Deployment", "ReplicaSet", "Pod"])


@mistake("changed Deployment cart", "yourself", "left to the garbage collector")
def scales_to_zero_first(env):
    """`kubectl scale deploy cart -n shop --replicas=0` (the ReplicaSet controller deletes the
    Pods), then deletes the Deployment, and writes Deployment, ReplicaSet, Pod."""
    target = for_env(env)
    target.kubectl("scale", "deployment", "cart", "-n", "shop", "--replicas=0")
    client = target.client()
    wait_for(lambda: not client.list("v1", "pods", "shop", label_selector="app=cart")[0], timeout=60)
    _delete_and_answer(env, "background", ["Deployment", "ReplicaSet", "Pod"])
