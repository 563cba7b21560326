"""The CPU Manager's allocator: which CPUs to take for a request (`cpumanager/cpu_assignment.go`).

Follows kubernetes/kubernetes `pkg/kubelet/cm/cpumanager/cpu_assignment.go` as of v1.28–v1.30
(`takeByTopologyNUMAPacked(topo, available, n)` and `takeByTopologyNUMADistributed(topo,
available, n, cpuGroupSize)`). Later releases add a CPU sorting strategy and uncore-cache alignment
options; with their default settings they take the same CPUs.

The accumulator ("packed" allocator):
* NUMA nodes are the first level when NumSockets >= NumNUMANodes ("numaFirst"), sockets otherwise
  (several NUMA nodes per socket, "socketsFirst");
* units are sorted by how many CPUs are still available in them (fewest first, ties by id), so
  partly used units are filled before fresh ones;
* whole free first-level units, then whole second-level units, then whole free cores, then single
  CPUs are taken, each only while the remaining need is at least the unit's size.

The distributed allocator (`distribute-cpus-across-numa`) spreads a request evenly over the
fewest NUMA nodes that can hold it, choosing among equally small combinations the one that leaves
the most balanced free CPUs (population standard deviation, rounded to 3 decimals).

Go details kept on purpose, because they decide results:
* the candidate combinations come from `iterateCombinations`, which builds them with `append` on
  shared slices; kubelet keeps references to the best combination and the best remainder subset,
  so a later `append` into the same backing array can overwrite their last element (combinations
  of four or more NUMA nodes). `_GoSlice` reproduces Go's `append` growth so the same happens here;
* where kubelet would loop forever (handing out a remainder no chosen NUMA node can take in whole
  groups), labkit stops with an error that says so instead of hanging.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

from labkit.numa.topology import CPUTopology

CONTINUE, BREAK = 0, 1


class CPUAllocationError(Exception):
    """An allocation error with kubelet's message."""


class CPUAccumulator:
    """cpuAccumulator: the CPUs still available (`details`), the result so far and what is needed."""

    def __init__(self, topo: CPUTopology, available: Iterable[int], num_cpus: int):
        self.topo = topo
        self.details = set(available) & topo.cpus()
        self.num_cpus_needed = num_cpus
        self.result: set[int] = set()
        self.numa_first = topo.num_sockets >= topo.num_numa_nodes

    # -- views of the available CPUs -------------------------------------------------------------
    def _avail_numa(self, *ids: int) -> set[int]:
        return self.details & self.topo.cpus_in_numa_nodes(*ids)

    def _avail_socket(self, *ids: int) -> set[int]:
        return self.details & self.topo.cpus_in_sockets(*ids)

    def _avail_core(self, *ids: int) -> set[int]:
        return self.details & self.topo.cpus_in_cores(*ids)

    def _numas(self, cpus: Iterable[int] | None = None) -> set[int]:
        return {self.topo.details[c].numa for c in (self.details if cpus is None else cpus)}

    def _sockets(self, cpus: Iterable[int] | None = None) -> set[int]:
        return {self.topo.details[c].socket for c in (self.details if cpus is None else cpus)}

    def _cores(self, cpus: Iterable[int]) -> set[int]:
        return {self.topo.details[c].core for c in cpus}

    @staticmethod
    def _sort(ids: Iterable[int], available_in: Callable[[int], set[int]]) -> list[int]:
        """sort(): fewest available CPUs first, ties by id."""
        return sorted(ids, key=lambda i: (len(available_in(i)), i))

    # -- orderings (numaFirst / socketsFirst) ----------------------------------------------------
    def sort_available_numa_nodes(self) -> list[int]:
        if self.numa_first:
            return self._sort(self._numas(), self._avail_numa)
        result = []
        for socket in self.sort_available_sockets():
            result += self._sort(self._numas(self._avail_socket(socket)), self._avail_numa)
        return result

    def sort_available_sockets(self) -> list[int]:
        if not self.numa_first:
            return self._sort(self._sockets(), self._avail_socket)
        result = []
        for numa in self.sort_available_numa_nodes():
            result += self._sort(self._sockets(self._avail_numa(numa)), self._avail_socket)
        return result

    def sort_available_cores(self) -> list[int]:
        result = []
        if self.numa_first:
            for socket in self.sort_available_sockets():
                result += self._sort(self._cores(self._avail_socket(socket)), self._avail_core)
        else:
            for numa in self.sort_available_numa_nodes():
                result += self._sort(self._cores(self._avail_numa(numa)), self._avail_core)
        return result

    def sort_available_cpus(self) -> list[int]:
        result = []
        for core in self.sort_available_cores():
            result += sorted(self._avail_core(core))
        return result

    # -- free units ------------------------------------------------------------------------------
    def free_numa_nodes(self) -> list[int]:
        return [n for n in self.sort_available_numa_nodes()
                if len(self._avail_numa(n)) == len(self.topo.cpus_in_numa_nodes(n))]

    def free_sockets(self) -> list[int]:
        return [s for s in self.sort_available_sockets() if len(self._avail_socket(s)) == self.topo.cpus_per_socket()]

    def free_cores(self) -> list[int]:
        return [c for c in self.sort_available_cores() if len(self._avail_core(c)) == self.topo.cpus_per_core()]

    def free_cpus(self) -> list[int]:
        return self.sort_available_cpus()

    # -- taking ----------------------------------------------------------------------------------
    def needs(self, n: int) -> bool:
        return self.num_cpus_needed >= n

    def is_satisfied(self) -> bool:
        return self.num_cpus_needed < 1

    def is_failed(self) -> bool:
        return self.num_cpus_needed > len(self.details)

    def take(self, cpus: Iterable[int]) -> None:
        cpus = set(cpus)
        self.result |= cpus
        self.details -= self.result
        self.num_cpus_needed -= len(cpus)

    def take_full_numa_nodes(self) -> None:
        for numa in self.free_numa_nodes():
            cpus = self.topo.cpus_in_numa_nodes(numa)
            if self.needs(len(cpus)):
                self.take(cpus)

    def take_full_sockets(self) -> None:
        for socket in self.free_sockets():
            cpus = self.topo.cpus_in_sockets(socket)
            if self.needs(len(cpus)):
                self.take(cpus)

    def take_full_cores(self) -> None:
        for core in self.free_cores():
            cpus = self.topo.cpus_in_cores(core)
            if self.needs(len(cpus)):
                self.take(cpus)

    def take_remaining_cpus(self) -> None:
        for cpu in self.sort_available_cpus():
            self.take({cpu})
            if self.is_satisfied():
                return

    def range_numa_nodes_needed_to_satisfy(self, group: int) -> tuple[int, int]:
        """rangeNUMANodesNeededToSatisfy(cpuGroupSize): (min, max) NUMA nodes a request can span."""
        num_numa = len(self.topo.numa_nodes())
        num_numa_available = len(self._numas())
        groups = (len(self.topo.cpus()) - 1) // group + 1
        groups_per_numa = (groups - 1) // num_numa + 1
        groups_needed = (self.num_cpus_needed - 1) // group + 1
        return (groups_needed - 1) // groups_per_numa + 1, min(groups_needed, num_numa_available)


def _not_enough(requested: int, available: Iterable[int]) -> CPUAllocationError:
    return CPUAllocationError(f"not enough cpus available to satisfy request: "
                              f"requested={requested}, available={len(set(available))}")


def take_by_topology_numa_packed(topo: CPUTopology, available: Iterable[int], num_cpus: int) -> frozenset[int]:
    """takeByTopologyNUMAPacked: raises CPUAllocationError with kubelet's message on failure."""
    available = set(available)
    acc = CPUAccumulator(topo, available, num_cpus)
    if acc.is_satisfied():
        return frozenset(acc.result)
    if acc.is_failed():
        raise _not_enough(num_cpus, available)
    if acc.numa_first:
        acc.take_full_numa_nodes()
        if acc.is_satisfied():
            return frozenset(acc.result)
        acc.take_full_sockets()
    else:
        acc.take_full_sockets()
        if acc.is_satisfied():
            return frozenset(acc.result)
        acc.take_full_numa_nodes()
    if acc.is_satisfied():
        return frozenset(acc.result)
    acc.take_full_cores()
    if acc.is_satisfied():
        return frozenset(acc.result)
    acc.take_remaining_cpus()
    if acc.is_satisfied():
        return frozenset(acc.result)
    raise CPUAllocationError("failed to allocate cpus")


class _GoSlice:
    """A Go []int: a length on a shared backing array whose size is the capacity."""

    __slots__ = ("array", "length")

    def __init__(self, array: list[int], length: int):
        self.array = array
        self.length = length

    def append(self, value: int) -> "_GoSlice":
        if self.length < len(self.array):            # spare capacity: written in place
            self.array[self.length] = value
            return _GoSlice(self.array, self.length + 1)
        capacity = _grown_capacity(len(self.array), self.length + 1)
        array = self.array[:self.length] + [value] + [0] * (capacity - self.length - 1)
        return _GoSlice(array, self.length + 1)

    def values(self) -> list[int]:
        return self.array[:self.length]


# Go's malloc size classes up to 2 KiB (bytes); []int elements are 8 bytes.
_SIZE_CLASSES = (8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288,
                 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408,
                 1536, 1792, 2048)


def _grown_capacity(old_cap: int, new_len: int) -> int:
    """runtime.growslice for 8-byte elements (doubling below 256, then rounding up to a size class)."""
    double = old_cap * 2
    if new_len > double:
        capacity = new_len
    elif old_cap < 256:
        capacity = double
    else:
        capacity = old_cap
        while capacity < new_len:
            capacity += (capacity + 3 * 256) // 4
    size = capacity * 8
    for size_class in _SIZE_CLASSES:
        if size <= size_class:
            return size_class // 8
    return capacity


def iterate_combinations(items: list[int], k: int, visit: Callable[[_GoSlice], int]) -> None:
    """iterateCombinations: every k-subset in combination order, built by appending to shared slices."""
    if k < 1:
        return

    def helper(k: int, start: int, accum: _GoSlice) -> int:
        if k == 0:
            return visit(accum)
        for i in range(start, len(items) - k + 1):
            if helper(k - 1, i + 1, accum.append(items[i])) == BREAK:
                return BREAK
        return CONTINUE

    helper(k, 0, _GoSlice([], 0))


def _go_round(x: float) -> float:
    """math.Round: nearest integer, halves away from zero."""
    t = float(math.trunc(x))
    if abs(x - t) >= 0.5:
        t += math.copysign(1.0, x)
    return t


def _standard_deviation(values: list[int]) -> float:
    mean = _go_round(sum(float(v) for v in values) / len(values) * 1000) / 1000
    total = sum((float(v) - mean) * (float(v) - mean) for v in values)
    return _go_round(math.sqrt(total / len(values)) * 1000) / 1000


def take_by_topology_numa_distributed(topo: CPUTopology, available: Iterable[int], num_cpus: int,
                                      cpu_group_size: int) -> frozenset[int]:
    """takeByTopologyNUMADistributed (KEP-2902): raises CPUAllocationError on failure."""
    available = set(available)
    if num_cpus % cpu_group_size != 0:
        return take_by_topology_numa_packed(topo, available, num_cpus)
    acc = CPUAccumulator(topo, available, num_cpus)
    if acc.is_satisfied():
        return frozenset(acc.result)
    if acc.is_failed():
        raise _not_enough(num_cpus, available)

    numas = acc.sort_available_numa_nodes()
    group = cpu_group_size
    min_numas, max_numas = acc.range_numa_nodes_needed_to_satisfy(group)
    for k in range(min_numas, max_numas + 1):
        best = {"balance": math.inf, "remainder": None, "combo": None}

        def visit_combo(combo: _GoSlice) -> int:
            if best["balance"] == 0:
                return BREAK
            members = combo.values()
            if len(acc._avail_numa(*members)) < num_cpus:
                return CONTINUE
            if sum(len(acc._avail_numa(m)) // group for m in members) * group < num_cpus:
                return CONTINUE
            distribution = num_cpus // len(members) // group * group
            if any(len(acc._avail_numa(m)) < distribution for m in members):
                return CONTINUE
            after = {numa: len(acc._avail_numa(numa)) for numa in numas}
            for m in members:
                after[m] -= distribution
            remainder = num_cpus - distribution * len(members)
            remainder_combo = [m for m in members if after[m] >= group]
            local = {"balance": math.inf, "remainder": None}
            if remainder == 0:
                local["balance"] = _standard_deviation(list(after.values()))

            def visit_subset(subset: _GoSlice) -> int:
                left = dict(after)
                chosen = subset.values()
                if sum(left[n] for n in chosen) < remainder:
                    return CONTINUE
                _hand_out(left, chosen, remainder, group)
                balance = _standard_deviation(list(left.values()))
                if balance < local["balance"]:
                    local["balance"], local["remainder"] = balance, subset
                return CONTINUE

            size = len(remainder_combo)
            while remainder > 0 and size >= 1:
                iterate_combinations(remainder_combo, size, visit_subset)
                size -= 1
            if local["balance"] < best["balance"]:
                best.update(balance=local["balance"], remainder=local["remainder"], combo=combo)
            return CONTINUE

        iterate_combinations(numas, k, visit_combo)
        if best["combo"] is None:
            continue

        combo = best["combo"].values()
        remainder_numas = best["remainder"].values() if best["remainder"] is not None else []
        distribution = num_cpus // len(combo) // group * group
        for numa in combo:
            acc.take(_packed_or_nothing(topo, acc._avail_numa(numa), distribution))
        remainder = num_cpus - distribution * len(combo)
        while remainder > 0:
            progressed = False
            for numa in remainder_numas:
                if remainder == 0:
                    break
                if len(acc._avail_numa(numa)) < group:
                    continue
                acc.take(_packed_or_nothing(topo, acc._avail_numa(numa), group))
                remainder -= group
                progressed = True
            if not progressed:
                raise CPUAllocationError(
                    f"kubelet would loop forever here: {remainder} remainder CPUs cannot be taken in groups "
                    f"of {group} from NUMA nodes {remainder_numas}")
        if acc.num_cpus_needed > 0:
            raise CPUAllocationError(f"accounting error, not enough CPUs allocated, remaining: {acc.num_cpus_needed}")
        if acc.num_cpus_needed < 0:
            raise CPUAllocationError(f"accounting error, too many CPUs allocated, remaining: {acc.num_cpus_needed}")
        return frozenset(acc.result)

    return take_by_topology_numa_packed(topo, available, num_cpus)


def _hand_out(left: dict[int, int], chosen: list[int], remainder: int, group: int) -> None:
    """Hand the remainder out `group` CPUs at a time, round robin over `chosen` (a local copy)."""
    while remainder > 0:
        progressed = False
        for numa in chosen:
            if remainder == 0:
                break
            if left[numa] < group:
                continue
            left[numa] -= group
            remainder -= group
            progressed = True
        if not progressed:
            raise CPUAllocationError(
                f"kubelet would loop forever here: {remainder} remainder CPUs cannot be handed out in groups "
                f"of {group} over NUMA nodes {chosen}")


def _packed_or_nothing(topo: CPUTopology, available: set[int], n: int) -> frozenset[int]:
    # kubelet ignores this call's error (`cpus, _ := takeByTopologyNUMAPacked(...)`): nothing is taken.
    try:
        return take_by_topology_numa_packed(topo, available, n)
    except CPUAllocationError:
        return frozenset()
