"""One measured figure of a benchmark, the table of figures, and timing of one command."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


@dataclass
class Figure:
    group: str                  # e.g. "kube-proxy"
    name: str                   # e.g. "render 10,000 services x 5 endpoints"
    value: float
    unit: str                   # "s", "ms", "req/s", "MiB", "x", ...
    target: str | None = None   # human-readable target, e.g. "< 3 s"
    met: bool | None = None     # whether the target was met (None: no target)
    note: str = ""

    def shown(self) -> str:
        text = f"{self.value:,.3f}".rstrip("0").rstrip(".") if isinstance(self.value, float) else f"{self.value:,}"
        return f"{text} {self.unit}" + (f" ({self.note})" if self.note else "")

    def verdict(self) -> str:
        return "" if self.met is None else ("yes" if self.met else "NO")


def print_table(figures: list[Figure]) -> None:
    rows = [("benchmark", "figure", "value", "target", "met")]
    for f in figures:
        rows.append((f.group, f.name, f.shown(), f.target or "", f.verdict()))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(widths[j]) for j, cell in enumerate(row)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def time_command(argv: list[str], env: dict, ok=(0,)) -> float:
    """Seconds one run of `argv` took (from the repository); an error if it exits with a code not in `ok`."""
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, cwd=REPO)
    elapsed = time.perf_counter() - start
    if result.returncode not in ok:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.decode()[-500:]}")
    return elapsed
