"""The DefaultTolerationSeconds admission plugin
(plugin/pkg/admission/defaulttolerationseconds/admission.go, v1.34, Plugin.Admit).

Mutating phase, CREATE and UPDATE of Pods (not their subresources): a Pod that does not already
tolerate the `node.kubernetes.io/not-ready` or `node.kubernetes.io/unreachable` NoExecute taint
gets a toleration for it with tolerationSeconds 300 (--default-not-ready-toleration-seconds,
--default-unreachable-toleration-seconds), appended after its own. A toleration with an empty key
(and operator Exists) tolerates every taint, one with an empty effect every effect; either counts
as already tolerating.
"""

from __future__ import annotations

from labkit.apiserver.admission import Attributes

TAINT_NODE_NOT_READY = "node.kubernetes.io/not-ready"          # k8s.io/api/core/v1 well_known_taints.go
TAINT_NODE_UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_NOT_READY_TOLERATION_SECONDS = 300
DEFAULT_UNREACHABLE_TOLERATION_SECONDS = 300


def _tolerates(tolerations: list, key: str) -> bool:
    return any(isinstance(t, dict) and t.get("key", "") in (key, "") and t.get("effect", "") in ("NoExecute", "")
               for t in tolerations)


def default_toleration_seconds(attrs: Attributes) -> None:
    rt = attrs.rt
    if (rt.group, rt.resource) != ("", "pods") or attrs.subresource:
        return
    spec = attrs.obj.setdefault("spec", {})
    tolerations = spec.get("tolerations") or []
    added = []
    for key, seconds in ((TAINT_NODE_NOT_READY, DEFAULT_NOT_READY_TOLERATION_SECONDS),
                         (TAINT_NODE_UNREACHABLE, DEFAULT_UNREACHABLE_TOLERATION_SECONDS)):
        if not _tolerates(tolerations, key):
            added.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds})
    if added:
        spec["tolerations"] = list(tolerations) + added
