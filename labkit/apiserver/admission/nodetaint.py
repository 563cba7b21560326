"""The TaintNodesByCondition admission plugin (plugin/pkg/admission/nodetaint/admission.go, v1.34,
Plugin.Admit and addNotReadyTaint).

Mutating phase, CREATE only (admission.NewHandler(admission.Create)), Nodes only and not their
subresources: a new Node gets the taint `node.kubernetes.io/not-ready:NoSchedule` unless it already
has a taint of that key and effect (Taint.MatchTaint compares key and effect), appended after its
own. No Pod is scheduled to a Node before it has reported Ready: the node lifecycle controller
(labkit.controllers.nodelifecycle, doNoScheduleTaintingPass) removes the taint once the Node's
Ready condition is True.
"""

from __future__ import annotations

from labkit.apiserver.admission import Attributes

TAINT_NODE_NOT_READY = "node.kubernetes.io/not-ready"      # k8s.io/api/core/v1 well_known_taints.go


def taint_nodes_by_condition(attrs: Attributes) -> None:
    rt = attrs.rt
    if (rt.group, rt.resource) != ("", "nodes") or attrs.subresource or not isinstance(attrs.obj, dict):
        return
    spec = attrs.obj.setdefault("spec", {})
    taints = spec.get("taints") or []
    if any(isinstance(t, dict) and t.get("key") == TAINT_NODE_NOT_READY and t.get("effect") == "NoSchedule"
           for t in taints):
        return
    spec["taints"] = [*taints, {"key": TAINT_NODE_NOT_READY, "effect": "NoSchedule"}]
