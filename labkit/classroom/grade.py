"""Grading every machine of a class, and the class result the outputs and the report are made from.

Machines are graded in parallel (at most `parallel` at a time); the labs of one machine one after
the other. A machine that cannot be reached for its first lab is not tried again for the others
(they get the same reason), so an unreachable machine costs one round of retries, not one per lab.

Each exercise of each student ends up in one of four states:
  passed          the check passed live on the machine in this run, or an earlier grading run into
                  the same output directory saw it pass live (the instructor's ledger, seen.py),
                  or the machine reports a recorded pass and the instructor chose to count those
                  (--accept-recorded)
  failed          the check failed (or could not decide) on the machine
  not attempted   the lab is not running on the machine (`labkit run LAB` was never done, or the
                  environment is down): the machine's report marks these `lab_running: false`
  unreachable     no report: the machine could not be reached, or was broken (see the reason);
                  an exercise the ledger saw pass is passed all the same

A recorded pass comes from a file on the student's machine (labkit's credit record), which the
student, root there, can write: by default it is shown beside the live result ("recorded on the
machine, not counted") and earns nothing. Each cell says on what its pass rests (`basis`).
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
from labkit.classroom.seen import Ledger, Sighting
from labkit.exercises import PASS
from labkit.grading import credited, credited_points
from labkit.labs import Lab

PASSED, FAILED, NOT_ATTEMPTED, UNREACHABLE = "passed", "failed", "not attempted", "unreachable"
CELL_STATES = (PASSED, FAILED, NOT_ATTEMPTED, UNREACHABLE)
# what a passed cell rests on: the live check, the instructor's ledger, an accepted recorded pass
LIVE, SEEN, RECORDED = "live", "seen by grading", "recorded on the machine"


@dataclass
class Cell:
    state: str
    points: int
    max_points: int
    message: str
    result: dict | None = None      # the exercise's CheckResult as the machine reported it
    basis: str | None = None        # for a passed cell: LIVE, SEEN or RECORDED
    seen: Sighting | None = None    # the instructor's earlier sighting of a live pass, if any

    @property
    def live(self) -> str | None:
        """The check's result now: pass, fail or error (None without a report)."""
        return (self.result or {}).get("status")

    @property
    def recorded(self) -> dict | None:
        """The pass the machine says it recorded (when, and what the check said then), if any."""
        return (self.result or {}).get("recorded")

    @property
    def uncounted_record(self) -> bool:
        """The machine reports a recorded pass that earns nothing here."""
        return bool(self.recorded) and self.state != PASSED

    @property
    def summary(self) -> str:
        """The live result and, where the live result does not show it, what the pass rests on."""
        if self.basis == SEEN:
            return (f"passed when graded at {self.seen.time} (the instructor's ledger: {self.seen.message}); "
                    f"now {self.live or 'no report'}: {self.message}")
        if self.basis == RECORDED:
            return (f"passed at {self.recorded.get('time', '?')} (recorded on the machine, counted by "
                    f"--accept-recorded: {self.recorded.get('message', '')}); now {self.live}: {self.message}")
        if self.uncounted_record:
            return (f"recorded on the machine as passed at {self.recorded.get('time', '?')}, not counted "
                    f"(no grading run saw it pass); now {self.live}: {self.message}")
        return self.message

    def notes(self) -> list[str]:
        """Lines for the feedback: what a pass that does not hold now rests on, or why it earns nothing."""
        if self.basis == SEEN:
            return [f"passed before, at {self.seen.time}, seen live by class grade: the points stay"]
        if self.basis == RECORDED:
            return [f"passed before, at {self.recorded.get('time', '?')}, as recorded on the machine "
                    "(counted: --accept-recorded)"]
        if self.uncounted_record:
            return [f"recorded on the machine as passed at {self.recorded.get('time', '?')}: not counted, "
                    "no grading run saw it pass"]
        return []


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
    ledger: Ledger | None = None     # passes seen live by earlier grading runs (counted)
    accept_recorded: bool = False    # count the passes the machines report as recorded

    def cell(self, student: StudentResult, lab: Lab, exercise) -> Cell:
        outcome = student.outcomes.get(lab.id)
        if outcome is None or outcome.report is None:
            reason = outcome.reason if outcome else "not graded"
            kind = outcome.outcome if outcome else remote.UNREACHABLE
            seen = self.ledger.get(student.name, lab.id, exercise.id) if self.ledger else None
            if seen is not None:        # no answer now, but an earlier grading run saw it pass
                return Cell(PASSED, exercise.points, exercise.points, f"{kind}: {reason}", None, SEEN, seen)
            return Cell(UNREACHABLE, 0, exercise.points, f"{kind}: {reason}")
        for r in outcome.report["results"]:
            if r["exercise"] == exercise.id:
                return self._judge(student, lab, r)
        return Cell(FAILED, 0, exercise.points, f"the machine's lab {lab.id} has no exercise {exercise.id}")

    def _judge(self, student: StudentResult, lab: Lab, r: dict) -> Cell:
        seen = self.ledger.get(student.name, lab.id, r["exercise"]) if self.ledger else None
        if r["status"] == PASS:
            return Cell(PASSED, r["points"], r["max_points"], r["message"], r, LIVE, seen)
        if seen is not None:
            return Cell(PASSED, r["max_points"], r["max_points"], r["message"], r, SEEN, seen)
        if r.get("recorded") and self.accept_recorded:
            return Cell(PASSED, r["max_points"], r["max_points"], r["message"], r, RECORDED)
        state = NOT_ATTEMPTED if r.get("details", {}).get("lab_running") is False else FAILED
        return Cell(state, 0, r["max_points"], r["message"], r)

    def counted_report(self, student: StudentResult, lab: Lab) -> dict | None:
        """The machine's report of the lab as this grading counts it (None without one): a result
        earns points through its `recorded` pass only when that pass counts here, so a recorded pass
        that does not count is moved to `recorded_on_machine`, and a pass only the ledger shows
        becomes the result's recorded pass. Score and passed are recomputed; the rest is as received."""
        outcome = student.outcomes.get(lab.id)
        if outcome is None or outcome.report is None:
            return None
        results = []
        for r in outcome.report["results"]:
            cell = self._judge(student, lab, r)
            r = dict(r)
            if cell.basis == SEEN:
                r["recorded"] = {"time": cell.seen.time, "message": cell.seen.message, "by": "class grade"}
            elif cell.uncounted_record:
                r["recorded_on_machine"], r["recorded"] = r["recorded"], None
            results.append(r)
        return {**outcome.report, "results": results,
                "score": sum(credited_points(r) for r in results),
                "passed": sum(1 for r in results if credited(r))}

    def uncounted(self, student: StudentResult) -> list[str]:
        """lab/exercise of every recorded pass the machine reports that earns nothing here."""
        return [f"{lab.id}/{ex.id}" for lab, ex, cell in self.cells(student) if cell.uncounted_record]

    def record_sightings(self) -> list[Sighting]:
        """Add this run's live passes to the ledger; returns the ones it did not hold yet."""
        if self.ledger is None:
            return []
        added = []
        for s in self.students:
            for lab, ex, cell in self.cells(s):
                if cell.basis == LIVE:
                    outcome = s.outcomes[lab.id]
                    sighting = Sighting(s.name, s.machine.host, s.machine.port, lab.id, ex.id, self.time,
                                        outcome.report["time"], cell.message)
                    if self.ledger.add(sighting):
                        added.append(sighting)
        return added

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
            "accept_recorded": self.accept_recorded,
            "labs": [{"id": lab.id, "title": lab.title,
                      "exercises": [{"id": e.id, "title": e.title, "points": e.points} for e in lab.exercises]}
                     for lab in self.labs],
            "students": [{**s.machine.to_dict(), "state": s.state, "recorded_not_counted": self.uncounted(s),
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
                progress: Callable[[StudentResult], None] | None = None, ledger: Ledger | None = None,
                accept_recorded: bool = False) -> ClassResult:
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
    return ClassResult(labs, [results[m.name] for m in machines], stamp, time.monotonic() - started,
                       ledger, accept_recorded)
