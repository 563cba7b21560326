"""The instructor's ledger of passes seen live: OUT/passes-seen.jsonl.

Every `labkit class grade` run into an output directory appends, for each exercise whose check
passed live on a machine during that run and is not in the ledger yet, one JSON line:

    {"machine": "alice", "host": "10.0.0.11", "port": 22, "lab": "demo", "exercise": "find-address",
     "time": "<when the grading run started>", "report_time": "<the machine's report time>",
     "message": "<what the check said>"}

The ledger lives on the instructor's side (the output directory), never on a student machine, so a
later grading run can count a pass that no longer holds on the machine (a rebuilt lab, a restarted
container) because the instructor's own earlier run saw it: that is the evidence, not the
`recorded` pass the machine reports from a file its root user can write. Only the first sighting
of each (machine, lab, exercise) is kept. Lines are never rewritten in place: the file is
extended and replaced atomically, so a reader never sees half of it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from labkit.errors import ConfigError

FILE_NAME = "passes-seen.jsonl"


@dataclass(frozen=True)
class Sighting:
    machine: str
    host: str
    port: int
    lab: str
    exercise: str
    time: str            # when the grading run that saw the pass started (the instructor's clock)
    report_time: str     # when the machine says it ran the check
    message: str

    @property
    def key(self) -> tuple[str, str, str]:
        return self.machine, self.lab, self.exercise


class Ledger:
    def __init__(self, path: Path, sightings: list[Sighting] | None = None):
        self.path = Path(path)
        self.sightings: dict[tuple[str, str, str], Sighting] = {}
        self.added: list[Sighting] = []
        for s in sightings or []:
            self.sightings.setdefault(s.key, s)

    @classmethod
    def load(cls, out: Path) -> "Ledger":
        """The ledger of the output directory (empty when there is none yet)."""
        path = Path(out) / FILE_NAME
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(path, None, f"cannot read it: {exc}")
        sightings = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                sightings.append(Sighting(
                    machine=_str(raw, "machine"), host=_str(raw, "host"), port=int(raw["port"]),
                    lab=_str(raw, "lab"), exercise=_str(raw, "exercise"), time=_str(raw, "time"),
                    report_time=_str(raw, "report_time"), message=_str(raw, "message")))
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(path, f"line {number}", f"not a ledger entry ({exc})")
        return cls(path, sightings)

    def get(self, machine: str, lab: str, exercise: str) -> Sighting | None:
        return self.sightings.get((machine, lab, exercise))

    def add(self, sighting: Sighting) -> bool:
        """Keep the sighting unless that exercise of that machine was seen before; True if kept."""
        if sighting.key in self.sightings:
            return False
        self.sightings[sighting.key] = sighting
        self.added.append(sighting)
        return True

    def text(self) -> str:
        return "".join(json.dumps(asdict(s), sort_keys=True) + "\n" for s in self.sightings.values())


def _str(raw: dict, key: str) -> str:
    value = raw[key]
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a string")
    return value
