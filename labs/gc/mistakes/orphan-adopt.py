"""Common wrong solutions to orphan-adopt."""

import json

from labkit.apiserver.target import for_env
from labkit.exercises import mistake, wait_for


def _new_replicaset(env, replicas=2, app="worker"):
    target = for_env(env)
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "worker-v2", "namespace": "shop",
                                                                       "labels": {"app": app}},
          "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                   "template": {"metadata": {"labels": {"app": app}},
                                "spec": {"terminationGracePeriodSeconds": 2,
                                         "containers": [{"name": "worker", "image": "registry.k8s.io/pause:3.10"}]}}}}
    target.kubectl("apply", "-f", "-", input=json.dumps(rs))


def _orphans(env):
    client = for_env(env).client()
    return wait_for(lambda: all(not p["metadata"].get("ownerReferences")
                                for p in client.list("v1", "pods", "shop", label_selector="app=worker")[0]), timeout=30)


@mistake("propagationPolicy Background")
def default_cascade(env):
    """Deletes the ReplicaSet with kubectl's default cascade: its Pods go too; the new one makes new Pods."""
    for_env(env).kubectl("delete", "rs", "worker", "-n", "shop", "--timeout=60s")
    _new_replicaset(env)


@mistake("not controlled by worker-v2", "selector")
def own_selector(env):
    """Orphans the Pods, then creates worker-v2 with a selector of its own (app=worker-v2)."""
    for_env(env).kubectl("delete", "rs", "worker", "-n", "shop", "--cascade=orphan", "--timeout=60s")
    _orphans(env)
    _new_replicaset(env, app="worker-v2")


@mistake("new, not adopted", "asks for 3 replicas")
def three_replicas(env):
    """Orphans the Pods, then creates worker-v2 with 3 replicas: the controller adds a Pod."""
    for_env(env).kubectl("delete", "rs", "worker", "-n", "shop", "--cascade=orphan", "--timeout=60s")
    _orphans(env)
    _new_replicaset(env, replicas=3)
    client = for_env(env).client()
    wait_for(lambda: len(client.list("v1", "pods", "shop", label_selector="app=worker")[0]) == 3, timeout=30)


@mistake("created on the way")
def new_replicaset_first(env):
    """Creates worker-v2 first, then orphans worker's Pods: worker-v2 makes two Pods of its own, adopts the
    orphans and deletes its own again."""
    _new_replicaset(env)
    client = for_env(env).client()
    wait_for(lambda: len(client.list("v1", "pods", "shop", label_selector="app=worker")[0]) == 4, timeout=30)
    for_env(env).kubectl("delete", "rs", "worker", "-n", "shop", "--cascade=orphan", "--timeout=60s")
    wait_for(lambda: len([p for p in client.list("v1", "pods", "shop", label_selector="app=worker")[0]
                          if not p["metadata"].get("deletionTimestamp")]) == 2, timeout=30)
