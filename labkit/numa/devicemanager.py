"""The Device Manager as a hint provider, for the devices a machine description lists.

Follows kubernetes/kubernetes `pkg/kubelet/cm/devicemanager/` (topology_hints.go and manager.go,
v1.28+): a container's device request is its limit of an extended resource that has devices;
hints are generated only for resources where some device carries NUMA information
(deviceHasTopologyAlignment); every NUMA mask with enough available devices is a hint, preferred
when it is as small as the smallest mask whose devices (available or not) could satisfy the
request. Allocation takes devices reusable from init containers first, then those on the hint's
NUMA nodes, then the others (filterByAffinity: nodes in the hint first, nodes with fewer devices
first, devices without topology last).

kubelet picks devices out of Go sets, i.e. in no defined order within each group; labkit takes them
in id order. Device plugins' GetPreferredAllocation is not simulated (no plugin asks for it).
"""

from __future__ import annotations

from typing import Callable, Mapping

from labkit.numa import bitmask
from labkit.numa.machine import Device
from labkit.numa.merge import TopologyHint
from labkit.numa.pods import Container, Pod

NO_TOPOLOGY = -1


class DeviceManagerError(Exception):
    pass


class DeviceManager:
    def __init__(self, devices: Mapping[str, list[Device]], numa_nodes: list[int],
                 affinity: Callable[[str, str], TopologyHint] = lambda p, c: TopologyHint(None, False)):
        self.devices = {resource: {d.id: d for d in devs} for resource, devs in devices.items()}
        self.numa_nodes = sorted(numa_nodes)
        self.affinity = affinity
        self.allocated: dict[str, dict[str, dict[str, frozenset[str]]]] = {}  # pod -> container -> resource -> ids
        self.devices_to_reuse: dict[str, dict[str, frozenset[str]]] = {}

    # -- requests ----------------------------------------------------------------------------------
    def is_device_resource(self, resource: str) -> bool:
        return resource in self.devices

    def container_request(self, container: Container) -> dict[str, int]:
        return {r: q.value_int() for r, q in sorted(container.limits.items()) if self.is_device_resource(r)}

    def pod_request(self, pod: Pod) -> dict[str, int]:
        """Pod limits of device resources (max of init containers and the long-running ones)."""
        by_init: dict[str, int] = {}
        by_sidecars: dict[str, int] = {}
        for container in pod.init_containers:
            for resource, n in self.container_request(container).items():
                if container.sidecar:
                    by_sidecars[resource] = by_sidecars.get(resource, 0) + n
                else:
                    by_init[resource] = max(by_init.get(resource, 0), by_sidecars.get(resource, 0) + n)
        by_apps: dict[str, int] = {}
        for container in pod.containers:
            for resource, n in self.container_request(container).items():
                by_apps[resource] = by_apps.get(resource, 0) + n
        names = set(by_init) | set(by_sidecars) | set(by_apps)
        return {r: max(by_init.get(r, 0), by_apps.get(r, 0) + by_sidecars.get(r, 0)) for r in sorted(names)}

    def has_topology_alignment(self, resource: str) -> bool:
        return any(d.numa_nodes for d in self.devices[resource].values())

    def in_use(self, resource: str) -> set[str]:
        return {d for containers in self.allocated.values() for res in containers.values()
                for r, ids in res.items() if r == resource for d in ids}

    def available(self, resource: str) -> set[str]:
        return set(self.devices[resource]) - self.in_use(resource)

    def container_devices(self, pod_uid: str, container: str, resource: str) -> frozenset[str]:
        return self.allocated.get(pod_uid, {}).get(container, {}).get(resource, frozenset())

    # -- hints -------------------------------------------------------------------------------------
    def get_topology_hints(self, pod: Pod, container: Container):
        hints: dict[str, list[TopologyHint] | None] = {}
        for resource, requested in self.container_request(container).items():
            if not self.has_topology_alignment(resource):
                hints[resource] = None
                continue
            allocated = self.container_devices(pod.uid, container.name, resource)
            if allocated:
                hints[resource] = [] if len(allocated) != requested else \
                    self.generate_hints(resource, set(allocated), set(), requested)
                continue
            available = self.available(resource)
            reusable = set(self.devices_to_reuse.get(pod.uid, {}).get(resource, frozenset()))
            if len(available | reusable) < requested:
                hints[resource] = []
                continue
            hints[resource] = self.generate_hints(resource, available, reusable, requested)
        return hints

    def get_pod_topology_hints(self, pod: Pod):
        hints: dict[str, list[TopologyHint] | None] = {}
        for resource, requested in self.pod_request(pod).items():
            if not self.has_topology_alignment(resource):
                hints[resource] = None
                continue
            allocated = {d for c in self.allocated.get(pod.uid, {}).values() for d in c.get(resource, ())}
            if allocated:
                hints[resource] = [] if len(allocated) != requested else \
                    self.generate_hints(resource, allocated, set(), requested)
                continue
            available = self.available(resource)
            if len(available) < requested:
                hints[resource] = []
                continue
            hints[resource] = self.generate_hints(resource, available, set(), requested)
        return hints

    def generate_hints(self, resource: str, available: set[str], reusable: set[str], request: int) -> list[TopologyHint]:
        """generateDeviceTopologyHints."""
        devices = self.devices[resource]
        min_affinity_size = len(self.numa_nodes)
        masks = []
        for mask in bitmask.iterate_bitmasks(self.numa_nodes):
            in_mask = sum(1 for d in devices.values() if bitmask.any_set(mask, d.numa_nodes))
            if in_mask >= request and bitmask.count(mask) < min_affinity_size:
                min_affinity_size = bitmask.count(mask)
            matching = 0
            skip = False
            for d in reusable:
                if not devices[d].numa_nodes:
                    continue
                if not bitmask.any_set(mask, devices[d].numa_nodes):
                    skip = True
                    break
                matching += 1
            if skip:
                continue
            matching += sum(1 for d in available if bitmask.any_set(mask, devices[d].numa_nodes))
            if matching >= request:
                masks.append(mask)
        return [TopologyHint(m, bitmask.count(m) == min_affinity_size) for m in masks]

    # -- allocation --------------------------------------------------------------------------------
    def allocate(self, pod: Pod, container: Container) -> None:
        for uid in list(self.devices_to_reuse):
            if uid != pod.uid:
                del self.devices_to_reuse[uid]
        reuse = self.devices_to_reuse.setdefault(pod.uid, {})
        for resource, needed in self.container_request(container).items():
            chosen = self._devices_to_allocate(pod.uid, container.name, resource, needed,
                                               set(reuse.get(resource, frozenset())))
            if chosen:
                self.allocated.setdefault(pod.uid, {}).setdefault(container.name, {})[resource] = frozenset(chosen)
        for resource, ids in self.allocated.get(pod.uid, {}).get(container.name, {}).items():
            if pod.is_regular_init_container(container.name):
                reuse[resource] = reuse.get(resource, frozenset()) | ids
            else:
                reuse[resource] = reuse.get(resource, frozenset()) - ids

    def _devices_to_allocate(self, pod_uid: str, container: str, resource: str, required: int,
                             reusable: set[str]) -> list[str]:
        existing = self.container_devices(pod_uid, container, resource)
        needed = required - len(existing)
        if needed == 0 or existing:
            return []
        chosen: list[str] = []
        for device in sorted(reusable):
            if needed == 0:
                return chosen
            chosen.append(device)
            needed -= 1
        if needed == 0:
            return chosen
        available = self.available(resource) - set(chosen)
        if len(available) < needed:
            raise DeviceManagerError(f"requested number of devices unavailable for {resource}. "
                                     f"Requested: {needed}, Available: {len(available)}")
        aligned, unaligned, no_affinity = self._filter_by_affinity(pod_uid, container, resource, available)
        for group in (aligned, unaligned, no_affinity):
            for device in group:
                if needed == 0:
                    return chosen
                chosen.append(device)
                needed -= 1
        return chosen

    def _filter_by_affinity(self, pod_uid: str, container: str, resource: str, available: set[str]):
        hint = self.affinity(pod_uid, container)
        if not self.has_topology_alignment(resource) or hint.mask is None:
            return [], [], sorted(available)
        per_node: dict[int, set[str]] = {}
        for d in available:
            for node in self.devices[resource][d].numa_nodes or (NO_TOPOLOGY,):
                per_node.setdefault(node, set()).add(d)

        def order(node: int):
            in_hint = node != NO_TOPOLOGY and bitmask.is_set(hint.mask, node)
            return (0 if in_hint else (2 if node == NO_TOPOLOGY else 1), len(per_node[node]), node)

        nodes = sorted(per_node, key=order)
        aligned, unaligned, no_affinity = [], [], []
        for d in sorted(available):
            for node in nodes:
                if d in per_node[node]:
                    if node == NO_TOPOLOGY:
                        no_affinity.append(d)
                    elif bitmask.is_set(hint.mask, node):
                        aligned.append(d)
                    else:
                        unaligned.append(d)
                    break
        return aligned, unaligned, no_affinity

    def remove_pod(self, pod_uid: str) -> None:
        self.allocated.pop(pod_uid, None)
        self.devices_to_reuse.pop(pod_uid, None)
