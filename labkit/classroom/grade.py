"""Grading every machine of a class, and the class result the outputs and the report are made from.

Machines are graded in parallel (at most `parallel` at a time); the labs of one machine one after
the other. A machine that cannot be reached for its first lab is not tried again for the others
(they get the same reason), so an unreachable machine costs one round of retries, not one per lab.

Each exercise of each student ends up in one of four states:
  passed          the check passed on the machine, now or before (a recorded pass: the machine's
                  report carries it, with when it passed and what the check said; the cell keeps
                  both that and the live result)
  failed          the check failed (or could not decide) on the machine
  not attempted   the lab is not running on the machine (`labkit run LAB` was never done, or the
                  environment is down): the machine's report marks these `lab_running: false`
  unreachable     no report: the machine could not be reached, or was broken (see the reason)
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Callable

from labkit import __version__
from labkit.classroom import remote
from labkit.classroom.inventory import Machine
from labkit.grading import credited, credited_points
from labkit.labs import Lab

PASSED, FAILED, NOT_ATTEMPTED, UNREACHABLE = "passed", "failed", "not attempted", "unreachable"
CELL_STATES = (PASSED, FAILED, NOT_ATTEMPTED, UNREACHABLE)


@dataclass
class Cell:
    state: str
    points: int
    max_points: int
    message: str
    result: dict | None = None      # the exercise's CheckResult as the machine reported it

    @property
    def live(self) -> str | None:
        """The check's result now: pass, fail or error (None without a report)."""
        return (self.result or {}).get("status")

    @property
    def recorded(self) -> dict | None:
        """The exercise's recorded pass (when, and what the check said then), if any."""
        return (self.result or {}).get("recorded")

    @property
    def summary(self) -> str:
        """The live result and, where there is one that the live result does not show, the recorded pass."""
        if self.recorded and self.live != "pass":
            return (f"passed at {self.recorded.get('time', '?')} (recorded: {self.recorded.get('message', '')}); "
                    f"now {self.live}: {self.message}")
        return self.message


@dataclass
class StudentResult:
    machine: Machine
    outcomes: dict[str, remote.LabOutcome] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.machine.name

    @property
    def state(self) -> str:
        """ok, or the worst outcome of any lab (unreachable before broken)."""
        kinds = {o.outcome for o in self.outcomes.values()}
        for kind in (remote.UNREACHABLE, remote.BROKEN):
            if kind in kinds:
                return kind
        return remote.OK

    @property
    def problems(self) -> list[str]:
        return [f"{lab}: {o.outcome}: {o.reason}" for lab, o in self.outcomes.items() if o.outcome != remote.OK]


@dataclass
class ClassResult:
    labs: list[Lab]
    students: list[StudentResult]
    time: str
    seconds: float = 0.0

    def cell(self, student: StudentResult, lab: Lab, exercise) -> Cell:
        outcome = student.outcomes.get(lab.id)
        if outcome is None or outcome.report is None:
            reason = outcome.reason if outcome else "not graded"
            kind = outcome.outcome if outcome else remote.UNREACHABLE
            return Cell(UNREACHABLE, 0, exercise.points, f"{kind}: {reason}")
        for r in outcome.report["results"]:
            if r["exercise"] == exercise.id:
                if credited(r):
                    state = PASSED
                elif r.get("details", {}).get("lab_running") is False:
                    state = NOT_ATTEMPTED
                else:
                    state = FAILED
                return Cell(state, credited_points(r), r["max_points"], r["message"], r)
        return Cell(FAILED, 0, exercise.points, f"the machine's lab {lab.id} has no exercise {exercise.id}")

    def cells(self, student: StudentResult):
        for lab in self.labs:
            for ex in lab.exercises:
                yield lab, ex, self.cell(student, lab, ex)

    def totals(self, student: StudentResult) -> tuple[int, int]:
        score = max_score = 0
        for _lab, ex, cell in self.cells(student):
            score += cell.points if cell.state != UNREACHABLE else 0
            max_score += ex.points
        return score, max_score

    def pass_rates(self) -> list[dict]:
        """Per exercise: students passed, students with a report (the denominator), and the rate."""
        rows = []
        for lab in self.labs:
            for ex in lab.exercises:
                states = [self.cell(s, lab, ex).state for s in self.students]
                graded = sum(1 for st in states if st != UNREACHABLE)
                passed = states.count(PASSED)
                rows.append({"lab": lab.id, "exercise": ex.id, "title": ex.title, "passed": passed,
                             "failed": states.count(FAILED), "not_attempted": states.count(NOT_ATTEMPTED),
                             "unreachable": states.count(UNREACHABLE), "graded": graded,
                             "rate": passed / graded if graded else None})
        return rows

    def common_failures(self, limit: int = 10) -> list[dict]:
        """The most frequent failure messages (failed exercises only), with who got each."""
        counts: Counter = Counter()
        who: dict[tuple, list[str]] = {}
        for s in self.students:
            for lab, ex, cell in self.cells(s):
                if cell.state == FAILED:
                    key = (lab.id, ex.id, cell.message)
                    counts[key] += 1
                    who.setdefault(key, []).append(s.name)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return [{"lab": lab, "exercise": ex, "message": msg, "count": n, "students": who[(lab, ex, msg)]}
                for (lab, ex, msg), n in ranked]

    def to_dict(self) -> dict:
        """The raw class result (class.json): every machine's reports exactly as received."""
        return {
            "labkit": __version__,
            "time": self.time,
            "seconds": round(self.seconds, 3),
            "labs": [{"id": lab.id, "title": lab.title,
                      "exercises": [{"id": e.id, "title": e.title, "points": e.points} for e in lab.exercises]}
                     for lab in self.labs],
            "students": [{**s.machine.to_dict(), "state": s.state,
                          "labs": {lab: o.to_dict() for lab, o in s.outcomes.items()}}
                         for s in self.students],
        }


def grade_machine(machine: Machine, labs: list[Lab], settings: remote.Settings) -> StudentResult:
    student = StudentResult(machine)
    for lab in labs:
        first = not student.outcomes
        outcome = remote.check_lab(machine, lab.id, settings)
        student.outcomes[lab.id] = outcome
        if first and outcome.outcome == remote.UNREACHABLE:
            for other in labs[1:]:
                student.outcomes[other.id] = remote.LabOutcome(other.id, remote.UNREACHABLE, outcome.reason)
            break
    return student


def grade_class(machines: list[Machine], labs: list[Lab], settings: remote.Settings, parallel: int = 8,
                progress: Callable[[StudentResult], None] | None = None) -> ClassResult:
    started = time.monotonic()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results: dict[str, StudentResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {pool.submit(grade_machine, m, labs, settings): m for m in machines}
        for future in as_completed(futures):
            student = future.result()
            results[student.name] = student
            if progress:
                progress(student)
    return ClassResult(labs, [results[m.name] for m in machines], stamp, time.monotonic() - started)
