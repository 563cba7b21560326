"""Near-misses of marking node-b out of service, as what the check observes of the solved lab:
the out-of-service taint dropped or its key changed; the Node deleted; the Pod still there; the
claim's finalizers changed by hand; the Pod force-deleted; the Pod gone but not by the pod garbage
collector; another node marked out of service too; the namespace still there, force-finalized, or
something stored under its name; the PersistentVolume deleted, changed or its finalizers edited by
hand, not Released, or without kubernetes.io/pv-protection. The taint's value and effect, the
other taints and a cordon on the side are equivalent: the pod garbage collector and the
attach/detach controller test the node's readiness and the taint's key only
(labkit.controllers.podgc, as gc_controller.go gcTerminating and reconciler.go hasOutOfServiceTaint)."""

from labkit.controllers.podgc import OUT_OF_SERVICE_TAINT
from labkit.namespaces.mutants import gone_edits, gone_equivalent, gone_names, observation_mutants


def _untaint(env):
    c = env.lab.environment_module().client(env)
    node = c.get("v1", "nodes", "node-b")
    taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != OUT_OF_SERVICE_TAINT]
    c.patch("v1", "nodes", "node-b", {"spec": {"taints": taints}}, "merge")


def _delete_node(env):
    env.lab.environment_module().client(env).delete("v1", "nodes", "node-b")


def _delete_volume(env):
    env.lab.environment_module().client(env).delete("v1", "persistentvolumes", "archive-data")


def _podgc_deletes(node: dict | None) -> bool:
    """Whether the pod garbage collector deletes the terminating Pods of `node`, NotReady as node-b
    is (gcTerminating: `!IsNodeReady(node) && TaintKeyExists(taints, out-of-service)`)."""
    return node is not None and any(t.get("key") == OUT_OF_SERVICE_TAINT for t in node.get("taints") or [])


def mutants(ctx):
    checks = ctx.env.lab._load("checks.py")
    seen = checks.observe_volume_in_use(ctx)
    taints = seen["node"]["taints"]
    marked = next(i for i, t in enumerate(taints) if t["key"] == OUT_OF_SERVICE_TAINT)

    def names(edit):
        path = edit.path
        if path.startswith("node"):
            return ("shut down for good",)
        if path == "pod":
            return ("still Terminating",)
        if path == "claim_finalizers_edited_by":
            return ("pvc-protection",)
        if path == "pod_force_deleted_by":
            return ("force-deleted",)
        if path.startswith("other_nodes_marked"):
            return ("marked out of service too",)
        if path == "pod_deleted_by_podgc":
            return ("not because the pod garbage collector",)
        if path == "node/None":
            return ("was deleted",)
        if path == "volume_writes":
            if edit.after["verb"] == "delete":
                return ("deleted PersistentVolume",)
            return ("finalizers of PersistentVolume", "pv-protection") if edit.after["finalizers"] else \
                ("changed PersistentVolume",)
        if path == "volume":
            return ("deleted PersistentVolume",)
        if path.startswith("volume.phase"):
            return ("not Released",)
        if path.startswith("volume.finalizers"):
            return ("lacks kubernetes.io/pv-protection",)
        if path == "gone/namespace" and edit.after == claim_held:
            return ("still exists", "check again shortly", "leave the finalizers to their controllers")
        return gone_names(edit, "gone/") or gone_names(edit, "gone.")

    def equivalent(edit):
        if edit.path.startswith("node"):
            node = edit.value["node"]
            if node is not None and _podgc_deletes(node) == _podgc_deletes(seen["node"]):
                return ("the pod garbage collector (gcTerminating) and the attach/detach controller "
                        "(hasOutOfServiceTaint) read only whether the node is Ready and whether a taint with the "
                        "out-of-service key exists: they act the same")
            return None
        return gone_equivalent(edit, "gone.")

    replace, add = gone_edits(("gone",), "persistentvolumeclaims/data")
    # the Pod gone, the claim still protected: the namespace controller has not come back yet
    claim_held = {"phase": "Terminating", "deleting": True, "held": 1,
                  "held_by": [f"persistentvolumeclaims/{ctx.params['claim']}"]}
    replace[("gone", "namespace")].append(claim_held)
    add.update({("claim_finalizers_edited_by",): ["kubernetes-admin"], ("pod_force_deleted_by",): ["kubernetes-admin"],
                ("other_nodes_marked",): ["labkit-node"],
                ("volume_writes",): [{"user": "kubernetes-admin", "verb": verb, "finalizers": finalizers}
                                     for verb, finalizers in (("delete", False), ("patch", True), ("update", False))]})

    def node_names(edit):
        return ("was deleted",) if edit.path == "node" and edit.after is None else names(edit)

    yield from observation_mutants(
        seen, names=node_names, equivalent=lambda e: None if e.path == "node" and e.after is None else equivalent(e),
        alternatives={"gone.spec_edit": ["patched"], f"node.taints[{marked}].key": ["", "node.kubernetes.io/shutdown"],
                      f"node.taints[{marked}].value": ["", "true"],
                      f"node.taints[{marked}].effect": ["NoSchedule", "PreferNoSchedule"],
                      "pod_deleted_by_podgc": [False], "volume.phase": ["Bound", "Available", "Failed", ""]},
        # the lab's own taints (the node lifecycle controller's) are dropped or reordered, not rewritten
        skip=lambda p: p.startswith("node.taints[") and not p.startswith(f"node.taints[{marked}]") and "." in p[11:],
        replace={("pod",): [{"terminating": True}], ("node",): [None], ("volume",): [None], **replace}, add=add,
        apply={f"drop-item:node.taints[{marked}]": _untaint, "replace:node=None": _delete_node,
               "replace:volume=None": _delete_volume})
