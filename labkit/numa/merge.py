"""The Topology Manager's hint merge: providers' hints in, one best hint and an admit decision out.

Follows kubernetes/kubernetes `pkg/kubelet/cm/topologymanager/` (v1.26+ shape, the `HintMerger` era):
* `policy.go`: filterProvidersHints, mergePermutation, narrowestHint/maxOfMinAffinityCounts,
  HintMerger.compare / Merge, iterateAllProviderTopologyHints;
* `numa_info.go`: NewNUMAInfo, NUMAInfo, Narrowest, Closest, CalculateAverageFor (distances from cadvisor);
* `policy_best_effort.go`, `policy_restricted.go`, `policy_single_numa_node.go`,
  `policy_none.go`: the four upstream policies (none, best-effort, restricted, single-numa-node) and
  their canAdmitPodResult.

Two ways to compute the same answer:
* `HintMerger.merge_brute_force()` is kubelet's algorithm: fold `compare` over every permutation of
  the cross product (one hint per provider resource) — exponential in the number of providers.
* `HintMerger.merge()` gives kubelet's answer without enumerating the cross product. `compare` is
  a "keep the better one" fold under a fixed ranking (preferred before non-preferred; for
  non-preferred hints a count equal to BestNonPreferredAffinityCount, then smaller counts closest to
  it, then larger counts smallest first; ties broken by the mask comparison), so the result depends
  only on *which* merged hints are reachable, not on how often or in which order. Reachable
  preferred hints follow directly from mergePermutation's rule (every chosen hint preferred and all
  non-nil masks equal); reachable masks of any kind are the distinct AND-combinations of one mask
  per list, found with a superset-sum ("zeta") transform over the 2^n subsets of the n NUMA nodes
  (a product of per-list counts, then the inverse transform), or, when that is cheaper, by
  intersecting the set of reachable masks with each list in turn. Property tests check that both
  give the same hint on random inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Iterable, Iterator, Mapping, Sequence

from labkit.numa import bitmask

POLICY_NONE = "none"
POLICY_BEST_EFFORT = "best-effort"
POLICY_RESTRICTED = "restricted"
POLICY_SINGLE_NUMA_NODE = "single-numa-node"
POLICIES = (POLICY_NONE, POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)


@dataclass(frozen=True)
class TopologyHint:
    """TopologyHint{NUMANodeAffinity, Preferred}; mask None is Go's nil affinity ("don't care")."""

    mask: int | None
    preferred: bool

    def to_json(self) -> dict:
        return {"mask": bitmask.bits_or_none(self.mask), "preferred": self.preferred}

    @classmethod
    def from_json(cls, data: Mapping) -> "TopologyHint":
        return cls(bitmask.from_bits_or_none(data.get("mask")), bool(data.get("preferred", False)))

    def less_than(self, other: "TopologyHint") -> bool:
        """TopologyHint.LessThan (used to sort hints for display, as kubelet's tests do)."""
        if self.preferred != other.preferred:
            return self.preferred
        return bitmask.is_narrower_than(self.mask or 0, other.mask or 0)

    def __str__(self) -> str:
        mask = "nil" if self.mask is None else bitmask.to_string(self.mask)
        return f"{{{mask} {str(self.preferred).lower()}}}"


# A provider's answer: None (nil map) or {resource: None (nil slice) | [hints] ([] = empty slice)}.
ProviderHints = Mapping[str, Sequence[TopologyHint] | None] | None


def sort_hints(hints: Iterable[TopologyHint]) -> list[TopologyHint]:
    """Hints in TopologyHint.LessThan order (preferred first, then narrower)."""
    from functools import cmp_to_key
    return sorted(hints, key=cmp_to_key(lambda a, b: -1 if a.less_than(b) else (1 if b.less_than(a) else 0)))


class NUMAInfo:
    """NUMAInfo{Nodes, NUMADistances}: distances[i][j] is indexed by node *id*, as in Go."""

    def __init__(self, nodes: Sequence[int], distances: Mapping[int, Sequence[int] | None] | None = None):
        self.nodes = list(nodes)
        # a node may map to None: NewNUMAInfo keeps a nil row when distances are not needed
        self.distances = {int(k): None if v is None else list(v) for k, v in (distances or {}).items()}

    def default_affinity_mask(self) -> int:
        return bitmask.new_bitmask(*self.nodes)

    def narrowest(self, m1: int, m2: int) -> int:
        return m1 if bitmask.is_narrower_than(m1, m2) else m2

    def average_distance(self, mask: int) -> float:
        """CalculateAverageFor: mean of d[i][j] over all ordered pairs of set bits (i == j included)."""
        bits = bitmask.get_bits(mask)
        if not bits:
            return 0.0
        total, n = 0.0, 0
        for a in bits:
            row = self.distances.get(a)
            for b in bits:
                if row is None or b >= len(row):
                    raise ValueError(f"no NUMA distance known from node {a} to node {b}")
                total += float(row[b])
                n += 1
        return total / n

    def closest(self, m1: int, m2: int) -> int:
        """Closest: different sizes -> narrowest; same average distance -> smaller mask; else nearer."""
        if bitmask.count(m1) != bitmask.count(m2):
            return self.narrowest(m1, m2)
        d1, d2 = self.average_distance(m1), self.average_distance(m2)
        if d1 == d2:
            return m1 if bitmask.is_less_than(m1, m2) else m2
        return m1 if d1 < d2 else m2


def new_numa_info(topology: Sequence[tuple[int, Sequence[int] | None]], prefer_closest: bool) -> NUMAInfo:
    """NewNUMAInfo (numa_info.go): the node ids in cadvisor's order; each node's distance row is read
    only with prefer-closest-numa-nodes (else kept as nil), and a missing row is then an error."""
    nodes, distances = [], {}
    for node_id, row in topology:
        nodes.append(node_id)
        if prefer_closest and row is None:
            raise ValueError("error getting NUMA distances from cadvisor")
        distances[node_id] = list(row) if prefer_closest else None
    return NUMAInfo(nodes, distances)


def filter_providers_hints(providers: Sequence[ProviderHints]) -> list[list[TopologyHint]]:
    """filterProvidersHints: one list per (provider, resource).

    A provider with a nil or empty map and a resource with a nil slice mean "no preference"
    ({nil, preferred}); a resource with an empty slice means "no possible placement" ({nil, not
    preferred}). Go iterates a provider's resources in random map order; the merge result does not
    depend on it, and labkit takes them in name order.
    """
    lists: list[list[TopologyHint]] = []
    for hints in providers:
        if not hints:
            lists.append([TopologyHint(None, True)])
            continue
        for resource in sorted(hints):
            value = hints[resource]
            if value is None:
                lists.append([TopologyHint(None, True)])
            elif len(value) == 0:
                lists.append([TopologyHint(None, False)])
            else:
                lists.append(list(value))
    return lists


def provider_list_labels(providers: Sequence[ProviderHints]) -> list[str]:
    """Names for the lists filter_providers_hints makes, in the same order."""
    labels = []
    for i, hints in enumerate(providers):
        if not hints:
            labels.append(f"provider {i + 1}")
        else:
            labels += [f"{resource}" for resource in sorted(hints)]
    return labels


def filter_single_numa_hints(lists: Sequence[Sequence[TopologyHint]]) -> list[list[TopologyHint]]:
    """filterSingleNumaHints: keep preferred hints that are nil or name exactly one NUMA node."""
    return [[h for h in hints if h.preferred and (h.mask is None or bitmask.count(h.mask) == 1)]
            for hints in lists]


def iterate_permutations(lists: Sequence[Sequence[TopologyHint]]) -> Iterator[tuple[TopologyHint, ...]]:
    """iterateAllProviderTopologyHints: the cross product, first list outermost."""
    return product(*lists)


def merge_permutation(default_affinity: int, permutation: Sequence[TopologyHint]) -> TopologyHint:
    """mergePermutation: AND of the non-nil masks with the default mask; preferred only if every
    hint is preferred and all non-nil masks are equal."""
    preferred = True
    merged = default_affinity
    first: int | None = None
    for hint in permutation:
        if hint.mask is not None:
            if first is None:
                first = hint.mask
            elif hint.mask != first:
                preferred = False
            merged &= hint.mask
        if not hint.preferred:
            preferred = False
    return TopologyHint(merged, preferred)


def narrowest_hint(hints: Sequence[TopologyHint]) -> TopologyHint | None:
    best = None
    for hint in hints:
        if hint.mask is None:
            continue
        if best is None or bitmask.is_narrower_than(hint.mask, best.mask):
            best = hint
    return best


def max_of_min_affinity_counts(lists: Sequence[Sequence[TopologyHint]]) -> int:
    """maxOfMinAffinityCounts: the largest, over lists, of the list's narrowest non-nil mask size."""
    result = 0
    for hints in lists:
        narrowest = narrowest_hint(hints)
        if narrowest is not None:
            result = max(result, bitmask.count(narrowest.mask))
    return result


class HintMerger:
    """HintMerger: BestNonPreferredAffinityCount plus the mask comparison the policy options select."""

    def __init__(self, numa_info: NUMAInfo, lists: Sequence[Sequence[TopologyHint]], policy_name: str,
                 prefer_closest: bool = False):
        self.numa_info = numa_info
        self.lists = [list(hints) for hints in lists]
        self.best_non_preferred_affinity_count = max_of_min_affinity_counts(self.lists)
        # prefer-closest-numa-nodes is ignored by single-numa-node (NewHintMerger).
        self.use_closest = prefer_closest and policy_name != POLICY_SINGLE_NUMA_NODE

    def compare_masks(self, current: TopologyHint, candidate: TopologyHint) -> TopologyHint:
        if candidate.mask == current.mask:
            return current
        if self.use_closest:
            best = self.numa_info.closest(current.mask, candidate.mask)
        else:
            best = self.numa_info.narrowest(current.mask, candidate.mask)
        return current if best == current.mask else candidate

    def compare(self, current: TopologyHint | None, candidate: TopologyHint) -> TopologyHint | None:
        """HintMerger.compare: returns `current` or `candidate` (the very object)."""
        if bitmask.count(candidate.mask or 0) == 0:
            return current
        if current is None:
            return candidate
        if not current.preferred and candidate.preferred:
            return candidate
        if current.preferred and not candidate.preferred:
            return current
        if current.preferred and candidate.preferred:
            return self.compare_masks(current, candidate)
        best = self.best_non_preferred_affinity_count
        c, k = bitmask.count(current.mask), bitmask.count(candidate.mask)
        if c > best:                      # case 1
            return self.compare_masks(current, candidate)
        if c == best:                     # case 2
            return current if k != best else self.compare_masks(current, candidate)
        if k > best:                      # case 3a
            return current
        if k == best:                     # case 3b
            return candidate
        if k > c:                         # case 3ca
            return candidate
        if k < c:                         # case 3cb
            return current
        return self.compare_masks(current, candidate)  # case 3cc

    def merge_brute_force(self) -> TopologyHint:
        """HintMerger.Merge exactly as kubelet runs it: fold compare over every permutation."""
        default = self.numa_info.default_affinity_mask()
        best = None
        for permutation in iterate_permutations(self.lists):
            best = self.compare(best, merge_permutation(default, permutation))
        return best if best is not None else TopologyHint(default, False)

    def merge(self) -> TopologyHint:
        """The same answer as merge_brute_force, from the set of reachable merged hints."""
        default = self.numa_info.default_affinity_mask()
        candidates = [TopologyHint(m, True) for m in self.reachable_preferred() if m]
        if not candidates:
            candidates = [TopologyHint(m, False) for m in self.reachable_masks() if m]
        best = None
        for candidate in sorted(candidates, key=lambda h: h.mask):
            best = self.compare(best, candidate)
        return best if best is not None else TopologyHint(default, False)

    # -- reachability ---------------------------------------------------------------------------
    def reachable_preferred(self) -> set[int]:
        """Masks of the preferred merged hints: every list contributes a preferred hint that is nil
        or carries one common raw mask M (the merged mask is then default AND M)."""
        if any(not hints for hints in self.lists):
            return set()
        default = self.numa_info.default_affinity_mask()
        preferred_masks = [{h.mask for h in hints if h.preferred and h.mask is not None} for hints in self.lists]
        preferred_nil = [any(h.preferred and h.mask is None for h in hints) for hints in self.lists]
        found = {default} if all(preferred_nil) else set()
        for mask in set().union(*preferred_masks):
            if all(mask in masks or nil for masks, nil in zip(preferred_masks, preferred_nil)):
                found.add(default & mask)
        return found

    def reachable_masks(self) -> set[int]:
        """Distinct AND-combinations (with the default mask) of one hint per list, nil = default."""
        if any(not hints for hints in self.lists):
            return set()
        positions = bitmask.get_bits(self.numa_info.default_affinity_mask())
        n = len(positions)
        full = (1 << n) - 1
        lists = [{full if h.mask is None else _compact(h.mask, positions) for h in hints} for hints in self.lists]
        if _zeta_cost(n, lists) <= _intersection_cost(n, lists):
            compact = _reachable_by_transform(n, lists)
        else:
            compact = _reachable_by_intersection(full, lists)
        return {_expand(x, positions) for x in compact}


def _compact(mask: int, positions: list[int]) -> int:
    return sum(1 << i for i, p in enumerate(positions) if mask >> p & 1)


def _expand(x: int, positions: list[int]) -> int:
    return sum(1 << p for i, p in enumerate(positions) if x >> i & 1)


def _zeta_cost(n: int, lists: list[set[int]]) -> int:
    return (len(lists) + 1) * max(n, 1) * (1 << n)


def _intersection_cost(n: int, lists: list[set[int]]) -> int:
    cost, size = 0, 1
    for masks in lists:
        cost += size * len(masks)
        size = min(1 << n, size * len(masks))
    return cost


def _reachable_by_transform(n: int, lists: list[set[int]]) -> set[int]:
    """Count, for every subset x, the permutations whose AND is exactly x: the product of per-list
    superset counts (how many of the list's masks contain x), turned back into exact counts."""
    size = 1 << n
    totals = [1] * size
    for masks in lists:
        counts = [0] * size
        for mask in masks:
            counts[mask] = 1
        _superset_sums(counts, n)
        totals = [a * b for a, b in zip(totals, counts)]
    _superset_differences(totals, n)
    return {x for x in range(size) if totals[x] > 0}


def _superset_sums(values: list[int], n: int) -> None:
    for i in range(n):
        bit = 1 << i
        for x in range(len(values)):
            if not x & bit:
                values[x] += values[x | bit]


def _superset_differences(values: list[int], n: int) -> None:
    for i in range(n):
        bit = 1 << i
        for x in range(len(values)):
            if not x & bit:
                values[x] -= values[x | bit]


def _reachable_by_intersection(full: int, lists: list[set[int]]) -> set[int]:
    reachable = {full}
    for masks in lists:
        reachable = {r & m for r in reachable for m in masks}
    return reachable


# -- policies ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class MergeResult:
    hint: TopologyHint
    admit: bool
    lists: list[list[TopologyHint]]   # the filtered lists the merger saw (for explanations)


class Policy:
    """A Topology Manager policy: Merge(providersHints) -> (best hint, admit)."""

    def __init__(self, name: str, numa_info: NUMAInfo, prefer_closest: bool = False, brute_force: bool = False):
        if name not in POLICIES:
            raise ValueError(f'unknown policy: "{name}"')
        self.name = name
        self.numa_info = numa_info
        self.prefer_closest = prefer_closest
        self.brute_force = brute_force

    def merge(self, providers: Sequence[ProviderHints]) -> MergeResult:
        if self.name == POLICY_NONE:
            # nonePolicy.Merge: TopologyHint{} and always admit.
            return MergeResult(TopologyHint(None, False), True, [])
        lists = filter_providers_hints(providers)
        if self.name == POLICY_SINGLE_NUMA_NODE:
            lists = filter_single_numa_hints(lists)
        merger = HintMerger(self.numa_info, lists, self.name, self.prefer_closest)
        hint = merger.merge_brute_force() if self.brute_force else merger.merge()
        if self.name == POLICY_SINGLE_NUMA_NODE and hint.mask == self.numa_info.default_affinity_mask():
            hint = TopologyHint(None, hint.preferred)
        return MergeResult(hint, self.can_admit(hint), lists)

    def can_admit(self, hint: TopologyHint) -> bool:
        """canAdmitPodResult: none and best-effort admit everything; restricted and
        single-numa-node only a preferred hint (policy_best_effort.go, policy_restricted.go,
        policy_single_numa_node.go)."""
        if self.name in (POLICY_NONE, POLICY_BEST_EFFORT):
            return True
        return hint.preferred


def hints_from_json(providers: Sequence) -> list[ProviderHints]:
    """Providers in the JSON form of the fidelity tables and `labkit numa merge -f`:
    null | {} | {resource: null | [] | [{"mask": [ids] | null, "preferred": bool}, ...]}."""
    out: list[ProviderHints] = []
    for provider in providers:
        if provider is None:
            out.append(None)
            continue
        out.append({resource: None if hints is None else [TopologyHint.from_json(h) for h in hints]
                    for resource, hints in provider.items()})
    return out
