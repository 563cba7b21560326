"""`labkit numa discover`: this host's machine description, as cadvisor's MachineInfo JSON.

kubelet learns the machine from cadvisor (`MachineInfo`, google/cadvisor `info/v1/machine.go`),
which reads sysfs. This module reads the same files the same way, so the JSON it writes is what the
kubelet's CPU, Memory and Topology Managers would start from on this host:

* NUMA nodes: every `/sys/devices/system/node/node<N>` (cadvisor `utils/sysinfo.GetNodesInfo`):
  - cores from the node's `cpu<M>` entries, visited in lexical name order (Go's glob order:
    cpu0, cpu1, cpu10, cpu2, ...), offline CPUs skipped (`/sys/devices/system/cpu/online`); a core
    is the pair (`topology/core_id`, `topology/physical_package_id`), its `thread_ids` the CPUs in
    visiting order (cadvisor `getCoresInfo`);
  - `memory` = the node's `meminfo` MemTotal in bytes (`getNodeMemInfo`);
  - `hugepages` = each `hugepages/hugepages-<size>kB/nr_hugepages`, page size in kB, in directory
    name order (`GetHugePagesInfo`);
  - `distances` = the node's `distance` row (`getDistances`).
* `num_cores` = logical CPUs found in the nodes; `memory_capacity` = /proc/meminfo MemTotal in
  bytes (cadvisor `machine.GetMachineMemoryCapacity`); `hugepages` from /sys/kernel/mm/hugepages.
* `num_physical_cores` and `num_sockets`: cadvisor counts them from /proc/cpuinfo; they are counted
  here from the same sysfs topology files (distinct (package, core) pairs and packages), which is
  what the kernel derives /proc/cpuinfo's "physical id" / "core id" from.

Nodes are listed in ascending id (cadvisor keeps glob order, which differs only from node10 on).

A kernel without NUMA support has no /sys/devices/system/node. cadvisor then groups CPUs by package
into pseudo-nodes with no memory (`getCPUTopology`); the kernel itself, however, has exactly one
memory node 0 (every process's Mems_allowed_list is "0"), so this module describes such a host as
what it is: one node 0 holding every online CPU, all memory, the machine's hugepages and the
local distance 10.

The paths are taken under `root` (default "/") so the parsing can also be exercised on a copy of
another machine's sysfs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from labkit.errors import LabkitError
from labkit.numa import cpuset

_NODE_DIR = re.compile(r"^node(\d+)$")
_CPU_DIR = re.compile(r"^cpu(\d+)$")
_MEMTOTAL = re.compile(r"MemTotal:\s*([0-9]+) kB")
_HUGEPAGES_DIR = re.compile(r"^hugepages-(\d+)kB$")
LOCAL_DISTANCE = 10


class Sysfs:
    """The files cadvisor reads, under a root directory."""

    def __init__(self, root: Path | str = "/"):
        self.root = Path(root)
        self.node_dir = self.root / "sys/devices/system/node"
        self.cpu_dir = self.root / "sys/devices/system/cpu"

    def read(self, path: Path) -> str:
        try:
            return path.read_text()
        except OSError as exc:
            raise LabkitError(f"cannot read {path}: {exc.strerror or exc}") from None

    def online_cpus(self) -> set[int]:
        online = self.cpu_dir / "online"
        if online.exists():
            return set(cpuset.parse(self.read(online).strip()))
        return {int(m.group(1)) for p in self.cpu_dir.iterdir() if (m := _CPU_DIR.match(p.name))}

    def node_ids(self) -> list[int]:
        if not self.node_dir.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.node_dir.iterdir() if (m := _NODE_DIR.match(p.name)))

    def cpus_of(self, directory: Path) -> list[int]:
        """CPU ids under `directory` (a node dir or the cpu dir), in Go glob (lexical) order."""
        names = sorted(p.name for p in directory.iterdir() if _CPU_DIR.match(p.name))
        return [int(_CPU_DIR.match(n).group(1)) for n in names]

    def topology_value(self, cpu: int, name: str) -> int:
        path = self.cpu_dir / f"cpu{cpu}" / "topology" / name
        text = self.read(path).strip()
        try:
            return int(text)
        except ValueError:
            raise LabkitError(f"{path}: expected an integer, found {text!r}") from None

    def memtotal(self, path: Path) -> int:
        match = _MEMTOTAL.search(self.read(path))
        if not match:
            raise LabkitError(f"{path}: no 'MemTotal: <n> kB' line")
        return int(match.group(1)) * 1024

    def hugepages(self, directory: Path) -> list[dict]:
        """cadvisor GetHugePagesInfo: a missing directory means no hugepage support (not an error)."""
        if not directory.is_dir():
            return []
        out = []
        for entry in sorted(directory.iterdir(), key=lambda p: p.name):
            match = _HUGEPAGES_DIR.match(entry.name)
            if not match:
                continue
            count = self.read(entry / "nr_hugepages").strip()
            out.append({"page_size": int(match.group(1)), "num_pages": int(count)})
        return out

    def distances(self, node: int) -> list[int]:
        return [int(x) for x in self.read(self.node_dir / f"node{node}" / "distance").split()]


def _cores(sysfs: Sysfs, cpus: list[int], online: set[int]) -> list[dict]:
    cores: list[dict] = []
    for cpu in cpus:
        if cpu not in online:
            continue
        core_id = sysfs.topology_value(cpu, "core_id")
        socket = sysfs.topology_value(cpu, "physical_package_id")
        for core in cores:
            if core["core_id"] == core_id and core["socket_id"] == socket:
                core["thread_ids"].append(cpu)
                break
        else:
            cores.append({"core_id": core_id, "thread_ids": [cpu], "socket_id": socket})
    return cores


def discover(root: Path | str = "/") -> dict:
    """MachineInfo (the fields kubelet's resource managers use) for the host whose files are under root."""
    sysfs = Sysfs(root)
    online = sysfs.online_cpus()
    capacity = sysfs.memtotal(sysfs.root / "proc/meminfo")
    machine_hugepages = sysfs.hugepages(sysfs.root / "sys/kernel/mm/hugepages")
    nodes = []
    node_ids = sysfs.node_ids()
    if node_ids:
        for node in node_ids:
            directory = sysfs.node_dir / f"node{node}"
            meminfo = directory / "meminfo"
            nodes.append({
                "node_id": node,
                "memory": sysfs.memtotal(meminfo) if meminfo.exists() else 0,
                "hugepages": sysfs.hugepages(directory / "hugepages"),
                "cores": _cores(sysfs, sysfs.cpus_of(directory), online),
                "distances": sysfs.distances(node) if (directory / "distance").exists() else None,
            })
    else:
        nodes.append({
            "node_id": 0,
            "memory": capacity,
            "hugepages": machine_hugepages,
            "cores": _cores(sysfs, sysfs.cpus_of(sysfs.cpu_dir), online),
            "distances": [LOCAL_DISTANCE],
        })
    cores = [core for node in nodes for core in node["cores"]]
    if not cores:
        raise LabkitError(f"no online CPU found under {sysfs.cpu_dir}")
    return {
        "num_cores": sum(len(core["thread_ids"]) for core in cores),
        "num_physical_cores": len({(core["socket_id"], core["core_id"]) for core in cores}),
        "num_sockets": len({core["socket_id"] for core in cores}),
        "memory_capacity": capacity,
        "hugepages": machine_hugepages,
        "topology": nodes,
    }


def to_json(machine: dict) -> str:
    return json.dumps(machine, indent=2) + "\n"
