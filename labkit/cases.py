"""Fidelity cases played on a reconstruction (`labkit scheduler play`, `labkit devices play`): each
expectation of a case becomes a Check, a played case passes when it has checks and all hold, and
the commands print them the same way."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Check:
    what: str
    want: Any
    got: Any
    holds: bool | None = None     # None: want == got

    @property
    def ok(self) -> bool:
        return self.want == self.got if self.holds is None else self.holds

    def to_dict(self) -> dict:
        return {"what": self.what, "want": self.want, "got": self.got, "ok": self.ok}


@dataclass
class Played:
    id: str
    title: str
    outcome: dict = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def check(self, what: str, want, got, holds: bool | None = None) -> None:
        self.checks.append(Check(what, want, got, holds))

    def to_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "passed": self.passed, "outcome": self.outcome,
                "checks": [c.to_dict() for c in self.checks]}


def report(results: list[Played], fmt: str) -> int:
    """Print the played cases (table: one line a case and one a failed check; json; yaml); the
    exit code: 0 only when every case passed."""
    if fmt == "json":
        sys.stdout.write(json.dumps([r.to_dict() for r in results], indent=2) + "\n")
    elif fmt == "yaml":
        import yaml
        sys.stdout.write(yaml.safe_dump([r.to_dict() for r in results], sort_keys=False))
    else:
        for r in results:
            sys.stdout.write(f"{'PASS' if r.passed else 'FAIL'} {r.id}: {r.title}\n")
            for c in r.checks:
                if not c.ok:
                    sys.stdout.write(f"    {c.what}: expected {c.want!r}, got {c.got!r}\n")
    return 0 if all(r.passed for r in results) else 1
