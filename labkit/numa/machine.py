"""A machine: cadvisor's MachineInfo JSON, validated, plus the devices labkit simulates.

kubelet learns the machine from cadvisor (`google/cadvisor` `info/v1/machine.go`, type
MachineInfo). The fields its resource managers read are: `num_cores` (logical CPUs),
`num_sockets`, `memory_capacity`, and `topology[]` — one entry per NUMA node with `node_id`,
`memory` (bytes), `hugepages[]` (`page_size` in kB, `num_pages`), `cores[]` (`core_id`,
`thread_ids`, `socket_id`) and `distances` (the node's row of the SLIT distance table).

cadvisor knows nothing of devices: kubelet learns them from device plugins, each device with the
NUMA nodes it is attached to. labkit describes them in one extra top-level field (not cadvisor's):

    "devices": {"example.com/gpu": [{"id": "gpu0", "numa_nodes": [0]}, ...], ...}

A device with no (or an empty) `numa_nodes` list has no topology information.

`load_machine` accepts a path or the name of a shipped fixture (labkit/numa/machines/*.json);
every problem is reported as one ConfigError naming the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.errors import ConfigError

FIXTURES = Path(__file__).resolve().parent / "machines"


@dataclass(frozen=True)
class Core:
    core_id: int
    thread_ids: tuple[int, ...]
    socket_id: int


@dataclass(frozen=True)
class HugePages:
    page_size_kb: int
    num_pages: int


@dataclass(frozen=True)
class Node:
    node_id: int
    memory: int
    hugepages: tuple[HugePages, ...]
    cores: tuple[Core, ...]
    distances: tuple[int, ...] | None

    def cpus(self) -> list[int]:
        return sorted(cpu for core in self.cores for cpu in core.thread_ids)


@dataclass(frozen=True)
class Device:
    id: str
    numa_nodes: tuple[int, ...]


@dataclass
class Machine:
    num_cores: int
    num_sockets: int
    memory_capacity: int
    nodes: list[Node]
    devices: dict[str, list[Device]] = field(default_factory=dict)
    source: str = "<machine>"
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def node_ids(self) -> list[int]:
        """NUMA node ids in cadvisor order (kubelet's NUMAInfo keeps this order)."""
        return [node.node_id for node in self.nodes]

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(node_id)

    def all_cpus(self) -> list[int]:
        return sorted(cpu for node in self.nodes for cpu in node.cpus())

    def to_dict(self) -> dict:
        """The machine as cadvisor JSON (with labkit's `devices` field when there are devices)."""
        return self.raw


def fixture_names() -> list[str]:
    return sorted(p.stem for p in FIXTURES.glob("*.json"))


def load_machine(spec: str | Path) -> Machine:
    """A machine from a JSON file, or the shipped fixture of that name."""
    path = Path(spec)
    if not path.exists():
        if (FIXTURES / f"{spec}.json").exists():
            path = FIXTURES / f"{spec}.json"
        else:
            raise ConfigError(spec, None, "no such file, and not a shipped machine "
                              f"(shipped: {', '.join(fixture_names())})")
    from labkit.inputs import load_json

    data = load_json(path)
    return machine_from_dict(data, source=str(path))


def machine_from_dict(data: Any, source: str = "<machine>") -> Machine:
    """Validate cadvisor MachineInfo (a dict) and build the model."""
    v = _Validator(source)
    v.require(isinstance(data, dict), None, "expected a JSON object (cadvisor MachineInfo)")
    num_cores = v.integer(data, "num_cores", minimum=1)
    num_sockets = v.integer(data, "num_sockets", minimum=1)
    memory_capacity = v.integer(data, "memory_capacity", minimum=0, default=0)
    topology = data.get("topology")
    v.require(isinstance(topology, list) and topology, "topology", "expected a non-empty list of NUMA nodes")
    nodes = [_node(v, entry, f"topology[{i}]") for i, entry in enumerate(topology)]

    ids = [node.node_id for node in nodes]
    v.require(len(set(ids)) == len(ids), "topology", f"node_id values must be unique, found {ids}")
    threads = [cpu for node in nodes for core in node.cores for cpu in core.thread_ids]
    duplicates = sorted({cpu for cpu in threads if threads.count(cpu) > 1})
    v.require(not duplicates, "topology", f"CPU(s) {duplicates} appear in more than one core")
    v.require(len(threads) == num_cores, "num_cores",
              f"is {num_cores} but topology lists {len(threads)} logical CPUs (cadvisor counts every thread)")
    sockets = {core.socket_id for node in nodes for core in node.cores}
    v.require(len(sockets) == num_sockets, "num_sockets",
              f"is {num_sockets} but the cores name {len(sockets)} socket(s) {sorted(sockets)}")
    for i, node in enumerate(nodes):
        if node.distances is not None:
            v.require(len(node.distances) == len(nodes), f"topology[{i}].distances",
                      f"expected {len(nodes)} entries (one per NUMA node), found {len(node.distances)}")
    devices = _devices(v, data.get("devices", {}), set(ids))
    return Machine(num_cores, num_sockets, memory_capacity, nodes, devices, source, data)


def _node(v: "_Validator", entry: Any, where: str) -> Node:
    v.require(isinstance(entry, dict), where, "expected an object with node_id, memory, cores")
    node_id = v.integer(entry, "node_id", where=where, minimum=0)
    memory = v.integer(entry, "memory", where=where, minimum=0)
    hugepages = []
    pages = entry.get("hugepages") or []
    v.require(isinstance(pages, list), f"{where}.hugepages", "expected a list")
    for j, page in enumerate(pages):
        at = f"{where}.hugepages[{j}]"
        v.require(isinstance(page, dict), at, "expected an object with page_size (kB) and num_pages")
        hugepages.append(HugePages(v.integer(page, "page_size", where=at, minimum=1),
                                   v.integer(page, "num_pages", where=at, minimum=0)))
    cores_data = entry.get("cores")
    v.require(isinstance(cores_data, list), f"{where}.cores", "expected a list of cores")
    cores = []
    for j, core in enumerate(cores_data):
        at = f"{where}.cores[{j}]"
        v.require(isinstance(core, dict), at, "expected an object with core_id, thread_ids, socket_id")
        thread_ids = core.get("thread_ids")
        v.require(isinstance(thread_ids, list) and thread_ids and
                  all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in thread_ids),
                  f"{at}.thread_ids", "expected a non-empty list of CPU ids")
        v.require(len(set(thread_ids)) == len(thread_ids), f"{at}.thread_ids", "CPU ids must be unique")
        cores.append(Core(v.integer(core, "core_id", where=at, minimum=0), tuple(thread_ids),
                          v.integer(core, "socket_id", where=at, minimum=0)))
    distances = entry.get("distances")
    if distances is not None:
        v.require(isinstance(distances, list) and
                  all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in distances),
                  f"{where}.distances", "expected a list of non-negative integers")
        distances = tuple(distances)
    return Node(node_id, memory, tuple(hugepages), tuple(cores), distances)


def _devices(v: "_Validator", data: Any, node_ids: set[int]) -> dict[str, list[Device]]:
    v.require(isinstance(data, dict), "devices", "expected an object {resource: [{id, numa_nodes}]}")
    devices: dict[str, list[Device]] = {}
    for resource, entries in data.items():
        at = f"devices.{resource}"
        v.require("/" in resource, at, "a device resource name needs a domain, e.g. example.com/gpu")
        v.require(isinstance(entries, list), at, "expected a list of {id, numa_nodes}")
        seen = set()
        devices[resource] = []
        for j, entry in enumerate(entries):
            where = f"{at}[{j}]"
            v.require(isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"],
                      where, "expected an object with a non-empty string id")
            v.require(entry["id"] not in seen, f"{where}.id", f"duplicate device id {entry['id']!r}")
            seen.add(entry["id"])
            numa = entry.get("numa_nodes") or []
            v.require(isinstance(numa, list) and all(isinstance(n, int) and n in node_ids for n in numa), f"{where}.numa_nodes",
                      f"expected a list of NUMA node ids among {sorted(node_ids)}")
            devices[resource].append(Device(entry["id"], tuple(numa)))
    return devices


class _Validator:
    def __init__(self, source: str):
        self.source = source

    def require(self, ok: bool, where: str | None, problem: str) -> None:
        if not ok:
            raise ConfigError(self.source, where, problem)

    def integer(self, data: dict, key: str, where: str | None = None, minimum: int | None = None,
                default: int | None = None) -> int:
        at = f"{where}.{key}" if where else key
        value = data.get(key, default)
        self.require(isinstance(value, int) and not isinstance(value, bool), at, "expected an integer")
        self.require(minimum is None or value >= minimum, at, f"expected an integer >= {minimum}, found {value}")
        return value
