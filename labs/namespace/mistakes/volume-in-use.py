"""Common wrong fixes of volume-in-use."""

import time

from labkit.exercises import mistake


def _client(env):
    return env.lab.environment_module().client(env)


@mistake("pvc-protection")
def remove_the_claims_finalizer(env):
    """Takes the claim for the blocker and removes kubernetes.io/pvc-protection from it."""
    _client(env).patch("v1", "persistentvolumeclaims", "data", {"metadata": {"finalizers": None}}, "merge", "archive")


@mistake("force-deleted")
def force_delete_the_pod(env):
    """`kubectl delete pod uploader -n archive --force --grace-period=0`."""
    _client(env).delete("v1", "pods", "uploader", "archive", options={"gracePeriodSeconds": 0})


@mistake("cordoned")
def cordon_the_node(env):
    """`kubectl cordon node-b`, expecting that to end what ran there."""
    _client(env).patch("v1", "nodes", "node-b", {"spec": {"unschedulable": True}}, "merge")
    time.sleep(1)


@mistake("Node node-b was deleted")
def delete_the_node(env):
    """`kubectl delete node node-b`: the pod garbage collector then deletes the Pod as an orphan
    (after 40 s), but nothing told Kubernetes the machine is shut down for good."""
    _client(env).delete("v1", "nodes", "node-b")


@mistake("labkit-node", "marked out of service too", "look at every node's taints")
def marks_every_node(env):
    """`kubectl taint nodes --all node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`: the
    healthy node is marked as shut down for good too."""
    c = _client(env)
    for node in c.list("v1", "nodes")[0]:
        taints = list((node.get("spec") or {}).get("taints") or [])
        taints.append({"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"})
        c.patch("v1", "nodes", node["metadata"]["name"], {"spec": {"taints": taints}}, "merge")


@mistake("deleted PersistentVolume archive-data", "Retain")
def delete_the_volume(env):
    """`kubectl delete pv archive-data --wait=false`, taking the volume for what holds the claim
    (kubernetes.io/pv-protection keeps it Terminating while it is Bound)."""
    _client(env).delete("v1", "persistentvolumes", "archive-data")


@mistake("finalizers of PersistentVolume archive-data", "pv-protection")
def remove_the_volumes_finalizer(env):
    """`kubectl patch pv archive-data --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]'`:
    the volume's protection taken for the blocker (its controller puts it back: it is Bound)."""
    _client(env).patch("v1", "persistentvolumes", "archive-data",
                       [{"op": "remove", "path": "/metadata/finalizers"}], "json")


@mistake("labkit-node was marked out of service on the way", "mark only the dead node")
def marks_every_node_then_unmarks_the_running_one(env):
    """`kubectl taint nodes --all node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`, then,
    seeing the healthy node marked too, `kubectl taint node labkit-node
    node.kubernetes.io/out-of-service-`: only node-b keeps the mark, but the running node had it
    meanwhile (it passed: only the marks left at the end were judged)."""
    marks_every_node(env)
    c = _client(env)
    node = c.get("v1", "nodes", "labkit-node")
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != "node.kubernetes.io/out-of-service"]
    c.patch("v1", "nodes", "labkit-node", {"spec": {"taints": taints or None}}, "merge")
