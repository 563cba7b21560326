"""The node-port range and how kube-apiserver v1.34 draws a port from it: the one allocator the
embedded API server (labkit/apiserver/registry/servicealloc.py) and the kube-proxy lab's cluster
state (labkit/kubeproxy/cluster_state.py) both use.

Upstream: pkg/registry/core/service/portallocator/allocator.go (NewInMemory, calculateRangeOffset,
the ErrAllocated / ErrNotInRange texts) over pkg/registry/core/service/allocator/bitmap.go
(NewAllocationMapWithOffset, randomScanStrategyWithOffset). KEP-3668 (GA in v1.29) keeps the
range's first min(max(16, size/32), 128) ports for Services that name their nodePort: a drawn
port comes from the ports above that band while any is free, then from the band.
"""

from __future__ import annotations

import random
from collections.abc import Container

DEFAULT_RANGE = (30000, 32767)      # --service-node-port-range's default

ALLOCATED = "provided port is already allocated"            # portallocator.ErrAllocated
FULL = "range is full"                                      # portallocator.ErrFull


def range_offset(size: int) -> int:
    """calculateRangeOffset: how many of the range's first ports are kept for chosen ones."""
    if size <= 16:
        return 0
    return min(max(16, size // 32), 128)


def not_in_range(low: int, high: int) -> str:
    """ErrNotInRange.Error(), the range printed as net.PortRange.String() prints it."""
    return f"provided port is not in the valid range. The range of valid ports is {low}-{high}"


def draw(low: int, high: int, used: Container[int], rng: random.Random | None = None) -> int | None:
    """A free port of low..high as randomScanStrategyWithOffset picks it: a random start in the
    upper part, scanning forward (wrapping within that part) to the first free port; when the
    upper part is full, the same in the kept band. None: the range is full."""
    rng = rng or random
    size = high - low + 1
    offset = range_offset(size)
    upper = size - offset
    start = rng.randrange(upper)
    for i in range(upper):
        port = low + offset + (start + i) % upper
        if port not in used:
            return port
    if offset:
        start = rng.randrange(offset)
        for i in range(offset):
            port = low + (start + i) % offset
            if port not in used:
                return port
    return None


def check(port: int, low: int, high: int, used: Container[int]) -> str | None:
    """What portallocator's Allocate(port) answers for a port a Service names: None when it is
    free and in the range, else the error's text."""
    if not low <= port <= high:
        return not_in_range(low, high)
    if port in used:
        return ALLOCATED
    return None
