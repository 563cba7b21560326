"""CPU sets in the Linux list form ("0-3,8,10-11"), as `k8s.io/utils/cpuset` parses and prints them.

kubelet keeps CPU sets as sorted sets of ints; its checkpoints and error messages use the list
form. `parse` reproduces `cpuset.Parse`'s errors word for word because they appear in kubelet's
checkpoint restore errors (e.g. `strconv.Atoi: parsing "1.3": invalid syntax`).
"""

from __future__ import annotations

import re
from typing import Iterable

_DIGITS = re.compile(r"[+-]?[0-9]+")


class CPUSetParseError(ValueError):
    pass


def _atoi(text: str) -> int:
    # Go strconv.Atoi: optional sign, decimal digits only.
    if not _DIGITS.fullmatch(text):
        raise CPUSetParseError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)


def parse(text: str) -> frozenset[int]:
    """k8s.io/utils/cpuset Parse: "" is the empty set; ranges "a-b" need a <= b."""
    if text == "":
        return frozenset()
    result: set[int] = set()
    for part in text.split(","):
        bounds = part.split("-", 1)  # strings.SplitN(r, "-", 2)
        if len(bounds) == 1:
            result.add(_atoi(bounds[0]))
        else:
            start, end = _atoi(bounds[0]), _atoi(bounds[1])
            if start > end:
                raise CPUSetParseError(f'invalid range "{part}" ({start} > {end})')
            result.update(range(start, end + 1))
    return frozenset(result)


def format_cpus(cpus: Iterable[int]) -> str:
    """CPUSet.String(): sorted, consecutive runs collapsed into "a-b"."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
