"""Node ports of Services, allocated as kube-apiserver v1.34's Service REST does it
(pkg/registry/core/service/storage/alloc.go: txnAllocNodePorts, initNodePorts,
allocHealthCheckNodePort, txnUpdateNodePorts, updateNodePorts, updateHealthCheckNodePort,
releaseNodePorts; storage.go beginCreate / beginUpdate,
which run before the strategy, so validating admission sees the allocated ports).

Upstream keeps a bitmap of the range in etcd; here the allocated ports are those the stored
Services hold, plus the ones requests in flight have reserved and not yet stored (the bitmap's
uncommitted allocations). A port is thus free again as soon as its Service is deleted or its
update to ClusterIP or ExternalName is stored (releaseNodePorts). The draw is labkit/nodeports.py's.
"""

from __future__ import annotations

import random
import threading
from typing import Callable

from labkit import nodeports
from labkit.apiserver.errors import field_invalid, internal, invalid

NODE_PORT_TYPES = ("NodePort", "LoadBalancer")


def _collect(spec: dict) -> list[int]:
    """collectServiceNodePorts (plus the health-check port the allocator also holds)."""
    ports = [p.get("nodePort") for p in spec.get("ports") or [] if p.get("nodePort")]
    if spec.get("healthCheckNodePort"):
        ports.append(spec["healthCheckNodePort"])
    return ports


def needs_health_check(spec: dict) -> bool:
    """pkg/api/service/util.go NeedsHealthCheck: a LoadBalancer Service with
    externalTrafficPolicy Local (a NodePort Service with Local gets no health-check port)."""
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def _should_allocate(spec: dict) -> bool:
    """shouldAllocateNodePorts: NodePort always; LoadBalancer unless allocateLoadBalancerNodePorts=false."""
    if spec.get("type") == "NodePort":
        return True
    return spec.get("type") == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False


class NodePortAllocator:
    """One per registry. `rng` makes the draw reproducible in tests."""

    def __init__(self, port_range: tuple[int, int] = nodeports.DEFAULT_RANGE, rng: random.Random | None = None):
        self.low, self.high = port_range
        self.rng = rng or random.Random()
        self._lock = threading.Lock()
        self._reserved: dict[int, object] = {}      # port -> the request (token) that holds it

    def _used(self, registry, rt, namespace: str, name: str, token: object) -> set[int]:
        used = {port for port, holder in self._reserved.items() if holder is not token}
        for (ns, other), obj, _ in registry.store.scan(rt.storage_key)[0]:
            if (ns, other) != (namespace, name):
                used.update(_collect(obj.get("spec") or {}))
        return used

    def begin(self, registry, rt, obj: dict, old: dict | None) -> Callable[[], None]:
        """Allocate `obj`'s node ports (old: the stored Service of an update); returns the finish
        function that drops this request's reservations (the stored object holds them after a
        write; after a failure they are free again, the transaction's revert)."""
        token = object()
        meta = obj["metadata"]
        try:
            with self._lock:
                used = self._used(registry, rt, meta.get("namespace", ""), meta.get("name", ""), token)
                if old is None:
                    self._init_node_ports(obj, used, token)
                    if needs_health_check(obj.get("spec") or {}):
                        self._alloc_health_check_node_port(obj, used, token)
                else:
                    if (obj.get("spec") or {}).get("type") in NODE_PORT_TYPES:
                        self._update_node_ports(obj, old, used, token)
                    # updateHealthCheckNodePort: allocated when the Service comes to need one; one
                    # it no longer needs is free once the update is stored (the field is dropped:
                    # drop_type_dependent_node_ports)
                    if needs_health_check(obj.get("spec") or {}) and not needs_health_check(old.get("spec") or {}):
                        self._alloc_health_check_node_port(obj, used, token)
        except BaseException:
            self._finish(token)
            raise
        return lambda: self._finish(token)

    def _finish(self, token: object) -> None:
        with self._lock:
            for port in [p for p, holder in self._reserved.items() if holder is token]:
                del self._reserved[port]

    def _allocate(self, port: int, used: set[int], token: object, index: int, name: str) -> None:
        """PortAllocationOperation.Allocate: a named port, or 422 with the allocator's text."""
        problem = nodeports.check(port, self.low, self.high, used)
        if problem:
            raise invalid("Service", "", name, [field_invalid(f"spec.ports[{index}].nodePort", port, problem)])
        used.add(port)
        self._reserved[port] = token

    def _allocate_next(self, used: set[int], token: object) -> int:
        """PortAllocationOperation.AllocateNext; a full range is an internal error upstream."""
        port = nodeports.draw(self.low, self.high, used, self.rng)
        if port is None:
            raise internal(f"failed to allocate a nodePort: {nodeports.FULL}")
        used.add(port)
        self._reserved[port] = token
        return port

    def _alloc_health_check_node_port(self, obj: dict, used: set[int], token: object) -> None:
        """allocHealthCheckNodePort (alloc.go): the requested spec.healthCheckNodePort, or one
        drawn from the same range and allocator as the node ports; a failure is an internal error."""
        spec = obj.setdefault("spec", {})
        requested = spec.get("healthCheckNodePort")
        if requested:
            problem = nodeports.check(requested, self.low, self.high, used)
            if problem:
                raise internal(f"failed to allocate requested HealthCheck NodePort {requested}: {problem}")
            used.add(requested)
            self._reserved[requested] = token
            return
        port = nodeports.draw(self.low, self.high, used, self.rng)
        if port is None:
            raise internal(f"failed to allocate a HealthCheck NodePort 0: {nodeports.FULL}")
        used.add(port)
        self._reserved[port] = token
        spec["healthCheckNodePort"] = port

    def _init_node_ports(self, obj: dict, used: set[int], token: object) -> None:
        """txnAllocNodePorts / initNodePorts: ports of the same number share one node port."""
        spec = obj.get("spec") or {}
        if spec.get("type") not in NODE_PORT_TYPES:
            return
        name = obj["metadata"].get("name", "")
        ports = spec.get("ports") or []
        by_port: dict = {}
        for i, port in enumerate(ports):
            if not port.get("nodePort") and not _should_allocate(spec):
                continue
            allocated = by_port.get(port.get("port"))
            if not allocated:
                requested = next((p["nodePort"] for p in ports
                                  if p.get("port") == port.get("port") and p.get("nodePort")), 0)
                if requested:
                    self._allocate(requested, used, token, i, name)
                    port["nodePort"] = requested
                else:
                    port["nodePort"] = self._allocate_next(used, token)
                by_port[port.get("port")] = port["nodePort"]
            elif port.get("nodePort") != allocated:
                if not port.get("nodePort"):
                    port["nodePort"] = allocated
                else:
                    self._allocate(port["nodePort"], used, token, i, name)

    def _update_node_ports(self, obj: dict, old: dict, used: set[int], token: object) -> None:
        """updateNodePorts: a port the Service already held stays its own; a new named one is
        allocated, an unnamed one drawn. Ports the update drops are free once it is stored."""
        spec = obj.get("spec") or {}
        name = obj["metadata"].get("name", "")
        held = set(_collect(old.get("spec") or {}))
        for i, port in enumerate(spec.get("ports") or []):
            if not port.get("nodePort") and not _should_allocate(spec):
                continue
            if port.get("nodePort"):
                if port["nodePort"] not in held and self._reserved.get(port["nodePort"]) is not token:
                    self._allocate(port["nodePort"], used, token, i, name)
            else:
                port["nodePort"] = self._allocate_next(used, token)


def patch_allocated_values(new: dict, old: dict) -> None:
    """storage.go patchAllocatedValues (node ports): an update that leaves a port's nodePort out
    keeps the one allocated to that port (matched by port number and protocol), when the Service
    is and was of a type with node ports, so `kubectl replace -f` of a manifest works."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    # ... and the health-check port, when the Service needed one and still does
    if needs_health_check(spec) and needs_health_check(old_spec) and not spec.get("healthCheckNodePort"):
        if old_spec.get("healthCheckNodePort"):
            spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]
    if spec.get("type") in NODE_PORT_TYPES and old_spec.get("type") in NODE_PORT_TYPES:
        allocated = {(p.get("port"), p.get("protocol")): p.get("nodePort") for p in old_spec.get("ports") or []}
        for port in spec.get("ports") or []:
            if not port.get("nodePort") and allocated.get((port.get("port"), port.get("protocol"))):
                port["nodePort"] = allocated[(port.get("port"), port.get("protocol"))]


def drop_type_dependent_node_ports(new: dict, old: dict) -> None:
    """strategy.go dropTypeDependentFields (node ports): a Service leaving NodePort/LoadBalancer
    loses the node ports it held, unless the update also names new ones (validation's business)."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    # a Service that no longer needs its health-check port loses it, unless the update changed it
    if needs_health_check(old_spec) and not needs_health_check(spec) and \
            spec.get("healthCheckNodePort") == old_spec.get("healthCheckNodePort"):
        spec.pop("healthCheckNodePort", None)
    if old_spec.get("type") in NODE_PORT_TYPES and spec.get("type") not in NODE_PORT_TYPES:
        before = {p.get("nodePort") for p in old_spec.get("ports") or [] if p.get("nodePort")}
        after = {p.get("nodePort") for p in spec.get("ports") or [] if p.get("nodePort")}
        if after <= before:
            for port in spec.get("ports") or []:
                port.pop("nodePort", None)
