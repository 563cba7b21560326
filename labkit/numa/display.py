"""How the numa commands show hints and merges: the console they print to, a hint as kubelet's
logs write it, and the cross product of hint lists the Topology Manager merges (used by the
simulated commands in labkit/numa/cli.py and the live node's in labkit/numa/live_cli.py)."""

from __future__ import annotations

import typer

CROSS_PRODUCT_ROWS = 40


def console():
    """Where tables and pictures go: the terminal as it is, or, when the output is a pipe or a
    file, a console wide enough that no name, path or CPU list is broken at 80 columns."""
    from rich.console import Console

    found = Console()
    return found if found.is_terminal else Console(width=1000)


def _mask(mask) -> str:
    return "nil" if mask is None else "{" + ",".join(str(b) for b in _bits(mask)) + "}"


def _bits(mask):
    from labkit.numa import bitmask
    return bitmask.get_bits(mask)


def format_hint(hint) -> str:
    return f"{_mask(hint.mask)}{' preferred' if hint.preferred else ''}"


def cross_product_table(lists, labels, numa_info, merger) -> None:
    from rich.table import Table

    from labkit.numa.merge import iterate_permutations, merge_permutation

    total = 1
    for hints in lists:
        total *= len(hints)
    best_fold = merger.merge_brute_force() if total <= 10_000 else merger.merge()
    table = Table(title=f"cross product: {total} permutation(s)")
    for label in labels:
        table.add_column(label)
    table.add_column("merged")
    table.add_column("")
    default = numa_info.default_affinity_mask()
    for n, permutation in enumerate(iterate_permutations(lists)):
        if n == CROSS_PRODUCT_ROWS:
            break
        merged = merge_permutation(default, permutation)
        note = "best" if merged == best_fold else ("ignored: empty mask" if merged.mask == 0 else "")
        table.add_row(*[format_hint(h) for h in permutation], format_hint(merged), note)
    console().print(table)
    if total > CROSS_PRODUCT_ROWS:
        typer.echo(f"... {total - CROSS_PRODUCT_ROWS} more permutation(s) not shown")
