"""The fast merge gives kubelet's answer: property tests against the brute-force cross product.

`Policy(..., brute_force=True)` folds HintMerger.compare over every permutation, exactly as kubelet's
Merge does; the default path computes the answer from the reachable merged hints only. Inputs cover
nil and empty providers, nil and empty hint lists, nil masks, masks naming nodes the machine does not
have, preferred flags, sparse NUMA ids, all three merging policies, and prefer-closest-numa-nodes
with random (also asymmetric) distance tables.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from labkit.numa import bitmask
from labkit.numa.merge import (HintMerger, NUMAInfo, Policy, TopologyHint, _reachable_by_intersection,
                               _reachable_by_transform, filter_providers_hints)

MAX_ID = 9   # hint masks may name ids up to 9, beyond the machine's nodes

hints = st.builds(TopologyHint,
                  st.one_of(st.none(), st.integers(0, (1 << (MAX_ID + 1)) - 1), st.sampled_from([0, 1, 2, 3])),
                  st.booleans())
hint_list = st.one_of(st.none(), st.just([]), st.lists(hints, min_size=1, max_size=5))
provider = st.one_of(st.none(), st.just({}), st.dictionaries(st.sampled_from(["cpu", "memory", "gpu", "nic"]),
                                                             hint_list, min_size=1, max_size=3))
numa_nodes = st.one_of(st.lists(st.integers(0, MAX_ID), min_size=1, max_size=8, unique=True).map(sorted),
                       st.integers(1, 8).map(lambda n: list(range(n))))
distances = st.lists(st.lists(st.integers(10, 40), min_size=MAX_ID + 1, max_size=MAX_ID + 1),
                     min_size=MAX_ID + 1, max_size=MAX_ID + 1)


def cross_product_size(providers) -> int:
    return math.prod(len(lst) for lst in filter_providers_hints(providers))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=numa_nodes, providers=st.lists(provider, max_size=4),
       policy=st.sampled_from(["best-effort", "restricted", "single-numa-node"]),
       prefer_closest=st.booleans(), table=distances)
def test_fast_merge_equals_kubelets_cross_product(nodes, providers, policy, prefer_closest, table):
    assume(cross_product_size(providers) <= 3000)
    info = NUMAInfo(nodes, {i: row for i, row in enumerate(table)})
    fast = Policy(policy, info, prefer_closest).merge(providers)
    slow = Policy(policy, info, prefer_closest, brute_force=True).merge(providers)
    assert (fast.hint, fast.admit) == (slow.hint, slow.admit)


@settings(max_examples=300, deadline=None)
@given(nodes=st.integers(1, 6), lists=st.lists(st.sets(st.integers(0, 63), min_size=1, max_size=6), max_size=4))
def test_both_ways_of_finding_reachable_masks_agree(nodes, lists):
    full = (1 << nodes) - 1
    lists = [{m & full for m in masks} for masks in lists]
    assert _reachable_by_transform(nodes, lists) == _reachable_by_intersection(full, lists)


@settings(max_examples=200, deadline=None)
@given(nodes=numa_nodes, providers=st.lists(provider, max_size=4), prefer_closest=st.booleans(), table=distances)
def test_compare_is_a_total_ranking(nodes, providers, prefer_closest, table):
    """The fast merge rests on this: folding compare over the merged hints in any order gives one answer."""
    info = NUMAInfo(nodes, {i: row for i, row in enumerate(table)})
    merger = HintMerger(info, filter_providers_hints(providers), "best-effort", prefer_closest)
    candidates = sorted({TopologyHint(m, p) for m in merger.reachable_masks() for p in (False, True) if m},
                        key=lambda h: (h.mask, h.preferred))
    results = set()
    for order in (candidates, candidates[::-1], candidates[1::2] + candidates[::2]):
        best = None
        for candidate in order:
            best = merger.compare(best, candidate)
        results.add(best)
    assert len(results) == 1


def test_eight_nodes_four_providers_every_mask():
    """The benchmark's input: 255 hints per provider, over 4 billion permutations — fast, and
    checked against the answer the ranking implies (the narrowest preferred mask, node 0)."""
    nodes = list(range(8))
    masks = list(bitmask.iterate_bitmasks(nodes))
    providers = [{f"res{i}": [TopologyHint(m, bitmask.count(m) == 1) for m in masks]} for i in range(4)]
    assert cross_product_size(providers) == 255 ** 4
    result = Policy("restricted", NUMAInfo(nodes)).merge(providers)
    assert (result.hint, result.admit) == (TopologyHint(0b1, True), True)
    not_preferred = [{f"res{i}": [TopologyHint(m, False) for m in masks]} for i in range(4)]
    result = Policy("restricted", NUMAInfo(nodes)).merge(not_preferred)
    assert (result.hint, result.admit) == (TopologyHint(0b1, False), False)
