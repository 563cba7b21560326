"""kubelet's admission re-check for Nodes that run no kubelet of labkit's (the scheduler lab's): a
kubelet admits each Pod bound to its node before it starts it, whoever bound it — the scheduler,
or a Pod created with spec.nodeName set by hand, which no scheduler saw. This controller stands
in for that one step of each Node's kubelet, and runs nothing.

Upstream: pkg/kubelet/kubelet.go HandlePodAdditions (Pods in order of creation; the Pods already
admitted to the node are the `other pods`), canAdmitPod → pkg/kubelet/lifecycle/predicate.go
predicateAdmitHandler.Admit → generalFilter, whose first check is the scheduler's
noderesources.Fits (fit.go fitsRequest: pods, then cpu, memory, ephemeral-storage and the other
resources, against the node's allocatable). The first insufficient resource is the reason:
`OutOf<resource>` (OutOfcpu, OutOfmemory, OutOfpods) with InsufficientResourceError's text
`Node didn't have enough resource: cpu, requested: 2000, used: 500, capacity: 1000` (cpu in
millicores, the others in units). kubelet_pods.go rejectPod: a Warning event with that reason and
text, and the Pod's status phase Failed, the reason, and the message `Pod was rejected: ` + text.

Only the resource fit is reconstructed (the Pods of the lab set no host ports, OS or
SupplementalGroupsPolicy that the other checks of Admit would reject).
"""

from __future__ import annotations

from labkit.apiserver.errors import ApiError
from labkit.controllers.base import KeyedController, object_key
from labkit.controllers.events import EventRecorder, involved
from labkit.scheduler.objects import CPU, EPHEMERAL, MEMORY, PODS, Node, Pod

ORDER = (CPU, MEMORY, EPHEMERAL)        # fitsRequest's order after the pod count


def _terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def insufficient(pod: Pod, node: Node, admitted: list[Pod]) -> tuple[str, int, int, int] | None:
    """fit.go fitsRequest, first failure only: (resource, requested, used, capacity)."""
    allocatable = node.allocatable
    allowed = allocatable.get(PODS, 0)
    if len(admitted) + 1 > allowed:
        return PODS, 1, len(admitted), allowed
    wanted = pod.requests()
    used: dict[str, int] = {}
    for other in admitted:
        for name, value in other.requests().items():
            used[name] = used.get(name, 0) + value
    names = [*ORDER, *sorted(n for n in wanted if n not in ORDER and n != PODS)]
    for name in names:
        asked = wanted.get(name, 0)
        if asked == 0:
            continue
        capacity = allocatable.get(name, 0)
        if asked > capacity - used.get(name, 0):
            return name, asked, used.get(name, 0), capacity
    return None


def rejection(found: tuple[str, int, int, int]) -> tuple[str, str]:
    """(reason, InsufficientResourceError.Error()) — predicate.go Admit's OutOf<resource>."""
    name, requested, used, capacity = found
    return (f"OutOf{name}", f"Node didn't have enough resource: {name}, requested: {requested}, used: {used}, "
                            f"capacity: {capacity}")


class KubeletAdmitController(KeyedController):
    name = "kubeletadmit"

    def __init__(self, client, log, client_for=None):
        super().__init__(client, log)
        self.client_for = client_for or (lambda user: client)
        self.admitted: dict[str, str] = {}        # pod key -> the node it was admitted to
        self._recorders: dict[str, EventRecorder] = {}

    def make_informers(self):
        def changed(pod, *_):
            if (pod.get("spec") or {}).get("nodeName"):
                self.enqueue(pod)
        return {"pods": self.informer("v1", "pods", "Pod", on_add=changed, on_update=lambda old, new: changed(new),
                                      on_delete=lambda pod: self.admitted.pop(object_key(pod), None)),
                "nodes": self.informer("v1", "nodes", "Node", namespaced=False)}

    def stop(self) -> None:
        super().stop()
        for recorder in self._recorders.values():
            recorder.stop()
        self._recorders = {}

    def idle(self) -> bool:
        return super().idle() and all(r.idle() for r in self._recorders.values())

    def sync(self, key: str) -> None:
        obj = self.informers["pods"].get(key)
        if obj is None:
            self.admitted.pop(key, None)
            return
        node_name = (obj.get("spec") or {}).get("nodeName")
        if not node_name or key in self.admitted or _terminal(obj) or obj["metadata"].get("deletionTimestamp"):
            return
        node = self.informers["nodes"].get(node_name)
        if node is None:
            return          # a kubelet admits only Pods of the node it runs on
        # the Pods admitted before it, in order of creation (HandlePodAdditions sorts by it)
        created = obj["metadata"].get("creationTimestamp") or ""
        for other in sorted(self.informers["pods"].list(), key=lambda p: p["metadata"].get("creationTimestamp") or ""):
            other_key = object_key(other)
            if other_key == key or other_key in self.admitted or (other.get("spec") or {}).get("nodeName") != node_name \
                    or _terminal(other) or (other["metadata"].get("creationTimestamp") or "") > created:
                continue
            self.sync(other_key)
        admitted = [Pod(p) for p in self.informers["pods"].list() if self.admitted.get(object_key(p)) == node_name
                    and not _terminal(p)]
        found = insufficient(Pod(obj), Node(node), admitted)
        if found is None:
            self.admitted[key] = node_name
            return
        reason, text = rejection(found)
        self._reject(obj, node_name, reason, text)

    def _reject(self, obj: dict, node_name: str, reason: str, text: str) -> None:
        """kubelet_pods.go rejectPod."""
        user = f"system:node:{node_name}"
        recorder = self._recorders.get(node_name)
        if recorder is None:
            recorder = self._recorders[node_name] = EventRecorder(self.client_for(user), "kubelet", host=node_name)
        recorder.event(involved(obj), "Warning", reason, text)
        status = dict(obj.get("status") or {}, phase="Failed", reason=reason, message=f"Pod was rejected: {text}")
        try:
            self.client_for(user).update("v1", "pods", dict(obj, status=status), obj["metadata"]["namespace"], "status")
        except ApiError as exc:
            if exc.code != 404:         # a conflict: retried with the Pod as it is now
                raise
        self.log.record(self.name, "reject", {"namespace": obj["metadata"]["namespace"], "name": obj["metadata"]["name"]},
                        f"pod {obj['metadata']['namespace']}/{obj['metadata']['name']} on {node_name}: {reason}: {text}")
