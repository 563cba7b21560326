"""The taints the node lifecycle controller of kube-controller-manager v1.34.1 keeps on each Node
from its conditions (pkg/controller/nodelifecycle/node_lifecycle_controller.go), as a controller of
the embedded server (on by default, as in kube-controller-manager; the TaintNodesByCondition
admission plugin taints every new Node node.kubernetes.io/not-ready:NoSchedule, and this controller
takes the taint off when the Node reports Ready):

- doNoScheduleTaintingPass (TaintNodesByCondition): for each condition in
  nodeConditionToTaintKeyStatusMap — Ready False → node.kubernetes.io/not-ready, Ready Unknown →
  node.kubernetes.io/unreachable, MemoryPressure / DiskPressure / PIDPressure /
  NetworkUnavailable True → node.kubernetes.io/memory-pressure, disk-pressure, pid-pressure,
  network-unavailable — a NoSchedule taint of that key, and node.kubernetes.io/unschedulable when
  spec.unschedulable is set; the NoSchedule taints of those keys the node no longer warrants are
  removed.
- the NoExecute pass (doNoExecuteTaintingPass, processTaintBaseEviction): Ready False →
  node.kubernetes.io/not-ready:NoExecute, Ready Unknown → node.kubernetes.io/unreachable:NoExecute
  (each replacing the other), Ready True → neither.
Each taint added carries timeAdded (AddOrUpdateTaintOnNode). The taint-eviction controller
(labkit.controllers.tainteviction) then evicts the Pods that do not tolerate the NoExecute ones;
the 300 s tolerations that DefaultTolerationSeconds admission gives every Pod delay that.

Not reconstructed: the health monitor that itself turns a Node's Ready condition Unknown when its
kubelet stops posting status and renewing its Lease (node-monitor-grace-period), and the per-zone
rate limiter of the NoExecute pass (--node-eviction-rate; its burst of one taints a zone's first
Node at once): here a condition written to a Node's status is acted on at once.
"""

from __future__ import annotations

from labkit.apiserver.errors import ApiError
from labkit.apiserver.timestamps import now_rfc3339
from labkit.controllers.base import KeyedController

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
# nodeConditionToTaintKeyStatusMap
CONDITION_TAINTS = {
    "Ready": {"False": NOT_READY, "Unknown": UNREACHABLE},
    "MemoryPressure": {"True": "node.kubernetes.io/memory-pressure"},
    "DiskPressure": {"True": "node.kubernetes.io/disk-pressure"},
    "NetworkUnavailable": {"True": "node.kubernetes.io/network-unavailable"},
    "PIDPressure": {"True": "node.kubernetes.io/pid-pressure"},
}
NO_SCHEDULE_KEYS = {key for by_status in CONDITION_TAINTS.values() for key in by_status.values()} | {UNSCHEDULABLE}


def wanted_taints(node: dict) -> list[tuple[str, str]]:
    """(key, effect) of every taint the node's conditions and spec.unschedulable warrant."""
    conditions = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
    out = [(CONDITION_TAINTS[t][s], "NoSchedule") for t, s in conditions.items()
           if t in CONDITION_TAINTS and s in CONDITION_TAINTS[t]]
    if (node.get("spec") or {}).get("unschedulable"):
        out.append((UNSCHEDULABLE, "NoSchedule"))
    ready = conditions.get("Ready")
    if ready == "False":
        out.append((NOT_READY, "NoExecute"))
    elif ready == "Unknown":
        out.append((UNREACHABLE, "NoExecute"))
    return out


def managed(taint: dict) -> bool:
    """A taint this controller adds and removes."""
    if taint.get("effect") == "NoSchedule":
        return taint.get("key") in NO_SCHEDULE_KEYS
    return taint.get("effect") == "NoExecute" and taint.get("key") in (NOT_READY, UNREACHABLE)


class NodeLifecycleController(KeyedController):
    name = "nodelifecycle"

    def make_informers(self):
        return {"nodes": self.informer("v1", "nodes", "Node", namespaced=False, on_add=self._enqueue_node,
                                       on_update=lambda old, new: self._enqueue_node(new))}

    def _enqueue_node(self, node: dict) -> None:
        if self.queue is not None:
            self.queue.add(node["metadata"]["name"])

    def sync(self, key: str) -> None:
        node = self.informers["nodes"].get(key)
        if node is None:
            return
        taints = list((node.get("spec") or {}).get("taints") or [])
        wanted = wanted_taints(node)
        have = {(t.get("key"), t.get("effect")) for t in taints if managed(t)}
        kept = [t for t in taints if not managed(t) or (t.get("key"), t.get("effect")) in wanted]
        added = [{"key": k, "effect": e, "timeAdded": now_rfc3339()} for k, e in wanted if (k, e) not in have]
        if len(kept) == len(taints) and not added:
            return
        body = dict(node, spec=dict(node.get("spec") or {}, taints=kept + added))
        try:
            self.client.update("v1", "nodes", body)     # a conflict is retried with the Node as it is now
        except ApiError as exc:
            if exc.code != 404:
                raise
            return
        plus = ", ".join(f"{t['key']}:{t['effect']}" for t in added) or "none"
        minus = ", ".join(f"{t['key']}:{t['effect']}" for t in taints if t not in kept) or "none"
        self.log.record(self.name, "taints", {"name": key}, f"node {key}: + {plus}; - {minus}")
