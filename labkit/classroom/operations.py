"""Class operations besides grading, over the same SSH machinery (remote.py) and inventories:

  prepare LAB   `labkit run LAB` as root on every machine: the lab is up everywhere before the
                students start (idempotent: a machine whose lab is up keeps it)
  status        every machine's labkit version (a warning where it is not the instructor's: its
                checks may differ from the ones this side expects) and, per lab, whether it is
                running and how many of its exercises pass now (`labkit check LAB --format json`;
                a lab that is not running answers at once)

Machines are handled in parallel (at most `parallel` at a time); `progress` hears of each machine
as it is done, and the summary counts them.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Callable

from labkit import __version__
from labkit.classroom import remote
from labkit.classroom.inventory import Machine
from labkit.labs import Lab

VERSION_RE = re.compile(r"^labkit (\S+)\s*$")


def for_each(machines: list[Machine], work: Callable, parallel: int, progress: Callable | None = None) -> list:
    """work(machine) for every machine, at most `parallel` at a time; results in inventory order."""
    results = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {pool.submit(work, m): m for m in machines}
        for future in as_completed(futures):
            machine = futures[future]
            results[machine.name] = future.result()
            if progress:
                progress(machine, results[machine.name])
    return [results[m.name] for m in machines]


# -- prepare -----------------------------------------------------------------------------------

def prepare(machines: list[Machine], lab: Lab, settings: remote.Settings, parallel: int = 8,
            progress: Callable | None = None) -> list[remote.CommandOutcome]:
    return for_each(machines, lambda m: remote.run_labkit(m, ["run", lab.id], settings), parallel, progress)


# -- status ------------------------------------------------------------------------------------

@dataclass
class LabState:
    lab: str
    outcome: str                     # ok | unreachable | broken
    running: bool = False
    passing: int = 0                 # exercises whose check passes now
    total: int = 0
    reason: str | None = None

    def describe(self) -> str:
        if self.outcome != remote.OK:
            return f"{self.lab}: {self.outcome}: {self.reason}"
        if not self.running:
            return f"{self.lab}: not running"
        return f"{self.lab}: running, {self.passing} of {self.total} passing now"


@dataclass
class MachineStatus:
    machine: Machine
    outcome: str                     # of `labkit --version`: ok | unreachable | broken
    version: str | None = None
    reason: str | None = None
    labs: list[LabState] = field(default_factory=list)

    @property
    def skew(self) -> bool:
        return self.version is not None and self.version != __version__

    def describe(self) -> str:
        if self.outcome != remote.OK:
            return f"{self.machine.name}: {self.outcome}: {self.reason}"
        parts = [f"labkit {self.version}"
                 + (f" (WARNING: the instructor's labkit is {__version__})" if self.skew else "")]
        parts += [lab.describe() for lab in self.labs]
        return f"{self.machine.name}: " + "; ".join(parts)


def machine_status(machine: Machine, labs: list[Lab], settings: remote.Settings) -> MachineStatus:
    reply = remote.run_labkit(machine, ["--version"], settings)
    if reply.outcome != remote.OK:
        return MachineStatus(machine, reply.outcome, reason=reply.reason)
    found = VERSION_RE.match(reply.stdout.strip())
    if not found:
        return MachineStatus(machine, remote.BROKEN, reason=f"labkit --version printed {reply.stdout.strip()[:80]!r}")
    status = MachineStatus(machine, remote.OK, found.group(1))
    for lab in labs:
        outcome = remote.check_lab(machine, lab.id, settings)
        if outcome.report is None:
            status.labs.append(LabState(lab.id, outcome.outcome, reason=outcome.reason))
            continue
        results = outcome.report["results"]
        running = not all(r.get("details", {}).get("lab_running") is False for r in results)
        status.labs.append(LabState(lab.id, remote.OK, running, sum(1 for r in results if r["status"] == "pass"),
                                    len(results)))
    return status


def status(machines: list[Machine], labs: list[Lab], settings: remote.Settings, parallel: int = 8,
           progress: Callable | None = None) -> list[MachineStatus]:
    return for_each(machines, lambda m: machine_status(m, labs, settings), parallel, progress)
