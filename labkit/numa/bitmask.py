"""NUMA affinity masks, as kubelet's `topologymanager/bitmask` package has them.

A mask is a plain Python int (bit i set = NUMA node i); `None` stands for Go's nil BitMask (a hint
that does not care about NUMA placement), which is different from the empty mask 0.

Behaviour follows kubernetes/kubernetes `pkg/kubelet/cm/topologymanager/bitmask/bitmask.go`
(v1.26+, the version with IsLessThan/IsGreaterThan):
* bits outside 0..63 are rejected before anything changes (NewBitMask/Add/Remove);
* IsNarrowerThan: fewer bits wins; on equal counts the smaller 64-bit value wins;
* IsLessThan/IsGreaterThan: plain unsigned comparison of the 64-bit words;
* String(): binary, zero-padded to an even number of digits (at least "00");
* IterateBitMasks: every non-empty subset, by increasing size, each size in the lexicographic
  order of positions in the given bit list (itertools.combinations order).
"""

from __future__ import annotations

from itertools import combinations
from typing import Iterable, Iterator

MAX_BITS = 64
FULL = (1 << MAX_BITS) - 1


def new_bitmask(*bits: int) -> int:
    """NewBitMask(bits...): error (ValueError) if any bit is outside 0..63."""
    mask = 0
    for bit in bits:
        if bit < 0 or bit >= MAX_BITS:
            raise ValueError(f"bit number must be in range 0-{MAX_BITS - 1}")
        mask |= 1 << bit
    return mask


def add(mask: int, *bits: int) -> int:
    """Add(bits...): the mask with the bits set; unchanged (and ValueError) if any bit is invalid."""
    return mask | new_bitmask(*bits)


def remove(mask: int, *bits: int) -> int:
    """Remove(bits...): the mask with the bits cleared; ValueError if any bit is invalid."""
    return mask & ~new_bitmask(*bits) & FULL


def and_(first: int, *masks: int) -> int:
    for mask in masks:
        first &= mask
    return first


def or_(first: int, *masks: int) -> int:
    for mask in masks:
        first |= mask
    return first


def count(mask: int) -> int:
    return mask.bit_count()


def get_bits(mask: int) -> list[int]:
    """Set bits in ascending order ([] for the empty mask; Go returns nil)."""
    bits = []
    while mask:
        low = mask & -mask
        bits.append(low.bit_length() - 1)
        mask ^= low
    return bits


def is_set(mask: int, bit: int) -> bool:
    return 0 <= bit < MAX_BITS and bool(mask >> bit & 1)


def any_set(mask: int, bits: Iterable[int]) -> bool:
    return any(is_set(mask, bit) for bit in bits)


def is_narrower_than(mask: int, other: int) -> bool:
    """Fewer NUMA nodes wins; on a tie the numerically smaller mask wins."""
    if count(mask) == count(other):
        return mask < other
    return count(mask) < count(other)


def is_less_than(mask: int, other: int) -> bool:
    return mask < other


def is_greater_than(mask: int, other: int) -> bool:
    return mask > other


def to_string(mask: int) -> str:
    """Binary, zero-padded to an even number of digits; also the memory manager's map key."""
    text = format(mask, "b")
    if len(text) % 2:
        text = "0" + text
    return text


def from_bits_or_none(bits: Iterable[int] | None) -> int | None:
    return None if bits is None else new_bitmask(*bits)


def bits_or_none(mask: int | None) -> list[int] | None:
    return None if mask is None else get_bits(mask)


def iterate_bitmasks(bits: list[int]) -> Iterator[int]:
    """IterateBitMasks: all non-empty subsets of `bits`, smallest first, combination order."""
    for size in range(1, len(bits) + 1):
        for chosen in combinations(bits, size):
            yield new_bitmask(*chosen)
