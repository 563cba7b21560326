"""The CPU Manager: `none` and `static` policies, hints, allocation, the shared pool.

Follows kubernetes/kubernetes `pkg/kubelet/cm/cpumanager/` as of v1.34. What changed there since
v1.32 does not change what labkit computes: logging and metrics, the allocation result carrying an
"aligned" flag, and the options below moving on (strict-cpu-reservation beta in v1.33,
prefer-align-cpus-by-uncorecache beta in v1.34, full-pcpus-only GA in v1.33). For the
reconstructed options, v1.34 allocates exactly as v1.32 did.
* `cpu_manager.go` NewManager: the static policy needs a CPU reservation (kube-reserved +
  system-reserved cpu, rounded up; or the reservedSystemCPUs set);
* `policy_options.go`: full-pcpus-only (GA since v1.33), distribute-cpus-across-numa,
  strict-cpu-reservation and prefer-align-cpus-by-uncorecache (beta: the CPUManagerPolicyBetaOptions
  gate is on by default), align-by-socket and distribute-cpus-across-cores (alpha, need the
  CPUManagerPolicyAlphaOptions gate), their incompatibilities, and ValidateStaticPolicyOptions;
* `policy_static.go`: reserved CPUs (taken with takeByTopology from all CPUs unless given),
  validateState, Allocate (SMT alignment errors, aligned CPUs first, init-container CPU reuse),
  RemoveContainer, GetTopologyHints / GetPodTopologyHints, generateCPUTopologyHints;
* `policy_none.go`: no exclusive CPUs, no hints, no options.

Not reconstructed: the options distribute-cpus-across-cores and prefer-align-cpus-by-uncorecache
(they are refused with a message saying so), in-place Pod resize, pod-level resources (Pods with
`spec.resources` are refused when they are read).

State (`state.State`): the default CPU set (the shared pool) and `assignments[podUID][container]`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping

from labkit.numa import bitmask
from labkit.numa.admit_result import AdmissionError
from labkit.numa.cpu_assignment import (CPUAllocationError, take_by_topology_numa_distributed,
                                        take_by_topology_numa_packed)
from labkit.numa.cpuset import format_cpus
from labkit.numa.merge import POLICY_SINGLE_NUMA_NODE, TopologyHint
from labkit.numa.pods import GUARANTEED, Container, Pod, qos_class
from labkit.numa.topology import CPUTopology

POLICY_NONE = "none"
POLICY_STATIC = "static"

FULL_PCPUS_ONLY = "full-pcpus-only"
DISTRIBUTE_CPUS_ACROSS_NUMA = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET = "align-by-socket"
DISTRIBUTE_CPUS_ACROSS_CORES = "distribute-cpus-across-cores"
STRICT_CPU_RESERVATION = "strict-cpu-reservation"
PREFER_ALIGN_BY_UNCORECACHE = "prefer-align-cpus-by-uncorecache"
ALPHA_OPTIONS = {ALIGN_BY_SOCKET, DISTRIBUTE_CPUS_ACROSS_CORES}
BETA_OPTIONS = {STRICT_CPU_RESERVATION, DISTRIBUTE_CPUS_ACROSS_NUMA, PREFER_ALIGN_BY_UNCORECACHE}
STABLE_OPTIONS = {FULL_PCPUS_ONLY}
NOT_RECONSTRUCTED = {DISTRIBUTE_CPUS_ACROSS_CORES, PREFER_ALIGN_BY_UNCORECACHE}


class CPUManagerError(Exception):
    """A CPU Manager error with kubelet's message (configuration, start, restore)."""


class SMTAlignmentError(AdmissionError):
    reason = "SMTAlignmentError"

    def __init__(self, requested: int, cpus_per_core: int, available_physical: int = 0, by_physical: bool = False):
        self.requested = requested
        self.cpus_per_core = cpus_per_core
        self.available_physical = available_physical
        self.by_physical = by_physical
        if by_physical:
            text = (f"SMT Alignment Error: not enough free physical CPUs: available physical CPUs = "
                    f"{available_physical}, requested CPUs = {requested}, CPUs per core = {cpus_per_core}")
        else:
            text = f"SMT Alignment Error: requested {requested} cpus not multiple cpus per core = {cpus_per_core}"
        super().__init__(text)


def parse_bool(value: str) -> bool:
    """strconv.ParseBool."""
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{value}": invalid syntax')


@dataclass(frozen=True)
class StaticPolicyOptions:
    full_pcpus_only: bool = False
    distribute_cpus_across_numa: bool = False
    align_by_socket: bool = False
    strict_cpu_reservation: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str] | None, alpha_enabled: bool = False,
              beta_enabled: bool = True) -> "StaticPolicyOptions":
        """NewStaticPolicyOptions (feature gates: alpha off, beta on, as kubelet defaults them)."""
        values: dict[str, bool] = {}
        for name in sorted(options or {}):
            value = str((options or {})[name])
            if name not in ALPHA_OPTIONS | BETA_OPTIONS | STABLE_OPTIONS:
                raise CPUManagerError(f'unknown CPU Manager Policy option: "{name}"')
            if name in ALPHA_OPTIONS and not alpha_enabled:
                raise CPUManagerError(f'CPU Manager Policy Alpha-level Options not enabled, but option "{name}" provided')
            if name in BETA_OPTIONS and not beta_enabled:
                raise CPUManagerError(f'CPU Manager Policy Beta-level Options not enabled, but option "{name}" provided')
            try:
                values[name] = parse_bool(value)
            except ValueError as exc:
                raise CPUManagerError(f'bad value for option "{name}": {exc}') from None
            if name in NOT_RECONSTRUCTED and values[name]:
                raise CPUManagerError(f'the CPU Manager option "{name}" is not part of labkit\'s reconstruction')
        opts = cls(values.get(FULL_PCPUS_ONLY, False), values.get(DISTRIBUTE_CPUS_ACROSS_NUMA, False),
                   values.get(ALIGN_BY_SOCKET, False), values.get(STRICT_CPU_RESERVATION, False))
        return opts

    def validate(self, topo: CPUTopology, topology_manager_policy: str) -> None:
        """ValidateStaticPolicyOptions."""
        if self.align_by_socket:
            if topology_manager_policy == POLICY_SINGLE_NUMA_NODE:
                raise CPUManagerError(f"Topolgy manager {POLICY_SINGLE_NUMA_NODE} policy is incompatible with "
                                      f"CPUManager {ALIGN_BY_SOCKET} policy option")
            if topo.num_sockets > topo.num_numa_nodes:
                raise CPUManagerError("Align by socket is not compatible with hardware where number of sockets "
                                      "are more than number of NUMA")


@dataclass
class CPUState:
    """The CPU Manager state: the shared pool and the exclusive assignments."""

    default_cpu_set: frozenset[int] = frozenset()
    assignments: dict[str, dict[str, frozenset[int]]] = field(default_factory=dict)

    def get_cpu_set(self, pod_uid: str, container: str) -> frozenset[int] | None:
        return self.assignments.get(pod_uid, {}).get(container)

    def set_cpu_set(self, pod_uid: str, container: str, cpus) -> None:
        self.assignments.setdefault(pod_uid, {})[container] = frozenset(cpus)

    def delete(self, pod_uid: str, container: str) -> None:
        self.assignments.get(pod_uid, {}).pop(container, None)
        if pod_uid in self.assignments and not self.assignments[pod_uid]:
            del self.assignments[pod_uid]


AffinityLookup = Callable[[str, str], TopologyHint]


def take_aligned_first(allocatable, aligned, num_cpus: int, take) -> frozenset[int]:
    """The order of allocateCPUs (policy_static.go): as many CPUs as possible from `aligned` (the
    CPUs of the topology hint's NUMA nodes; None without a hint), the rest from all of
    `allocatable`, each time chosen by `take(available, n)` (takeByTopology)."""
    result: frozenset[int] = frozenset()
    if aligned is not None:
        result = take(aligned, min(num_cpus, len(aligned)))
    return result | take(frozenset(allocatable) - result, num_cpus - len(result))


def _no_affinity(pod_uid: str, container: str) -> TopologyHint:
    return TopologyHint(None, False)


class NonePolicy:
    name = POLICY_NONE

    def __init__(self, options: Mapping[str, str] | None = None):
        if options:
            rendered = " ".join(f"{k}:{options[k]}" for k in sorted(options))
            raise CPUManagerError(f"None policy: received unsupported options=map[{rendered}]")

    def start(self, state: CPUState) -> None:
        pass

    def allocate(self, state: CPUState, pod: Pod, container: Container) -> None:
        pass

    def remove_container(self, state: CPUState, pod_uid: str, container: str) -> None:
        pass

    def get_topology_hints(self, state: CPUState, pod: Pod, container: Container):
        return None

    def get_pod_topology_hints(self, state: CPUState, pod: Pod):
        return None

    def exclusive_cpus(self, state: CPUState, pod_uid: str, container: str) -> frozenset[int] | None:
        return None


class StaticPolicy:
    name = POLICY_STATIC

    def __init__(self, topo: CPUTopology, num_reserved_cpus: int, reserved_cpus=frozenset(),
                 affinity: AffinityLookup = _no_affinity, options: StaticPolicyOptions | Mapping | None = None,
                 topology_manager_policy: str = "none", alpha_options_enabled: bool = True):
        """NewStaticPolicy. `options` may be parsed options or the raw option map."""
        if not isinstance(options, StaticPolicyOptions):
            options = StaticPolicyOptions.parse(options, alpha_enabled=alpha_options_enabled)
        options.validate(topo, topology_manager_policy)
        self.topology = topo
        self.options = options
        self.affinity = affinity
        self.cpus_to_reuse: dict[str, frozenset[int]] = {}
        self.cpu_group_size = topo.cpus_per_core()
        if reserved_cpus:
            reserved = frozenset(reserved_cpus)
        else:
            # takeByTopology from all CPUs: the lowest-numbered cores, e.g. {0,4} on an 8-CPU HT box.
            try:
                reserved = self.take_by_topology(topo.cpus(), num_reserved_cpus)
            except CPUAllocationError:
                reserved = frozenset()
        if len(reserved) != num_reserved_cpus:
            raise CPUManagerError(f"[cpumanager] unable to reserve the required amount of CPUs "
                                  f"(size of {format_cpus(reserved)} did not equal {num_reserved_cpus})")
        physical: set[int] = set()
        for cpu in sorted(reserved):
            if cpu not in topo.details:
                raise CPUManagerError("[cpumanager] unable to build the reserved physical CPUs from the "
                                      f"reserved set: unknown CPU ID: {cpu}")
            physical |= topo.cpus_in_cores(topo.details[cpu].core)
        self.reserved_cpus = reserved
        self.reserved_physical_cpus = frozenset(physical)

    # -- state -------------------------------------------------------------------------------------
    def start(self, state: CPUState) -> None:
        """Start -> validateState: initialise an empty state, or check a restored one."""
        all_cpus = self.topology.cpus()
        if self.options.strict_cpu_reservation:
            all_cpus = all_cpus - self.reserved_cpus
        default = state.default_cpu_set
        if not default:
            if state.assignments:
                raise CPUManagerError("default cpuset cannot be empty")
            state.default_cpu_set = all_cpus
            return
        if self.options.strict_cpu_reservation:
            overlap = self.reserved_cpus & default
            if overlap:
                raise CPUManagerError(f'some of strictly reserved cpus: "{format_cpus(overlap)}" are present in '
                                      f'defaultCpuSet: "{format_cpus(default)}"')
        elif not self.reserved_cpus <= default:
            raise CPUManagerError(f'not all reserved cpus: "{format_cpus(self.reserved_cpus)}" are present in '
                                  f'defaultCpuSet: "{format_cpus(default)}"')
        for pod in sorted(state.assignments):
            for container in sorted(state.assignments[pod]):
                cpus = state.assignments[pod][container]
                if cpus & default:
                    raise CPUManagerError(f'pod: {pod}, container: {container} cpuset: "{format_cpus(cpus)}" '
                                          f'overlaps with default cpuset "{format_cpus(default)}"')
        known = set(default)
        for containers in state.assignments.values():
            for cpus in containers.values():
                known |= cpus
        if known != set(all_cpus):
            raise CPUManagerError(f'current set of available CPUs "{format_cpus(all_cpus)}" doesn\'t match with '
                                  f'CPUs in state "{format_cpus(known)}"')

    def get_available_cpus(self, state: CPUState) -> frozenset[int]:
        return state.default_cpu_set - self.reserved_cpus

    def get_available_physical_cpus(self, state: CPUState) -> frozenset[int]:
        return state.default_cpu_set - self.reserved_physical_cpus

    # -- requests ------------------------------------------------------------------------------------
    def guaranteed_cpus(self, pod: Pod, container: Container) -> int:
        """guaranteedCPUs: the integer CPU request of a container of a Guaranteed pod, else 0."""
        if qos_class(pod) != GUARANTEED:
            return 0
        cpu = container.requests.get("cpu")
        if cpu is None or cpu.value_int() * 1000 != cpu.milli_value():
            return 0
        return cpu.value_int()

    def pod_guaranteed_cpus(self, pod: Pod) -> int:
        """podGuaranteedCPUs: max(regular init containers (+ earlier sidecars), apps + sidecars)."""
        by_init = 0
        by_sidecars = 0
        for container in pod.init_containers:
            if "cpu" not in container.requests:
                continue
            cpus = self.guaranteed_cpus(pod, container)
            if container.sidecar:
                by_sidecars += cpus
            elif by_sidecars + cpus > by_init:
                by_init = by_sidecars + cpus
        by_apps = sum(self.guaranteed_cpus(pod, c) for c in pod.containers if "cpu" in c.requests)
        return max(by_init, by_apps + by_sidecars)

    # -- allocation ----------------------------------------------------------------------------------
    def take_by_topology(self, available, num_cpus: int) -> frozenset[int]:
        if self.options.distribute_cpus_across_numa:
            group = self.cpu_group_size if self.options.full_pcpus_only else 1
            return take_by_topology_numa_distributed(self.topology, available, num_cpus, group)
        return take_by_topology_numa_packed(self.topology, available, num_cpus)

    def allocate(self, state: CPUState, pod: Pod, container: Container) -> None:
        """Allocate: exclusive CPUs for a Guaranteed container with an integer CPU request."""
        num_cpus = self.guaranteed_cpus(pod, container)
        if num_cpus == 0:
            return
        if self.options.full_pcpus_only:
            if num_cpus % self.cpu_group_size != 0:
                raise SMTAlignmentError(num_cpus, self.cpu_group_size)
            available_physical = len(self.get_available_physical_cpus(state))
            if num_cpus > available_physical:
                raise SMTAlignmentError(num_cpus, self.cpu_group_size, available_physical, by_physical=True)
        existing = state.get_cpu_set(pod.uid, container.name)
        if existing is not None:
            self.update_cpus_to_reuse(pod, container, existing)
            return
        hint = self.affinity(pod.uid, container.name)
        cpus = self.allocate_cpus(state, num_cpus, hint.mask, self.cpus_to_reuse.get(pod.uid, frozenset()))
        state.set_cpu_set(pod.uid, container.name, cpus)
        self.update_cpus_to_reuse(pod, container, cpus)

    def allocate_cpus(self, state: CPUState, num_cpus: int, numa_affinity: int | None, reusable) -> frozenset[int]:
        """allocateCPUs: CPUs of the hint's NUMA nodes (or sockets) first, then any others."""
        allocatable = self.get_available_cpus(state) | frozenset(reusable)
        aligned = None if numa_affinity is None else self.get_aligned_cpus(numa_affinity, allocatable)
        result = take_aligned_first(allocatable, aligned, num_cpus, self.take_by_topology)
        state.default_cpu_set = state.default_cpu_set - result
        return result

    def get_aligned_cpus(self, numa_affinity: int, allocatable) -> frozenset[int]:
        bits = bitmask.get_bits(numa_affinity)
        if self.options.align_by_socket:
            sockets = self.topology.sockets_in_numa_nodes(*bits)
            return frozenset(allocatable) & self.topology.cpus_in_sockets(*sockets)
        return frozenset(allocatable) & self.topology.cpus_in_numa_nodes(*bits)

    def update_cpus_to_reuse(self, pod: Pod, container: Container, cpus) -> None:
        """Init containers' CPUs can be reused by later containers of the same Pod (one Pod at a time)."""
        for uid in list(self.cpus_to_reuse):
            if uid != pod.uid:
                del self.cpus_to_reuse[uid]
        reuse = self.cpus_to_reuse.setdefault(pod.uid, frozenset())
        if pod.is_regular_init_container(container.name):
            self.cpus_to_reuse[pod.uid] = reuse | frozenset(cpus)
        else:  # app containers and sidecars (restartable init containers run alongside them)
            self.cpus_to_reuse[pod.uid] = reuse - frozenset(cpus)

    def remove_container(self, state: CPUState, pod_uid: str, container: str) -> None:
        """RemoveContainer: CPUs go back to the pool unless a sibling container still holds them."""
        in_use = frozenset().union(*(cpus for name, cpus in state.assignments.get(pod_uid, {}).items()
                                     if name != container))
        released = state.get_cpu_set(pod_uid, container)
        if released is not None:
            state.delete(pod_uid, container)
            state.default_cpu_set = state.default_cpu_set | (released - in_use)

    def exclusive_cpus(self, state: CPUState, pod_uid: str, container: str) -> frozenset[int] | None:
        return state.get_cpu_set(pod_uid, container)

    # -- hints ---------------------------------------------------------------------------------------
    def get_topology_hints(self, state: CPUState, pod: Pod, container: Container):
        requested = self.guaranteed_cpus(pod, container)
        if requested == 0:
            return None
        allocated = state.get_cpu_set(pod.uid, container.name)
        if allocated is not None:
            if len(allocated) != requested:
                return {"cpu": []}
            return {"cpu": self.generate_cpu_topology_hints(allocated, frozenset(), requested)}
        available = self.get_available_cpus(state)
        reusable = self.cpus_to_reuse.get(pod.uid, frozenset())
        return {"cpu": self.generate_cpu_topology_hints(available, reusable, requested)}

    def get_pod_topology_hints(self, state: CPUState, pod: Pod):
        requested = self.pod_guaranteed_cpus(pod)
        if requested == 0:
            return None
        assigned: frozenset[int] = frozenset()
        for container in pod.all_containers():
            allocated = state.get_cpu_set(pod.uid, container.name)
            if allocated is not None:
                if len(allocated) != self.guaranteed_cpus(pod, container):
                    return {"cpu": []}
                assigned |= allocated
        if len(assigned) == requested:
            return {"cpu": self.generate_cpu_topology_hints(assigned, frozenset(), requested)}
        available = self.get_available_cpus(state)
        reusable = self.cpus_to_reuse.get(pod.uid, frozenset()) | assigned
        return {"cpu": self.generate_cpu_topology_hints(available, reusable, requested)}

    def generate_cpu_topology_hints(self, available, reusable, request: int) -> list[TopologyHint]:
        """generateCPUTopologyHints: every NUMA mask with enough CPUs; the smallest possible masks
        (by capacity, not by what is free) are preferred."""
        numa_nodes = self.topology.numa_nodes()
        min_affinity_size = len(numa_nodes)
        masks = []
        for mask in bitmask.iterate_bitmasks(numa_nodes):
            bits = bitmask.get_bits(mask)
            in_mask = self.topology.cpus_in_numa_nodes(*bits)
            if len(in_mask) >= request and bitmask.count(mask) < min_affinity_size:
                min_affinity_size = bitmask.count(mask)
            if any(self.topology.details[c].numa not in bits for c in reusable):
                continue
            matching = len(reusable) + len(frozenset(available) & in_mask)
            if matching < request:
                continue
            masks.append(mask)
        return [TopologyHint(mask, self._is_preferred(mask, min_affinity_size)) for mask in masks]

    def _is_preferred(self, mask: int, min_affinity_size: int) -> bool:
        if self.options.align_by_socket and self._is_hint_socket_aligned(mask, min_affinity_size):
            return True
        return bitmask.count(mask) == min_affinity_size

    def _is_hint_socket_aligned(self, mask: int, min_affinity_size: int) -> bool:
        numa_per_socket = self.topology.num_numa_nodes // self.topology.num_sockets
        if numa_per_socket == 0:
            return False
        min_sockets = (min_affinity_size + numa_per_socket - 1) // numa_per_socket
        return len(self.topology.sockets_in_numa_nodes(*bitmask.get_bits(mask))) == min_sockets


def new_policy(policy_name: str, options: Mapping[str, str] | None, topo: CPUTopology,
               reserved_system_cpus: frozenset[int], reserved_cpu_quantity, affinity: AffinityLookup,
               topology_manager_policy: str, alpha_options_enabled: bool = False):
    """cpumanager.NewManager's policy choice, with its errors.

    `reserved_cpu_quantity` is the node-allocatable CPU reservation (kube-reserved + system-reserved
    cpu, or the size of reservedSystemCPUs); None when nothing reserves CPU."""
    if policy_name == POLICY_NONE:
        try:
            return NonePolicy(options)
        except CPUManagerError as exc:
            raise CPUManagerError(f"new none policy error: {exc}") from None
    if policy_name == POLICY_STATIC:
        if reserved_cpu_quantity is None:
            raise CPUManagerError("[cpumanager] unable to determine reserved CPU resources for static policy")
        if reserved_cpu_quantity.is_zero():
            raise CPUManagerError("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu "
                                  "to be greater than zero")
        num_reserved = math.ceil(reserved_cpu_quantity.milli_value() / 1000)
        try:
            opts = StaticPolicyOptions.parse(options, alpha_enabled=alpha_options_enabled)
            return StaticPolicy(topo, num_reserved, reserved_system_cpus, affinity, opts, topology_manager_policy)
        except CPUManagerError as exc:
            raise CPUManagerError(f"new static policy error: {exc}") from None
    raise CPUManagerError(f'unknown policy: "{policy_name}"')
