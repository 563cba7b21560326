"""The CPU Manager's view of the CPUs: `cpumanager/topology` CPUTopology and CPUDetails.

Follows kubernetes/kubernetes `pkg/kubelet/cm/cpumanager/topology/topology.go` (v1.28+):
* `Discover(machineInfo)`: NumCPUs = cadvisor `num_cores` (logical CPUs), NumCores = number of
  physical cores in the topology, NumSockets = `num_sockets`, NumNUMANodes = distinct NUMA ids;
  each logical CPU gets (NUMA node, socket, core) where the core id is the *lowest thread id* of
  its core, which makes core ids unique machine-wide (cadvisor's own core ids are per socket).
* CPUsPerCore = NumCPUs / NumCores, CPUsPerSocket = NumCPUs / NumSockets (integer division).

A topology can also be built from an explicit CPU table (the fixtures of kubelet's unit tests,
/work/shared/fidelity/numa/cpu_topologies.json), where core ids are whatever the test wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from labkit.errors import LabkitError
from labkit.numa.machine import Machine


@dataclass(frozen=True)
class CPUInfo:
    numa: int
    socket: int
    core: int


class CPUTopology:
    def __init__(self, num_cpus: int, num_cores: int, num_sockets: int, num_numa_nodes: int,
                 details: dict[int, CPUInfo]):
        self.num_cpus = num_cpus
        self.num_cores = num_cores
        self.num_sockets = num_sockets
        self.num_numa_nodes = num_numa_nodes
        self.details = details
        self._cpus_in_numa: dict[int, frozenset[int]] = {}
        self._cpus_in_socket: dict[int, frozenset[int]] = {}
        self._cpus_in_core: dict[int, frozenset[int]] = {}
        for cpu, info in details.items():
            self._cpus_in_numa.setdefault(info.numa, set()).add(cpu)
            self._cpus_in_socket.setdefault(info.socket, set()).add(cpu)
            self._cpus_in_core.setdefault(info.core, set()).add(cpu)
        for index in (self._cpus_in_numa, self._cpus_in_socket, self._cpus_in_core):
            for key in index:
                index[key] = frozenset(index[key])

    @classmethod
    def discover(cls, machine: Machine) -> "CPUTopology":
        """topology.Discover from cadvisor MachineInfo."""
        details: dict[int, CPUInfo] = {}
        num_physical_cores = 0
        for node in machine.nodes:
            num_physical_cores += len(node.cores)
            for core in node.cores:
                core_id = min(core.thread_ids)
                for cpu in core.thread_ids:
                    details[cpu] = CPUInfo(numa=node.node_id, socket=core.socket_id, core=core_id)
        if machine.num_cores == 0:
            raise LabkitError("could not detect number of cpus")
        return cls(machine.num_cores, num_physical_cores, machine.num_sockets,
                   len({info.numa for info in details.values()}), details)

    @classmethod
    def from_table(cls, fixture: dict) -> "CPUTopology":
        """A topology from a cpu_topologies.json fixture ({num_cpus, num_cores, ..., cpus: [...]})."""
        details = {row["cpu"]: CPUInfo(numa=row["numa"], socket=row["socket"], core=row["core"])
                   for row in fixture["cpus"]}
        return cls(fixture["num_cpus"], fixture["num_cores"], fixture["num_sockets"],
                   fixture["num_numa_nodes"], details)

    # -- sizes --------------------------------------------------------------------------------
    def cpus_per_core(self) -> int:
        return 0 if self.num_cores == 0 else self.num_cpus // self.num_cores

    def cpus_per_socket(self) -> int:
        return 0 if self.num_sockets == 0 else self.num_cpus // self.num_sockets

    # -- CPUDetails queries over the whole machine ------------------------------------------------
    def cpus(self) -> frozenset[int]:
        return frozenset(self.details)

    def numa_nodes(self) -> list[int]:
        return sorted(self._cpus_in_numa)

    def sockets(self) -> list[int]:
        return sorted(self._cpus_in_socket)

    def cpus_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return frozenset().union(*(self._cpus_in_numa.get(i, ()) for i in ids))

    def cpus_in_sockets(self, *ids: int) -> frozenset[int]:
        return frozenset().union(*(self._cpus_in_socket.get(i, ()) for i in ids))

    def cpus_in_cores(self, *ids: int) -> frozenset[int]:
        return frozenset().union(*(self._cpus_in_core.get(i, ()) for i in ids))

    def sockets_in_numa_nodes(self, *ids: int) -> set[int]:
        return {self.details[cpu].socket for cpu in self.cpus_in_numa_nodes(*ids)}

    def core_of(self, cpu: int) -> int:
        if cpu not in self.details:
            raise LabkitError(f"unknown CPU ID: {cpu}")
        return self.details[cpu].core

    def siblings(self, cpus) -> frozenset[int]:
        """All hyperthread siblings of `cpus` (kubelet's reservedPhysicalCPUs)."""
        return self.cpus_in_cores(*{self.core_of(cpu) for cpu in cpus})
