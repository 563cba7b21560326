"""One measured figure of a benchmark."""

from __future__ import annotations

from dataclasses import dataclass


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
