"""kubelet's device manager (pkg/kubelet/cm/devicemanager/manager.go ManagerImpl, endpoint.go,
topology_hints.go, pod_devices.go; plugin/v1beta1/server.go for registration), as plain Python:
time is passed in (`now`), a plugin is an object with the DevicePlugin calls.

Bookkeeping: each ListAndWatch message is the resource's complete device list (healthy and
unhealthy sets rebuilt); capacity = healthy + unhealthy, allocatable = healthy; a plugin whose
stream ended has all its devices marked unhealthy and its endpoint stopped, and 5 minutes later
(endpointStopGracePeriod) the next GetCapacity removes the resource.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol

VERSION = "v1beta1"
SUPPORTED_VERSIONS = ["v1beta1"]
HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"
STOP_GRACE_PERIOD = 5 * 60            # endpointStopGracePeriod
NO_TOPOLOGY = -1                      # the checkpoint's NUMA key for a device without topology


def unsorted_list(ids: Iterable[str], rng: random.Random | None = None) -> list[str]:
    """sets.Set[string].UnsortedList (k8s.io/apimachinery/pkg/util/sets/set.go): a Go set's items
    in map iteration order, which Go leaves unspecified and its runtime randomises. kubelet hands
    device IDs to a plugin so: manager.go allocateContainerResources (`allocDevices.UnsortedList()`
    for Allocate), callGetPreferredAllocationIfAvailable (available and must_include) and
    callPreStartContainerIfNeeded. A plugin can rely on no order; labkit shuffles them."""
    out = list(ids)
    (rng or random).shuffle(out)
    return out


class DeviceError(Exception):
    """An error of the device manager, with upstream's text."""


@dataclass(frozen=True)
class Device:
    id: str
    health: str = HEALTHY
    numa: tuple[int, ...] | None = None     # None: Device.topology unset

    @property
    def has_topology(self) -> bool:
        return bool(self.numa)


@dataclass
class Options:
    pre_start_required: bool = False
    get_preferred_allocation_available: bool = False


class Plugin(Protocol):
    def options(self) -> Options: ...
    def get_preferred_allocation(self, available: list[str], must_include: list[str], size: int) -> list[str] | None: ...
    def allocate(self, device_ids: list[str]) -> dict: ...


@dataclass
class Endpoint:
    resource: str
    plugin: Any
    options: Options
    stopped_at: float | None = None

    def expired(self, now: float) -> bool:
        return self.stopped_at is not None and now - self.stopped_at > STOP_GRACE_PERIOD


def valid_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a qualified name with a domain outside kubernetes.io,
    not `requests.`-prefixed."""
    if "/" not in name or name.startswith("requests.") or "kubernetes.io/" in name:
        return False
    domain, _, rest = name.partition("/")
    return bool(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", domain)) and \
        bool(re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", rest))


@dataclass
class Allocation:
    devices: list[str]
    response: dict
    numa: dict[int, list[str]] = field(default_factory=dict)


class DeviceManager:
    def __init__(self, numa_nodes: list[int] | None = None,
                 unsorted: Callable[[Iterable[str]], list[str]] = unsorted_list):
        self.numa_nodes = list(numa_nodes or [0])
        self.unsorted = unsorted              # how a Go set's IDs reach a plugin (unsorted_list)
        self.endpoints: dict[str, Endpoint] = {}
        self.all_devices: dict[str, dict[str, Device]] = {}
        self.healthy: dict[str, set[str]] = {}
        self.unhealthy: dict[str, set[str]] = {}
        # pod uid -> container -> resource -> Allocation (podDevices)
        self.pod_devices: dict[str, dict[str, dict[str, Allocation]]] = {}
        self.calls: list[dict] = []           # every call kubelet made to a plugin, for explain
        # kubelet's active Pods (UIDs) once its config sources are ready (sourcesReady.AllReady);
        # None: not ready yet, so UpdateAllocatedDevices frees nothing
        self.active_pods: set[str] | None = None
        self.pending_admission: str | None = None     # setPodPendingAdmission: the Pod being admitted

    # -- registration (plugin/v1beta1/server.go Register, manager.go PluginConnected) --------------
    def register(self, resource: str, plugin, version: str = VERSION) -> None:
        if version not in SUPPORTED_VERSIONS:
            raise DeviceError(f'requested API version "{version}" is not supported by kubelet. '
                              f'Supported version is ["{SUPPORTED_VERSIONS[0]}"]')
        if not valid_extended_resource_name(resource):
            raise DeviceError(f'the ResourceName "{resource}" is invalid')
        options = plugin.options() if plugin is not None else Options()
        self.calls.append({"call": "GetDevicePluginOptions", "resource": resource, "answer": options.__dict__})
        self.endpoints[resource] = Endpoint(resource, plugin, options)

    def connect(self, resource: str, plugin, options: Options | None = None) -> None:
        """An endpoint without the validation of Register (what the unit tests inject)."""
        self.endpoints[resource] = Endpoint(resource, plugin, options or Options())

    # -- ListAndWatch (genericDeviceUpdateCallback) -----------------------------------------------
    def list_and_watch(self, resource: str, devices: list[Device]) -> None:
        self.healthy[resource] = {d.id for d in devices if d.health == HEALTHY}
        self.unhealthy[resource] = {d.id for d in devices if d.health != HEALTHY}
        self.all_devices[resource] = {d.id: d for d in devices}

    def plugin_stopped(self, resource: str, at: float) -> None:
        """PluginDisconnected: every healthy device is marked unhealthy, the endpoint stops."""
        self.unhealthy.setdefault(resource, set()).update(self.healthy.get(resource, set()))
        self.healthy[resource] = set()
        if resource in self.endpoints:
            self.endpoints[resource].stopped_at = at

    # -- GetCapacity ------------------------------------------------------------------------------
    def get_capacity(self, now: float) -> tuple[dict[str, int], dict[str, int], list[str]]:
        capacity, allocatable, removed = {}, {}, []
        for resource in sorted(set(self.healthy) | set(self.unhealthy)):
            endpoint = self.endpoints.get(resource)
            if endpoint is None or endpoint.expired(now):
                self.endpoints.pop(resource, None)
                self.healthy.pop(resource, None)
                self.unhealthy.pop(resource, None)
                self.all_devices.pop(resource, None)
                removed.append(resource)
                continue
            capacity[resource] = len(self.healthy.get(resource, ())) + len(self.unhealthy.get(resource, ()))
            allocatable[resource] = len(self.healthy.get(resource, ()))
        return capacity, allocatable, removed

    # -- allocation -------------------------------------------------------------------------------
    def allocated_devices(self, resource: str) -> set[str]:
        return {d for containers in self.pod_devices.values() for resources in containers.values()
                for r, a in resources.items() if r == resource for d in a.devices}

    def is_device_plugin_resource(self, resource: str) -> bool:
        return resource in self.healthy or resource in {r for c in self.pod_devices.values()
                                                         for rs in c.values() for r in rs}

    def filter_by_affinity(self, resource: str, available: set[str], hint_numa: list[int] | None):
        """filterByAffinity: (aligned, unaligned, noAffinity); a device on several NUMA nodes
        goes where its first node in the order (hint nodes, then the others, each by fewer
        devices first) says."""
        devices = self.all_devices.get(resource, {})
        if hint_numa is None or not any(d.has_topology for d in devices.values()):
            return [], [], sorted(available)
        per_node: dict[int, list[str]] = {}
        for dev_id in sorted(available):
            device = devices.get(dev_id)
            for node in (device.numa if device and device.has_topology else [NO_TOPOLOGY]):
                per_node.setdefault(node, []).append(dev_id)
        in_hint = sorted((n for n in per_node if n in hint_numa), key=lambda n: (len(per_node[n]), n))
        others = sorted((n for n in per_node if n not in hint_numa and n != NO_TOPOLOGY), key=lambda n: (len(per_node[n]), n))
        order = in_hint + others + ([NO_TOPOLOGY] if NO_TOPOLOGY in per_node else [])
        aligned, unaligned, none = [], [], []
        placed = set()
        for node in order:
            for dev_id in per_node[node]:
                if dev_id in placed:
                    continue
                placed.add(dev_id)
                (aligned if node in hint_numa else none if node == NO_TOPOLOGY else unaligned).append(dev_id)
        return aligned, unaligned, none

    def _preferred(self, resource: str, available: list[str], must_include: list[str], size: int) -> list[str] | None:
        endpoint = self.endpoints.get(resource)
        if endpoint is None or not endpoint.options.get_preferred_allocation_available:
            return None
        # manager.go callGetPreferredAllocationIfAvailable: both sets as UnsortedList()
        available, must_include = self.unsorted(available), self.unsorted(must_include)
        call = {"call": "GetPreferredAllocation", "resource": resource, "available": available,
                "must_include": must_include, "size": size}
        try:
            answer = endpoint.plugin.get_preferred_allocation(list(available), list(must_include), size)
        except Exception as exc:
            raise DeviceError(f"device plugin GetPreferredAllocation rpc failed with err: {exc}") from None
        call["answer"] = answer
        self.calls.append(call)
        return answer or []

    def devices_to_allocate(self, pod_uid: str, container: str, resource: str, required: int,
                            reusable: set[str], hint_numa: list[int] | None = None) -> list[str] | None:
        """devicesToAllocate: the devices chosen for the container (None: nothing to do)."""
        had = self.pod_devices.get(pod_uid, {}).get(container, {}).get(resource)
        if had is not None:
            if len(had.devices) != required:
                raise DeviceError(f'pod "{pod_uid}" container "{container}" changed request for resource '
                                  f'"{resource}" from {len(had.devices)} to {required}')
            return None
        if resource not in self.healthy:
            raise DeviceError(f"cannot allocate unregistered device {resource}")
        if not self.healthy[resource]:
            raise DeviceError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
        chosen: list[str] = []
        # allocateRemainingFrom ranges over a Go set (`for device := range devices.Difference(allocated)`):
        # map order, which Go randomises; so are the reusable, aligned, unaligned and no-affinity ones taken
        for dev_id in self.unsorted(reusable):
            if len(chosen) < required:
                chosen.append(dev_id)
        needed = required - len(chosen)
        if needed == 0:
            return chosen
        available = self.healthy[resource] - self.allocated_devices(resource) - set(chosen)
        if len(available) < needed:
            raise DeviceError(f"requested number of devices unavailable for {resource}. "
                              f"Requested: {needed}, Available: {len(available)}")
        aligned, unaligned, none = self.filter_by_affinity(resource, available, hint_numa)

        def take(ids, limit_to=None):
            for dev_id in ids:
                if len(chosen) >= required:
                    return
                if dev_id not in chosen and (limit_to is None or dev_id in limit_to):
                    chosen.append(dev_id)

        if needed < len(aligned):
            preferred = self._preferred(resource, list(set(aligned) | set(chosen)), list(chosen), required)
            take(preferred or [], set(aligned))
            take(self.unsorted(aligned))
        else:
            take(self.unsorted(aligned))
            preferred = self._preferred(resource, list(available | set(chosen)), list(chosen), required)
            take(preferred or [], available)
            take(self.unsorted(unaligned))
            take(self.unsorted(none))
        if len(chosen) < required:
            raise DeviceError(f"unexpectedly allocated less resources than required. Requested: {required}, Got: {len(chosen)}")
        return chosen

    def allocate_container(self, pod_uid: str, container: str, limits: dict, reusable: dict[str, set[str]],
                           hint_numa: list[int] | None = None) -> dict[str, list[str]]:
        """allocateContainerResources: every device-plugin resource in the container's limits."""
        made: dict[str, list[str]] = {}
        updated = False
        for resource, count in limits.items():
            if not self.is_device_plugin_resource(resource):
                continue
            if not updated:     # garbage-collect stranded devices before the first allocation
                self.update_allocated_devices()
                updated = True
            chosen = self.devices_to_allocate(pod_uid, container, resource, int(count), reusable.get(resource, set()),
                                              hint_numa)
            if chosen is None:
                continue
            endpoint = self.endpoints.get(resource)
            if endpoint is None:
                raise DeviceError(f"unknown Device Plugin {resource}")
            sent = self.unsorted(chosen)    # allocateContainerResources: devs := allocDevices.UnsortedList()
            try:
                response = endpoint.plugin.allocate(list(sent)) if endpoint.plugin is not None else {}
            except DeviceError:
                raise
            except Exception as exc:
                # endpoint.go allocate returns the rpc's error as grpc-go words it; a transport
                # that already words it so (labkit.devices.kubelet) is passed through
                text = str(exc)
                raise DeviceError(text if text.startswith("rpc error: ") else
                                  f"rpc error: code = Unknown desc = {text}") from None
            self.calls.append({"call": "Allocate", "resource": resource, "devices": sent, "answer": response})
            numa: dict[int, list[str]] = {}
            for dev_id in sorted(chosen):
                device = self.all_devices.get(resource, {}).get(dev_id)
                node = device.numa[0] if device and device.has_topology else NO_TOPOLOGY
                numa.setdefault(node, []).append(dev_id)
            self.pod_devices.setdefault(pod_uid, {}).setdefault(container, {})[resource] = \
                Allocation(sorted(chosen), response or {}, numa)
            made[resource] = sorted(chosen)
        return made

    def admit_pod(self, pod: dict) -> dict[str, dict[str, list[str]]]:
        """Allocate for every init container, then every app container (Allocate per container,
        as admission calls it): non-restartable init containers' devices are reusable by the app
        containers after them."""
        uid = pod.get("uid") or pod["name"]
        self.pending_admission = uid
        reusable: dict[str, set[str]] = {}
        out = {}
        for c in pod.get("initContainers") or []:
            got = self.allocate_container(uid, c["name"], c.get("limits") or {}, reusable)
            out[c["name"]] = got
            if c.get("restartPolicy") != "Always":
                for resource, ids in got.items():
                    reusable.setdefault(resource, set()).update(ids)
        for c in pod.get("containers") or []:
            got = self.allocate_container(uid, c["name"], c.get("limits") or {}, reusable)
            out[c["name"]] = got
            for resource, ids in got.items():
                reusable.get(resource, set()).difference_update(ids)
        return out

    def update_allocated_devices(self) -> None:
        """UpdateAllocatedDevices: once kubelet's sources are ready, the allocations of every Pod
        that is neither active nor being admitted are dropped (podDevices.delete) and their
        devices are free again; before that, nothing is freed. Restored from a checkpoint, the
        allocations of a Pod that ended while kubelet was down go at the next allocation."""
        if self.active_pods is None:
            return
        keep = set(self.active_pods) | ({self.pending_admission} if self.pending_admission else set())
        for uid in [u for u in self.pod_devices if u not in keep]:
            del self.pod_devices[uid]

    def forget_pod(self, pod_uid: str) -> None:
        self.pod_devices.pop(pod_uid, None)


def admission_error(error: str) -> dict:
    """What the Pod shows (cm/admission/errors.go, kubelet rejectPod)."""
    message = f"Allocate failed due to {error}, which is unexpected"
    return {"reason": "UnexpectedAdmissionError", "message": message,
            "pod_status_message": f"Pod was rejected: {message}", "pod_phase": "Failed"}


def numa_masks(nodes: list[int]):
    """bitmask.IterateBitMasks: every non-empty set of NUMA nodes, smaller sets first."""
    from itertools import combinations
    for size in range(1, len(nodes) + 1):
        yield from (list(c) for c in combinations(sorted(nodes), size))


def topology_hints(manager: DeviceManager, resource: str, request: int, available: set[str],
                   reusable: set[str] | None = None, allocated: list[str] | None = None):
    """topology_hints.go: None when no device of the resource has topology (no preference);
    [] when no placement can work; else one hint per NUMA mask whose reusable devices all lie in
    it and that holds enough reusable + available devices, preferred when the mask is as small as
    any that holds `request` devices at all."""
    devices = manager.all_devices.get(resource, {})
    if not any(d.has_topology for d in devices.values()):
        return None
    reusable = reusable or set()
    if allocated is not None:
        if len(allocated) != request:
            return []
        available, reusable = set(allocated), set()
    elif len(available) + len(reusable) < request:
        return []

    def in_mask(dev_id, mask):
        device = devices.get(dev_id)
        return bool(device and device.has_topology and set(device.numa) & set(mask))

    hints, min_size = [], len(manager.numa_nodes)
    for mask in numa_masks(manager.numa_nodes):
        if sum(1 for d in devices if in_mask(d, mask)) >= request and len(mask) < min_size:
            min_size = len(mask)
        matching = 0
        outside = False
        for dev_id in reusable:
            device = devices.get(dev_id)
            if not device or not device.has_topology:
                continue
            if not in_mask(dev_id, mask):
                outside = True
                break
            matching += 1
        if outside:
            continue
        matching += sum(1 for d in available if in_mask(d, mask))
        if matching >= request:
            hints.append({"mask": mask, "preferred": False})
    for hint in hints:
        hint["preferred"] = len(hint["mask"]) == min_size
    return hints
