"""The Memory Manager: `None` and `Static` policies, NUMA node groups, hints and allocation.

Follows kubernetes/kubernetes `pkg/kubelet/cm/memorymanager/` as of v1.34 (GA since v1.32; its
policy code is unchanged for what is reconstructed here):
* `memory_manager.go` NewManager / getSystemReservedMemory / validateReservedMemory: the per-NUMA
  `reservedMemory` must add up, per memory type, to the node-allocatable reservation
  (kube-reserved + system-reserved + hard eviction threshold);
* `policy_static.go`: the machine state (per NUMA node and memory type: total, system reserved,
  allocatable, reserved, free; the number of assignments and the group of NUMA nodes — `cells` — the
  node is allocated together with), calculateHints, Allocate (default hint, extended hint,
  single- versus cross-NUMA rule), RemoveContainer, validateState, init-container memory reuse;
* `state/state.go`: MemoryTable, NUMANodeState, Block.

The rule that surprises people: a NUMA node used for a single-NUMA allocation cannot join a
multi-NUMA group, and nodes of a group can only be used again as that same group. So two nodes
whose free memory would add up can still reject a Pod.

Go iterates the requested memory types in random map order; labkit takes them in name order
(blocks of one container are listed in that order). Not reconstructed: pod-level resources,
in-place resize.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from labkit.numa import bitmask
from labkit.numa.machine import HugePages, Machine, Node
from labkit.numa.merge import TopologyHint
from labkit.numa.pods import GUARANTEED, Container, Pod, qos_class
from labkit.quantity import BINARY, DECIMAL, Quantity, format_quantity

POLICY_NONE = "None"
POLICY_STATIC = "Static"
MEMORY = "memory"


class MemoryManagerError(Exception):
    """A Memory Manager error with kubelet's message."""


def hugepage_resource_name(page_size_kb: int) -> str:
    """HugePageResourceName: "hugepages-" + the page size as a BinarySI quantity ("2Mi", "1Gi")."""
    return "hugepages-" + format_quantity(page_size_kb * 1024, BINARY)


def is_memory_resource(name: str) -> bool:
    return name == MEMORY or name.startswith("hugepages-")


@dataclass
class MemoryTable:
    total: int = 0
    system_reserved: int = 0
    allocatable: int = 0
    reserved: int = 0
    free: int = 0


@dataclass
class NUMANodeState:
    number_of_assignments: int = 0
    memory_map: dict[str, MemoryTable] = field(default_factory=dict)
    cells: list[int] = field(default_factory=list)


@dataclass
class Block:
    numa_affinity: list[int]
    type: str
    size: int


@dataclass
class MemoryState:
    machine_state: dict[int, NUMANodeState] = field(default_factory=dict)
    assignments: dict[str, dict[str, list[Block]]] = field(default_factory=dict)

    def get_blocks(self, pod_uid: str, container: str) -> list[Block] | None:
        blocks = self.assignments.get(pod_uid, {}).get(container)
        return None if blocks is None else [copy.copy(b) for b in blocks]

    def set_blocks(self, pod_uid: str, container: str, blocks: list[Block]) -> None:
        self.assignments.setdefault(pod_uid, {})[container] = blocks

    def delete(self, pod_uid: str, container: str) -> None:
        self.assignments.get(pod_uid, {}).pop(container, None)
        if pod_uid in self.assignments and not self.assignments[pod_uid]:
            del self.assignments[pod_uid]


AffinityLookup = Callable[[str, str], TopologyHint]


def requested_resources(container: Container) -> dict[str, int]:
    """getRequestedResources: memory and hugepages requests in bytes."""
    out = {}
    for name in sorted(container.requests):
        if not is_memory_resource(name):
            continue
        size = container.requests[name].as_int64()
        if size is None:
            raise MemoryManagerError("[memorymanager] failed to represent quantity as int64")
        out[name] = size
    return out


def pod_requested_resources(pod: Pod) -> dict[str, int]:
    """getPodRequestedResources: per type, max(regular init (+ earlier sidecars), apps + sidecars)."""
    by_init: dict[str, int] = {}
    by_sidecars: dict[str, int] = {}
    for container in pod.init_containers:
        for name, size in requested_resources(container).items():
            by_init.setdefault(name, 0)
            if container.sidecar:
                by_sidecars[name] = by_sidecars.get(name, 0) + size
            elif by_sidecars.get(name, 0) + size > by_init[name]:
                by_init[name] = by_sidecars.get(name, 0) + size
    by_apps: dict[str, int] = {}
    for container in pod.containers:
        for name, size in requested_resources(container).items():
            by_apps[name] = by_apps.get(name, 0) + size
    return {name: max(by_apps[name] + by_sidecars.get(name, 0), by_init.get(name, 0)) for name in sorted(by_apps)}


def _groups_equal(a, b) -> bool:
    return sorted(a) == sorted(b)


def _find_best_hint(hints: list[TopologyHint]) -> TopologyHint:
    """findBestHint: preferred over not preferred, then narrower."""
    best = TopologyHint(None, False)
    for hint in hints:
        if best.mask is None:
            best = hint
        elif hint.preferred and not best.preferred:
            best = hint
        elif hint.preferred == best.preferred and bitmask.is_narrower_than(hint.mask, best.mask):
            best = hint
    return best


class NonePolicy:
    name = POLICY_NONE

    def start(self, state: MemoryState) -> None:
        pass

    def allocate(self, state: MemoryState, pod: Pod, container: Container) -> None:
        pass

    def remove_container(self, state: MemoryState, pod_uid: str, container: str) -> None:
        pass

    def get_topology_hints(self, state: MemoryState, pod: Pod, container: Container):
        return None

    def get_pod_topology_hints(self, state: MemoryState, pod: Pod):
        return None


class StaticPolicy:
    name = POLICY_STATIC

    def __init__(self, nodes: Sequence[Node], system_reserved: Mapping[int, Mapping[str, int]],
                 affinity: AffinityLookup = lambda pod, container: TopologyHint(None, False)):
        """NewPolicyStatic: some memory must be reserved for the system on some NUMA node.

        `nodes` are the machine's NUMA nodes (Machine.nodes, or `nodes_from_topology` for cadvisor
        topology entries that carry only node_id, memory and hugepages)."""
        if sum(res.get(MEMORY, 0) for res in system_reserved.values()) <= 0:
            raise MemoryManagerError("[memorymanager] you should specify the system reserved memory")
        self.nodes = list(nodes)
        self.system_reserved = {int(k): dict(v) for k, v in system_reserved.items()}
        self.affinity = affinity
        # pod UID -> mask string -> memory type -> bytes an app container may reuse
        self.init_containers_reusable_memory: dict[str, dict[str, dict[str, int]]] = {}

    # -- machine state -----------------------------------------------------------------------------
    def default_machine_state(self) -> dict[int, NUMANodeState]:
        """getDefaultMachineState: allocatable = total - system reserved (memory also - hugepages)."""
        state: dict[int, NUMANodeState] = {}
        for node in self.nodes:
            tables: dict[str, MemoryTable] = {}
            hugepages_total = 0
            for pages in node.hugepages:
                name = hugepage_resource_name(pages.page_size_kb)
                reserved = self._reserved(node.node_id, name)
                total = pages.num_pages * pages.page_size_kb * 1024
                tables[name] = MemoryTable(total, reserved, total - reserved, 0, total - reserved)
                hugepages_total += total
            reserved = self._reserved(node.node_id, MEMORY)
            allocatable = node.memory - reserved - hugepages_total
            tables[MEMORY] = MemoryTable(node.memory, reserved, allocatable, 0, allocatable)
            state[node.node_id] = NUMANodeState(0, tables, [node.node_id])
        return state

    def _reserved(self, node_id: int, resource: str) -> int:
        return self.system_reserved.get(node_id, {}).get(resource, 0)

    def start(self, state: MemoryState) -> None:
        """Start -> validateState: an empty state gets the default; a restored one must match."""
        if not state.machine_state:
            if state.assignments:
                raise MemoryManagerError("[memorymanager] machine state can not be empty when it has memory assignments")
            state.machine_state = self.default_machine_state()
            return
        expected = self.default_machine_state()
        for pod in sorted(state.assignments):
            for container in sorted(state.assignments[pod]):
                for block in state.assignments[pod][container]:
                    requested = block.size
                    for node_id in block.numa_affinity:
                        node = expected.get(node_id)
                        if node is None:
                            raise MemoryManagerError(f"[memorymanager] (pod: {pod}, container: {container}) the memory "
                                                     "assignment uses the NUMA that does not exist")
                        node.number_of_assignments += 1
                        node.cells = list(block.numa_affinity)
                        table = node.memory_map.get(block.type)
                        if table is None:
                            raise MemoryManagerError(f"[memorymanager] (pod: {pod}, container: {container}) the memory "
                                                     "assignment uses memory resource that does not exist")
                        requested = _charge(table, requested)
        if not _machine_states_equal(state.machine_state, expected):
            raise MemoryManagerError("[memorymanager] the expected machine state is different from the real one")

    # -- hints -----------------------------------------------------------------------------------
    def get_topology_hints(self, state: MemoryState, pod: Pod, container: Container):
        if qos_class(pod) != GUARANTEED:
            return None
        requested = requested_resources(container)
        blocks = state.get_blocks(pod.uid, container.name)
        if blocks is not None:
            return _regenerate_hints(blocks, requested)
        return self.calculate_hints(state.machine_state, pod, requested)

    def get_pod_topology_hints(self, state: MemoryState, pod: Pod):
        if qos_class(pod) != GUARANTEED:
            return None
        requested = pod_requested_resources(pod)
        for container in pod.all_containers():
            blocks = state.get_blocks(pod.uid, container.name)
            if blocks is not None:
                return _regenerate_hints(blocks, requested)
        return self.calculate_hints(state.machine_state, pod, requested)

    def calculate_hints(self, machine_state: dict[int, NUMANodeState], pod: Pod,
                        requested: Mapping[str, int]) -> dict[str, list[TopologyHint]]:
        """calculateHints: every group of NUMA nodes with enough allocatable and free memory that
        respects the grouping rules; the smallest groups (by allocatable memory) are preferred."""
        numa_nodes = sorted(machine_state)
        min_affinity_size = len(numa_nodes)
        masks: list[int] = []
        for mask in bitmask.iterate_bitmasks(numa_nodes):
            bits = bitmask.get_bits(mask)
            single = len(bits) == 1
            total_free = {r: sum(_table(machine_state[n], r).free for n in bits) for r in requested}
            total_allocatable = {r: sum(_table(machine_state[n], r).allocatable for n in bits) for r in requested}
            if any(total_allocatable[r] < size for r, size in requested.items()):
                continue
            min_affinity_size = min(min_affinity_size, bitmask.count(mask))
            if single and len(machine_state[bits[0]].cells) > 1:
                continue   # the node belongs to a multi-NUMA group
            if not single and any(machine_state[n].number_of_assignments > 0 and
                                  (len(machine_state[n].cells) == 1 or not _groups_equal(machine_state[n].cells, bits))
                                  for n in bits):
                continue   # a node used single-NUMA, or in another group
            if any(total_free[r] + self._pod_reusable_memory(pod, mask, r) < size for r, size in requested.items()):
                continue
            masks.append(mask)
        hints: dict[str, list[TopologyHint]] = {}
        for resource in requested:
            if masks:
                hints[resource] = [TopologyHint(m, bitmask.count(m) == min_affinity_size) for m in masks]
        return hints

    # -- allocation ------------------------------------------------------------------------------
    def allocate(self, state: MemoryState, pod: Pod, container: Container) -> None:
        if qos_class(pod) != GUARANTEED:
            return
        blocks = state.get_blocks(pod.uid, container.name)
        if blocks is not None:
            self._update_pod_reusable_memory(pod, container, blocks)
            return
        hint = self.affinity(pod.uid, container.name)
        requested = requested_resources(container)
        machine_state = state.machine_state
        best = hint
        if hint.mask is None:
            hints = self.calculate_hints(machine_state, pod, requested)
            if not hints:
                raise MemoryManagerError("[memorymanager] failed to get the default NUMA affinity, no NUMA nodes "
                                         "with enough memory is available")
            default = _find_best_hint(hints.get(MEMORY, []))
            if not default.preferred and best.preferred:
                raise MemoryManagerError("[memorymanager] failed to find the default preferred hint")
            best = default
        if not _affinity_satisfies(machine_state, best.mask, requested):
            extended = self._extend_hint(machine_state, pod, requested, best.mask)
            if not extended.preferred and best.preferred:
                raise MemoryManagerError("[memorymanager] failed to find the extended preferred hint")
            best = extended
        if _violates_numa_allocations(machine_state, best.mask):
            raise MemoryManagerError("[memorymanager] preferred hint violates NUMA node allocation")

        bits = bitmask.get_bits(best.mask)
        container_blocks = []
        for resource, size in requested.items():
            container_blocks.append(Block(list(bits), resource, size))
            to_charge = max(0, size - self._pod_reusable_memory(pod, best.mask, resource))
            self._update_machine_state(machine_state, bits, resource, to_charge)
        self._update_pod_reusable_memory(pod, container, container_blocks)
        state.set_blocks(pod.uid, container.name, container_blocks)
        self._update_init_containers_blocks(state, pod, container, container_blocks)

    def _extend_hint(self, machine_state, pod: Pod, requested, mask: int) -> TopologyHint:
        """extendTopologyManagerHint: the best hint whose NUMA nodes include the current ones."""
        hints = self.calculate_hints(machine_state, pod, requested)
        current = set(bitmask.get_bits(mask))
        filtered = [h for h in hints.get(MEMORY, []) if current <= set(bitmask.get_bits(h.mask))]
        if not filtered:
            raise MemoryManagerError("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
        return _find_best_hint(filtered)

    @staticmethod
    def _update_machine_state(machine_state, bits: list[int], resource: str, size: int) -> None:
        for node_id in bits:
            node = machine_state[node_id]
            node.number_of_assignments += 1
            node.cells = list(bits)
            if size:
                size = _charge(node.memory_map[resource], size)

    def _pod_reusable_memory(self, pod: Pod, mask: int, resource: str) -> int:
        return self.init_containers_reusable_memory.get(pod.uid, {}).get(bitmask.to_string(mask), {}).get(resource, 0)

    def _update_pod_reusable_memory(self, pod: Pod, container: Container, blocks: list[Block]) -> None:
        for uid in list(self.init_containers_reusable_memory):
            if uid != pod.uid:
                del self.init_containers_reusable_memory[uid]
        if pod.is_regular_init_container(container.name):
            reusable = self.init_containers_reusable_memory.setdefault(pod.uid, {})
            for block in blocks:
                key = bitmask.to_string(bitmask.new_bitmask(*block.numa_affinity))
                by_type = reusable.setdefault(key, {})
                by_type[block.type] = max(by_type.get(block.type, 0), block.size)
            return
        for block in blocks:
            mask = bitmask.new_bitmask(*block.numa_affinity)
            reusable = self._pod_reusable_memory(pod, mask, block.type)
            if reusable:
                entry = self.init_containers_reusable_memory[pod.uid][bitmask.to_string(mask)]
                entry[block.type] = 0 if block.size >= reusable else reusable - block.size

    @staticmethod
    def _update_init_containers_blocks(state: MemoryState, pod: Pod, container: Container,
                                       blocks: list[Block]) -> None:
        """updateInitContainersMemoryBlocks: shrink earlier regular init containers' blocks by what
        this container reuses, so the blocks add up to the memory really reserved."""
        for block in blocks:
            size = block.size
            for init in pod.init_containers:
                if init.name == container.name or size == 0:
                    break
                if init.sidecar:
                    continue
                init_blocks = state.get_blocks(pod.uid, init.name)
                if not init_blocks:
                    continue
                for init_block in init_blocks:
                    if init_block.size == 0 or init_block.type != block.type:
                        continue
                    if sorted(init_block.numa_affinity) != sorted(block.numa_affinity):
                        continue
                    if init_block.size > size:
                        init_block.size -= size
                        size = 0
                    else:
                        size -= init_block.size
                        init_block.size = 0
                state.set_blocks(pod.uid, init.name, init_blocks)

    def remove_container(self, state: MemoryState, pod_uid: str, container: str) -> None:
        """RemoveContainer: give each block back (greedily, from reserved to free) and ungroup nodes
        that no longer hold any assignment."""
        blocks = state.get_blocks(pod_uid, container)
        if blocks is None:
            return
        state.delete(pod_uid, container)
        for block in blocks:
            released = block.size
            for node_id in block.numa_affinity:
                node = state.machine_state[node_id]
                node.number_of_assignments -= 1
                if node.number_of_assignments == 0:
                    node.cells = [node_id]
                if released == 0:
                    continue
                table = node.memory_map[block.type]
                if table.reserved == 0:
                    continue
                if table.reserved < released:
                    released -= table.reserved
                    table.free += table.reserved
                    table.reserved = 0
                    continue
                table.free += released
                table.reserved -= released
                released = 0

    def memory_numa_nodes(self, state: MemoryState, pod_uid: str, container: str) -> list[int] | None:
        """GetMemoryNUMANodes: the NUMA nodes of the container's blocks (None: not pinned)."""
        blocks = state.assignments.get(pod_uid, {}).get(container)
        if not blocks:
            return None
        return sorted({n for block in blocks for n in block.numa_affinity})


def nodes_from_topology(topology: Sequence[Mapping]) -> list[Node]:
    """NUMA nodes from cadvisor topology entries where only node_id, memory and hugepages matter."""
    return [Node(int(n.get("node_id", 0)), int(n.get("memory", 0)),
                 tuple(HugePages(int(h["page_size"]), int(h["num_pages"])) for h in n.get("hugepages") or []),
                 (), None) for n in topology]


def _table(node: NUMANodeState, resource: str) -> MemoryTable:
    # A memory type the node does not have counts as none at all (kubelet would dereference nil).
    return node.memory_map.get(resource) or MemoryTable()


def _charge(table: MemoryTable, size: int) -> int:
    """Take up to `size` bytes from this node's free memory; return what is left to take."""
    if table.free <= 0:
        return size
    if table.free >= size:
        table.reserved += size
        table.free -= size
        return 0
    size -= table.free
    table.reserved += table.free
    table.free = 0
    return size


def _affinity_satisfies(machine_state, mask: int, requested: Mapping[str, int]) -> bool:
    bits = bitmask.get_bits(mask)
    return all(sum(_table(machine_state[n], r).free for n in bits) >= size for r, size in requested.items())


def _violates_numa_allocations(machine_state, mask: int) -> bool:
    """isAffinityViolatingNUMAAllocations (a single-NUMA mask never violates)."""
    bits = bitmask.get_bits(mask)
    if len(bits) == 1:
        return False
    for node_id in bits:
        node = machine_state[node_id]
        if node.number_of_assignments == 0:
            continue
        if len(node.cells) == 1 or not _groups_equal(node.cells, bits):
            return True
    return False


def _regenerate_hints(blocks: list[Block], requested: Mapping[str, int]):
    """regenerateHints: after a restart, the container's blocks become its (preferred) hints."""
    if len(blocks) != len(requested):
        return None
    hints: dict[str, list[TopologyHint]] = {r: [] for r in requested}
    for block in blocks:
        if block.type not in requested or block.size != requested[block.type]:
            return None
        hints[block.type].append(TopologyHint(bitmask.new_bitmask(*block.numa_affinity), True))
    return hints


def _machine_states_equal(ms1: dict[int, NUMANodeState], ms2: dict[int, NUMANodeState]) -> bool:
    """areMachineStatesEqual: totals per node, and free/reserved summed over each node's group."""
    if set(ms1) != set(ms2):
        return False
    for node_id, n1 in ms1.items():
        n2 = ms2[node_id]
        if n1.number_of_assignments != n2.number_of_assignments or not _groups_equal(n1.cells, n2.cells):
            return False
        if set(n1.memory_map) != set(n2.memory_map):
            return False
        for resource, t1 in n1.memory_map.items():
            t2 = n2.memory_map[resource]
            if (t1.total, t1.system_reserved, t1.allocatable) != (t2.total, t2.system_reserved, t2.allocatable):
                return False
            free1 = sum(ms1[c].memory_map[resource].free for c in n1.cells if c in ms1)
            free2 = sum(ms2[c].memory_map[resource].free for c in n1.cells if c in ms2)
            reserved1 = sum(ms1[c].memory_map[resource].reserved for c in n1.cells if c in ms1)
            reserved2 = sum(ms2[c].memory_map[resource].reserved for c in n1.cells if c in ms2)
            if free1 != free2 or reserved1 != reserved2:
                return False
    return True


def system_reserved_memory(machine: Machine, node_allocatable: Mapping[str, Quantity],
                           reserved_memory: list[tuple[int, dict[str, Quantity]]]) -> dict[int, dict[str, int]]:
    """getSystemReservedMemory: check reservedMemory against node allocatable, then convert to bytes."""
    node_ids = set(machine.node_ids)
    totals: dict[str, Quantity] = {}
    for numa, limits in reserved_memory:
        if numa not in node_ids:
            raise MemoryManagerError(f"the reserved memory configuration references a NUMA node {numa} that does "
                                     "not exist on this machine")
        for resource, quantity in limits.items():
            totals[resource] = quantity.add(totals[resource]) if resource in totals else quantity
    types = set(totals) | {r for r in node_allocatable if is_memory_resource(r)}
    for resource in sorted(types):
        allocatable = Quantity.of(0, DECIMAL).add(node_allocatable[resource]) if resource in node_allocatable \
            else Quantity.of(0, DECIMAL)
        reserved = Quantity.of(0, DECIMAL).add(totals[resource]) if resource in totals else Quantity.of(0, DECIMAL)
        if allocatable.value != reserved.value:
            raise MemoryManagerError(f'the total amount "{reserved}" of type "{resource}" is not equal to the value '
                                     f'"{allocatable}" determined by Node Allocatable feature')
    converted: dict[int, dict[str, int]] = {n: {} for n in machine.node_ids}
    for numa, limits in reserved_memory:
        for resource, quantity in limits.items():
            value = quantity.as_int64()
            if value is None:
                raise MemoryManagerError("could not covert a variable of type Quantity to int64")
            converted[numa][resource] = value
    return converted


def new_policy(policy_name: str, machine: Machine, node_allocatable: Mapping[str, Quantity],
               reserved_memory: list[tuple[int, dict[str, Quantity]]], affinity: AffinityLookup):
    """memorymanager.NewManager's policy choice, with its errors."""
    if policy_name == POLICY_NONE:
        return NonePolicy()
    if policy_name == POLICY_STATIC:
        reserved = system_reserved_memory(machine, node_allocatable, reserved_memory)
        return StaticPolicy(machine.nodes, reserved, affinity)
    raise MemoryManagerError(f'unknown policy: "{policy_name}"')
