"""KubeletConfiguration: the fields of kubelet's config file that drive the NUMA resource managers.

A `kind: KubeletConfiguration` (kubelet.config.k8s.io/v1beta1) YAML file. Defaults follow
`pkg/kubelet/apis/config/v1beta1/defaults.go` (cpuManagerPolicy none, memoryManagerPolicy None,
topologyManagerPolicy none, topologyManagerScope container, evictionHard memory.available 100Mi
when evictionHard is not given); checks follow `pkg/kubelet/apis/config/validation/validation.go`
and `validation_reserved_memory.go` (messages word for word, several joined as kubelet's
aggregate error "[a, b]"), and cmd/kubelet's handling of reservedSystemCPUs (it must be a subset of
the machine's CPUs and replaces the cpu entries of kubeReserved/systemReserved).

Fields read: cpuManagerPolicy, cpuManagerPolicyOptions, reservedSystemCPUs, kubeReserved,
systemReserved, evictionHard, mergeDefaultEvictionSettings, topologyManagerPolicy,
topologyManagerScope, topologyManagerPolicyOptions, memoryManagerPolicy, reservedMemory,
featureGates. Other kubelet fields are accepted and ignored. labkit reconstructs kubelet v1.34:
feature gates it does not know are refused, as that kubelet would refuse them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from labkit.errors import ConfigError, LabkitError
from labkit.numa import cpuset
from labkit.numa.machine import Machine
from labkit.numa.memorymanager import hugepage_resource_name, is_memory_resource
from labkit.quantity import BINARY, Quantity, QuantityError, quantity_map

TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
DEFAULT_EVICTION_HARD = {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
                         "imagefs.available": "15%"}
# Feature gates that matter here, with their v1.34 defaults (pkg/features/kube_features.go:
# unchanged since v1.28 for these four).
FEATURE_GATES = {
    "CPUManagerPolicyAlphaOptions": False,
    "CPUManagerPolicyBetaOptions": True,
    "TopologyManagerPolicyAlphaOptions": False,
    "TopologyManagerPolicyBetaOptions": True,
}
KNOWN_FIELDS = ("cpuManagerPolicy", "cpuManagerPolicyOptions", "reservedSystemCPUs", "kubeReserved",
                "systemReserved", "evictionHard", "mergeDefaultEvictionSettings", "topologyManagerPolicy",
                "topologyManagerScope", "topologyManagerPolicyOptions", "memoryManagerPolicy", "reservedMemory",
                "featureGates")


@dataclass
class KubeletConfig:
    source: str = "<defaults>"
    cpu_manager_policy: str = "none"
    cpu_manager_policy_options: dict[str, str] = field(default_factory=dict)
    reserved_system_cpus: str = ""
    kube_reserved: dict[str, Quantity] = field(default_factory=dict)
    system_reserved: dict[str, Quantity] = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_EVICTION_HARD))
    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    topology_manager_policy_options: dict[str, str] = field(default_factory=dict)
    memory_manager_policy: str = "None"
    reserved_memory: list[tuple[int, dict[str, Quantity]]] = field(default_factory=list)
    feature_gates: dict[str, bool] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def gate(self, name: str) -> bool:
        return self.feature_gates.get(name, FEATURE_GATES[name])

    # -- what kubelet derives from the configuration ------------------------------------------------
    def reserved_cpus(self, machine: Machine) -> frozenset[int]:
        """cmd/kubelet getReservedCPUs: reservedSystemCPUs, which must exist on the machine."""
        if not self.reserved_system_cpus:
            return frozenset()
        cpus = cpuset.parse(self.reserved_system_cpus)   # syntax already validated
        online = machine.all_cpus()
        if not cpus <= set(online):
            raise LabkitError(f"{self.source}: reservedSystemCPUs: {self.reserved_system_cpus} is not a subset of "
                              f"online-cpus: {cpuset.format_cpus(online)}")
        return cpus

    def node_allocatable_reservation(self, machine: Machine) -> dict[str, Quantity]:
        """GetNodeAllocatableReservation: per capacity resource, system + kube reserved + hard eviction.

        With reservedSystemCPUs, kubelet drops kubeReserved.cpu and sets systemReserved.cpu to the
        number of reserved CPUs."""
        system, kube = dict(self.system_reserved), dict(self.kube_reserved)
        reserved_cpus = self.reserved_cpus(machine)
        if reserved_cpus:
            kube.pop("cpu", None)
            system["cpu"] = Quantity.parse(str(len(reserved_cpus)))
        capacity = machine_capacity(machine)
        eviction = self.hard_eviction_reservation(capacity)
        result = {}
        for resource in capacity:
            value = Quantity.of(0)
            for source in (system, kube, eviction):
                if resource in source:
                    value = value.add(source[resource])
            if not value.is_zero():
                result[resource] = value
        return result

    def hard_eviction_reservation(self, capacity: dict[str, Quantity]) -> dict[str, Quantity]:
        """hardEvictionReservation: only memory.available reserves node memory."""
        text = self.eviction_hard.get("memory.available")
        if text is None:
            return {}
        if text.endswith("%"):
            percent = float(text[:-1]) / 100
            return {"memory": Quantity.of(int(capacity["memory"].value_int() * percent), BINARY)}
        return {"memory": Quantity.parse(text)}


def machine_capacity(machine: Machine) -> dict[str, Quantity]:
    """The node capacity kubelet reports for cpu, memory and each hugepage size."""
    capacity = {"cpu": Quantity.of(machine.num_cores), "memory": Quantity.of(machine.memory_capacity, BINARY)}
    for node in machine.nodes:
        for pages in node.hugepages:
            name = hugepage_resource_name(pages.page_size_kb)
            total = pages.num_pages * pages.page_size_kb * 1024
            capacity[name] = Quantity.of(capacity[name].value + total if name in capacity else total, BINARY)
    return capacity


def load_config(path: str | Path | None) -> KubeletConfig:
    """A KubeletConfiguration from YAML (None: kubelet's defaults)."""
    if path is None:
        return KubeletConfig()
    path = Path(path)
    from labkit.inputs import load_yaml

    data = load_yaml(path)
    return config_from_dict(data, str(path))


def config_from_dict(data: Any, source: str = "<config>") -> KubeletConfig:
    if not isinstance(data, dict):
        raise ConfigError(source, None, "expected a KubeletConfiguration object")
    if data.get("kind") != "KubeletConfiguration":
        raise ConfigError(source, "kind", f"expected KubeletConfiguration, found {data.get('kind')!r}")
    api = data.get("apiVersion")
    if api not in ("kubelet.config.k8s.io/v1beta1", "kubelet.config.k8s.io/v1"):
        raise ConfigError(source, "apiVersion", f"expected kubelet.config.k8s.io/v1beta1, found {api!r}")
    cfg = KubeletConfig(source=source)
    cfg.cpu_manager_policy = _string(data, "cpuManagerPolicy", source, cfg.cpu_manager_policy)
    cfg.cpu_manager_policy_options = _string_map(data, "cpuManagerPolicyOptions", source)
    cfg.reserved_system_cpus = _string(data, "reservedSystemCPUs", source, "")
    cfg.kube_reserved = quantity_map(data.get("kubeReserved"), source, "kubeReserved")
    cfg.system_reserved = quantity_map(data.get("systemReserved"), source, "systemReserved")
    if data.get("evictionHard") is not None:
        cfg.eviction_hard = _string_map(data, "evictionHard", source)
        if data.get("mergeDefaultEvictionSettings") is True:
            cfg.eviction_hard = {**DEFAULT_EVICTION_HARD, **cfg.eviction_hard}
    for signal, value in cfg.eviction_hard.items():
        if signal == "memory.available" and not value.endswith("%"):
            try:
                Quantity.parse(value)
            except QuantityError as exc:
                raise ConfigError(source, f"evictionHard.{signal}", f"{value!r}: {exc}") from None
    cfg.topology_manager_policy = _string(data, "topologyManagerPolicy", source, cfg.topology_manager_policy)
    cfg.topology_manager_scope = _string(data, "topologyManagerScope", source, cfg.topology_manager_scope)
    cfg.topology_manager_policy_options = _string_map(data, "topologyManagerPolicyOptions", source)
    cfg.memory_manager_policy = _string(data, "memoryManagerPolicy", source, cfg.memory_manager_policy)
    cfg.reserved_memory = _reserved_memory(data.get("reservedMemory"), source)
    gates = data.get("featureGates") or {}
    if not isinstance(gates, dict) or not all(isinstance(v, bool) for v in gates.values()):
        raise ConfigError(source, "featureGates", "expected a map of feature gate name to true/false")
    for name in gates:
        if name not in FEATURE_GATES:
            raise LabkitError(f"{source}: unrecognized feature gate: {name} (labkit models these gates: "
                              f"{', '.join(sorted(FEATURE_GATES))})")
    cfg.feature_gates = dict(gates)
    for key in data:
        if key not in KNOWN_FIELDS:
            close = difflib.get_close_matches(key, KNOWN_FIELDS, n=1, cutoff=0.8)
            if close:
                cfg.warnings.append(f"{source}: unknown field {key!r} is ignored (did you mean {close[0]!r}?)")
    errors = validate(cfg)
    if errors:
        message = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise LabkitError(f"{source}: {message}")
    return cfg


def validate(cfg: KubeletConfig) -> list[str]:
    """ValidateKubeletConfiguration, the parts about these managers."""
    errors = []
    if cfg.topology_manager_policy not in TOPOLOGY_POLICIES:
        listed = " ".join(f'"{p}"' for p in TOPOLOGY_POLICIES)
        errors.append(f'invalid configuration: topologyManagerPolicy (--topology-manager-policy) '
                      f'"{cfg.topology_manager_policy}" must be one of: [{listed}]')
    if cfg.topology_manager_scope not in TOPOLOGY_SCOPES:
        errors.append(f'invalid configuration: topologyManagerScope (--topology-manager-scope) '
                      f'"{cfg.topology_manager_scope}" must be one of: "container", or "pod"')
    if cfg.reserved_system_cpus:
        try:
            cpuset.parse(cfg.reserved_system_cpus)
        except cpuset.CPUSetParseError as exc:
            errors.append(f"invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) "
                          f"{cfg.reserved_system_cpus}, error: {exc}")
    seen: set[tuple[int, str]] = set()
    for numa, limits in cfg.reserved_memory:
        for resource, quantity in limits.items():
            if not is_memory_resource(resource):
                errors.append(f'invalid configuration: the limit type "{resource}" for NUMA node {numa} is not '
                              f'supported, only [memory hugepages-<HugePageSize>] is accepted')
            if quantity.is_zero():
                errors.append(f'invalid configuration: reserved memory may not be zero for NUMA node {numa} and '
                              f'resource "{resource}"')
            if (numa, resource) in seen:
                errors.append(f'invalid configuration: the reserved memory has a duplicate value for NUMA node '
                              f'{numa} and resource "{resource}"')
            seen.add((numa, resource))
    return errors


def _string(data: dict, key: str, source: str, default: str) -> str:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ConfigError(source, key, f"expected a string, found {value!r}")
    return value


def _string_map(data: dict, key: str, source: str) -> dict[str, str]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(source, key, "expected a map of option name to string value")
    for name, item in value.items():
        if not isinstance(item, str):
            raise ConfigError(source, f"{key}.{name}", f"expected a string (quote it: \"{str(item).lower()}\"), "
                              f"found {item!r}")
    return {str(k): v for k, v in value.items()}


def _reserved_memory(value: Any, source: str) -> list[tuple[int, dict[str, Quantity]]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(source, "reservedMemory", "expected a list of {numaNode, limits}")
    out = []
    for i, entry in enumerate(value):
        at = f"reservedMemory[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("numaNode"), int) or isinstance(entry.get("numaNode"), bool):
            raise ConfigError(source, f"{at}.numaNode", "expected an integer NUMA node id")
        out.append((entry["numaNode"], quantity_map(entry.get("limits"), source, f"{at}.limits")))
    return out
