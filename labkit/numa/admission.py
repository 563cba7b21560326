"""A kubelet's NUMA resource managers on one machine: start them, admit Pods, keep checkpoints.

`Node(machine, config, state_dir)` does what kubelet's container manager does (kubernetes/kubernetes
`pkg/kubelet/cm/container_manager_linux.go`, v1.34): create the Topology Manager, then the Device,
CPU and Memory Managers (registered as hint providers in that order), then start the CPU and
Memory Managers, which restore `cpu_manager_state` / `memory_manager_state` from the state
directory (kubelet's root dir) and validate them. `admit(pod)` is the Topology Manager's admit
handler (kubelet's resource-allocation admit handler); later admit handlers (node-allocatable fit,
eviction, ...) are not part of this reconstruction.

Pods admitted in earlier runs stay in the checkpoints, as Pods still running on the node, until
`remove_stale_state` is told which Pods are still active (kubelet's removeStaleState, run by the CPU
and Memory Managers before every hint and allocation: the state of every other Pod is released).
A Pod that is rejected part-way keeps what was allocated until that cleanup; labkit releases it
right away, which the next Pod cannot tell apart. `add_container` is what kubelet calls when it
starts a container (AddContainer): the Memory Manager then releases the memory of the Pod's
regular init containers that ran before it (memory_manager.go), the CPU Manager keeps their CPUs
(cpu_manager.go).

Where a container runs (what kubelet writes to its cpuset cgroup):
* CPUs: its exclusive CPUs, else the shared pool (the CPU Manager's default set); with the `none`
  CPU Manager policy kubelet does not pin at all (every CPU);
* memory nodes: the NUMA nodes of its Memory Manager blocks, else not restricted (None).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from labkit.errors import LabkitError
from labkit.numa import checkpoint, cpumanager, memorymanager
from labkit.numa.admit_result import AdmitResult
from labkit.numa.config import KubeletConfig
from labkit.numa.cpumanager import CPUManagerError, CPUState
from labkit.numa.devicemanager import DeviceManager
from labkit.numa.machine import Machine
from labkit.numa.memorymanager import MemoryManagerError, MemoryState
from labkit.numa.merge import TopologyHint
from labkit.numa.pods import Container, Pod, qos_class
from labkit.numa.topology import CPUTopology
from labkit.numa.topologymanager import PodDecision, TopologyManager, TopologyManagerError


class KubeletStartError(LabkitError):
    """kubelet would refuse to start with this machine, configuration or state."""


class _CPUProvider:
    def __init__(self, policy, state: CPUState):
        self.policy, self.state = policy, state

    def get_topology_hints(self, pod: Pod, container: Container):
        return self.policy.get_topology_hints(self.state, pod, container)

    def get_pod_topology_hints(self, pod: Pod):
        return self.policy.get_pod_topology_hints(self.state, pod)

    def allocate(self, pod: Pod, container: Container) -> None:
        self.policy.allocate(self.state, pod, container)


class _MemoryProvider(_CPUProvider):
    pass


@dataclass
class ContainerResult:
    name: str
    init: bool
    evaluated: bool = False
    hints: dict = field(default_factory=dict)        # resource -> None | [TopologyHint]
    best_hint: TopologyHint | None = None
    cpus: frozenset[int] = frozenset()
    exclusive: bool = False
    memory_nodes: list[int] | None = None

    def to_json(self, pod_admitted: bool) -> dict:
        return {
            "name": self.name, "init": self.init, "evaluated": self.evaluated, "admitted": pod_admitted,
            "hints": {r: None if h is None else [x.to_json() for x in h] for r, h in self.hints.items()},
            "best_hint": None if self.best_hint is None else self.best_hint.to_json(),
            "cpus": sorted(self.cpus), "exclusive": self.exclusive, "memory_nodes": self.memory_nodes,
        }


@dataclass
class PodResult:
    pod: Pod
    qos: str
    result: AdmitResult
    scope: str
    containers: list[ContainerResult]

    @property
    def admitted(self) -> bool:
        return self.result.admit

    def to_json(self) -> dict:
        return {"name": self.pod.name, "namespace": self.pod.namespace, "uid": self.pod.uid, "qos": self.qos,
                "admitted": self.result.admit, "reason": self.result.reason, "message": self.result.message,
                "scope": self.scope, "containers": [c.to_json(self.result.admit) for c in self.containers]}


def _merged_hints(provided: list) -> dict:
    hints: dict = {}
    for provider in provided:
        for resource, value in sorted((provider or {}).items()):
            hints[resource] = value
    return hints


class Node:
    def __init__(self, machine: Machine, config: KubeletConfig, state_dir: str | Path | None = None):
        self.machine = machine
        self.config = config
        self.state_dir = Path(state_dir) if state_dir is not None else None
        try:
            self.topology_manager = TopologyManager(machine, config.topology_manager_policy,
                                                    config.topology_manager_scope,
                                                    config.topology_manager_policy_options,
                                                    config.gate("TopologyManagerPolicyBetaOptions"))
        except TopologyManagerError as exc:
            raise KubeletStartError(f"kubelet would not start: {exc}") from None
        affinity = self.topology_manager.get_affinity
        self.devices = DeviceManager(machine.devices, machine.node_ids, affinity)
        self.topology = CPUTopology.discover(machine)
        reservation = config.node_allocatable_reservation(machine)
        self.reservation = reservation
        try:
            self.cpu_policy = cpumanager.new_policy(
                config.cpu_manager_policy, config.cpu_manager_policy_options, self.topology,
                config.reserved_cpus(machine), reservation.get("cpu"), affinity, config.topology_manager_policy,
                config.gate("CPUManagerPolicyAlphaOptions"))
        except CPUManagerError as exc:
            raise KubeletStartError(f"kubelet would not start: {exc}") from None
        try:
            self.memory_policy = memorymanager.new_policy(config.memory_manager_policy, machine, reservation,
                                                          config.reserved_memory, affinity)
        except MemoryManagerError as exc:
            raise KubeletStartError(f"kubelet would not start: {exc}") from None
        self.cpu_state = self._start_cpu_manager()
        self.memory_state = self._start_memory_manager()
        self.topology_manager.add_hint_provider(self.devices)
        self.topology_manager.add_hint_provider(_CPUProvider(self.cpu_policy, self.cpu_state))
        self.topology_manager.add_hint_provider(_MemoryProvider(self.memory_policy, self.memory_state))

    # -- start ---------------------------------------------------------------------------------------
    def _start_cpu_manager(self) -> CPUState:
        state = CPUState()
        try:
            if self.state_dir is not None:
                state = checkpoint.read_cpu_checkpoint(self.state_dir, self.cpu_policy.name) or state
            self.cpu_policy.start(state)
        except (checkpoint.CheckpointError, CPUManagerError) as exc:
            raise KubeletStartError(f"kubelet would not start: start cpu manager error: {exc}") from None
        return state

    def _start_memory_manager(self) -> MemoryState:
        state = MemoryState()
        try:
            if self.state_dir is not None:
                state = checkpoint.read_memory_checkpoint(self.state_dir, self.memory_policy.name) or state
            self.memory_policy.start(state)
        except (checkpoint.CheckpointError, MemoryManagerError) as exc:
            raise KubeletStartError(f"kubelet would not start: start memory manager error: {exc}") from None
        return state

    def save(self) -> list[Path]:
        """Write both checkpoints to the state directory (nothing without one)."""
        if self.state_dir is None:
            return []
        return [checkpoint.write_cpu_checkpoint(self.state_dir, self.cpu_policy.name, self.cpu_state),
                checkpoint.write_memory_checkpoint(self.state_dir, self.memory_policy.name, self.memory_state)]

    # -- admission ----------------------------------------------------------------------------------
    def admit(self, pod: Pod) -> PodResult:
        decision: PodDecision = self.topology_manager.admit(pod)
        if not decision.result.admit:
            self._release(pod)
        containers = [ContainerResult(c.name, pod.is_init_container(c.name)) for c in pod.all_containers()]
        if self.topology_manager.scope_name == "pod":
            for entry in containers:
                entry.evaluated = True
                entry.hints = _merged_hints(decision.decisions[0].hints)
                entry.best_hint = decision.decisions[0].best
        else:
            by_name = {d.container: d for d in decision.decisions}
            for entry in containers:
                if entry.name in by_name:
                    entry.evaluated = True
                    entry.hints = _merged_hints(by_name[entry.name].hints)
                    entry.best_hint = by_name[entry.name].best
        return PodResult(pod, qos_class(pod), decision.result, self.topology_manager.scope_name, containers)

    def admit_all(self, pods: list[Pod], before=None) -> list[PodResult]:
        """Admit Pods in order, then fill in where each admitted container runs. `before(node, pod)`
        is called just before each Pod's admission (labkit.numa.withhold looks at the situation)."""
        results = []
        for pod in pods:
            if before is not None:
                before(self, pod)
            results.append(self.admit(pod))
        for result in results:
            if result.admitted:
                for entry in result.containers:
                    entry.cpus, entry.exclusive = self.container_cpus(result.pod.uid, entry.name)
                    entry.memory_nodes = self.container_memory_nodes(result.pod.uid, entry.name)
        return results

    def _release(self, pod: Pod) -> None:
        """removeStaleState for a Pod that did not get in."""
        for container in pod.all_containers():
            self.cpu_policy.remove_container(self.cpu_state, pod.uid, container.name)
            self.memory_policy.remove_container(self.memory_state, pod.uid, container.name)
        self.devices.remove_pod(pod.uid)
        self.topology_manager.forget_pod(pod.uid)

    def remove_stale_state(self, active_uids: set[str]) -> list[str]:
        """removeStaleState: release everything held for Pods that are not active; returns their UIDs."""
        stale = sorted((set(self.cpu_state.assignments) | set(self.memory_state.assignments)) - set(active_uids))
        for uid in stale:
            self.remove_pod(uid)
        return stale

    def add_container(self, pod: Pod, container_name: str) -> None:
        """AddContainer of the Memory Manager: regular init containers started before this container
        have finished, so their memory blocks are released (sidecars keep theirs)."""
        for init in pod.init_containers:
            if init.name == container_name:
                break
            if not init.sidecar:
                self.memory_policy.remove_container(self.memory_state, pod.uid, init.name)

    def remove_pod(self, pod_uid: str) -> None:
        """A Pod left the node: RemoveContainer for every container the managers hold for it.

        What kubelet's removeStaleState does for a Pod that is no longer active (cpu_manager.go,
        memory_manager.go): its exclusive CPUs go back to the shared pool, its memory blocks are
        released, its devices and topology hints are forgotten. Save to persist.
        """
        names = set(self.cpu_state.assignments.get(pod_uid, {})) | set(self.memory_state.assignments.get(pod_uid, {}))
        for name in sorted(names):
            self.cpu_policy.remove_container(self.cpu_state, pod_uid, name)
            self.memory_policy.remove_container(self.memory_state, pod_uid, name)
        self.devices.remove_pod(pod_uid)
        self.topology_manager.forget_pod(pod_uid)

    # -- where containers run -----------------------------------------------------------------------
    def shared_pool(self) -> frozenset[int]:
        """The CPUs of containers without exclusive CPUs (all CPUs with the none policy)."""
        if self.cpu_policy.name == cpumanager.POLICY_NONE:
            return self.topology.cpus()
        return self.cpu_state.default_cpu_set

    def reserved_cpus(self) -> frozenset[int]:
        return getattr(self.cpu_policy, "reserved_cpus", frozenset())

    def container_cpus(self, pod_uid: str, container: str) -> tuple[frozenset[int], bool]:
        exclusive = self.cpu_state.get_cpu_set(pod_uid, container)
        if exclusive is not None:
            return exclusive, True
        return self.shared_pool(), False

    def container_memory_nodes(self, pod_uid: str, container: str) -> list[int] | None:
        if isinstance(self.memory_policy, memorymanager.StaticPolicy):
            return self.memory_policy.memory_numa_nodes(self.memory_state, pod_uid, container)
        return None

    def memory_tables(self) -> dict[int, dict[str, tuple[int, int, int]]]:
        """The Memory Manager's machine state per NUMA node and resource: (allocatable, reserved by
        Pods, free) in bytes; empty without the Static policy."""
        if not isinstance(self.memory_policy, memorymanager.StaticPolicy):
            return {}
        return {node_id: {r: (t.allocatable, t.reserved, t.free) for r, t in state.memory_map.items()}
                for node_id, state in sorted(self.memory_state.machine_state.items())}

    def device_assignments(self, pod_uid: str, container: str) -> dict[str, list[str]]:
        return {r: sorted(ids) for r, ids in self.devices.allocated.get(pod_uid, {}).get(container, {}).items()}
