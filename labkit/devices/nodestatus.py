"""The Node a device manager's kubelet reports to the API server: its status.capacity and
status.allocatable for the extended resources of device plugins, as kubelet v1.34.1 writes them.

  register()      pkg/kubelet/kubelet_node_status.go registerWithAPIServer / tryRegisterWithAPIServer:
                  kubelet creates its Node; when the Node exists already it reconciles it
                  (reconcileExtendedResource): if the device manager says the node was recreated
                  (devicemanager/manager.go ShouldResetExtendedResourceCapacity: no checkpoint file
                  in the device-plugins directory), every extended resource of the Node's capacity
                  and allocatable is set to 0 until a plugin registers it again.
  machine_info()  pkg/kubelet/nodestatus/setters.go MachineInfo, the device plugins' part: capacity
                  of each resource from the device manager (GetCapacity: every listed device); a
                  resource removed after its plugin's grace period is written as capacity 0, not
                  deleted (it marks the resource as a device plugin's); allocatable is capacity
                  (minus reservations: none here), extended resources no longer in capacity
                  dropped, then overwritten by the device manager's allocatable (healthy devices).
  update()        kubelet_node_status.go tryUpdateNodeStatus: the status is written only when
                  it changed (nodeStatusHasChanged).

A real kubelet runs the status update every nodeStatusUpdateFrequency (10 s by default) and so
shows a device manager's change up to 10 s later; labkit's kubelet writes it when the change
happens (and before a check reads the Node), which is the same value, sooner.
"""

from __future__ import annotations

import copy
import threading

from labkit.apiserver.errors import ApiError
from labkit.devices.manager import valid_extended_resource_name
from labkit.nodes import ready_node

KUBELET_VERSION = "v1.34.1"
USER_AGENT = f"kubelet/{KUBELET_VERSION} (linux/amd64) labkit"
# the lab machine's own resources, as cAdvisor's machine info would give them (setters.go MachineInfo)
MACHINE = {"cpu": "4", "memory": "8Gi", "pods": "110"}


def initial_node(name: str) -> dict:
    """kubelet_node_status.go initialNode, with the status a first update writes."""
    return ready_node(name, MACHINE)


def reset_extended(status: dict) -> dict:
    """reconcileExtendedResource: every extended resource's capacity and allocatable set to 0."""
    out = copy.deepcopy(status)
    capacity, allocatable = out.setdefault("capacity", {}), out.setdefault("allocatable", {})
    for name in list(capacity):
        if valid_extended_resource_name(name):
            capacity[name] = "0"
            allocatable[name] = "0"
    return out


def machine_info(status: dict, capacity: dict[str, int], allocatable: dict[str, int], removed: list[str]) -> dict:
    """setters.go MachineInfo on the Node's current status, with the device manager's GetCapacity
    (capacity, allocatable, removed resources)."""
    out = copy.deepcopy(status)
    cap = out.setdefault("capacity", {})
    cap.update(MACHINE)
    for name, count in capacity.items():
        cap[name] = str(count)
    for name in removed:
        cap[name] = "0"
    alloc = out.setdefault("allocatable", {})
    for name in list(alloc):
        if name not in cap and valid_extended_resource_name(name):
            del alloc[name]
    for name, value in cap.items():
        alloc[name] = value
    for name, count in allocatable.items():
        alloc[name] = str(count)
    return out


def extended(status: dict) -> dict:
    """The extended resources of a Node status as whole numbers: {"capacity": .., "allocatable": ..}."""
    from labkit.quantity import QuantityError, parse

    def counts(resources: dict) -> dict[str, int]:
        out = {}
        for name, value in (resources or {}).items():
            if valid_extended_resource_name(name):
                try:
                    out[name] = int(parse(str(value))[0])
                except QuantityError:
                    continue
        return out
    return {"capacity": counts(status.get("capacity")), "allocatable": counts(status.get("allocatable"))}


class NodeStatus:
    """One kubelet's Node on an API server (`client`: labkit.apiserver.client)."""

    def __init__(self, client, name: str):
        self.client = client
        self.name = name
        self.lock = threading.Lock()

    def register(self, node_recreated: bool) -> dict:
        """Create the Node, or reconcile the existing one (zero its extended resources when the
        device manager has no checkpoint: `node_recreated`)."""
        with self.lock:
            current = self.client.get_or_none("v1", "nodes", self.name)
            if current is None:
                try:
                    return self.client.create("v1", "nodes", initial_node(self.name))
                except ApiError as exc:
                    if exc.code != 409:
                        raise
                    current = self.client.get("v1", "nodes", self.name)
            if node_recreated:
                return self._write(current, reset_extended(current.get("status") or {}))
            return current

    def update(self, capacity: dict[str, int], allocatable: dict[str, int], removed: list[str]) -> dict:
        with self.lock:
            for _attempt in range(3):
                current = self.client.get("v1", "nodes", self.name)
                try:
                    return self._write(current, machine_info(current.get("status") or {}, capacity, allocatable,
                                                             removed))
                except ApiError as exc:
                    if exc.code != 409:        # a conflict: someone else wrote the Node meanwhile
                        raise
            raise ApiError.from_status(409, {"message": f"the Node {self.name} kept changing under its kubelet"})

    def _write(self, current: dict, status: dict) -> dict:
        if status == (current.get("status") or {}):      # tryUpdateNodeStatus: nodeStatusHasChanged
            return current
        return self.client.update("v1", "nodes", dict(current, status=status), None, "status")

    def read(self) -> dict:
        """The Node's extended resources as a client (kubectl get node) sees them."""
        node = self.client.get_or_none("v1", "nodes", self.name) or {}
        return extended(node.get("status") or {})
