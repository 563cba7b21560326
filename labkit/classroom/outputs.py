"""The files of a class grading run, in the output directory. Every file is written atomically
(a temporary file renamed into place), so a re-run rewrites them whole and a reader never sees a
half-written one.

  gradebook.csv               one row per student: points per exercise (`lab/exercise` columns),
                              score, max_score, state (ok / unreachable / broken), problems and
                              recorded_not_counted (the recorded passes the machine reports that
                              earn nothing, see grade.py); an exercise without a report
                              (unreachable machine) is left empty
  class.json                  the raw class result: every machine's `labkit check` reports as received
  <student>/results.json      Gradescope results over all graded labs (labkit.grading), from the
                              reports as this grading counts them (ClassResult.counted_report)
  <student>/junit.xml         JUnit XML, one testsuite per lab (labkit.grading), likewise
  <student>/<lab>.json        the machine's `labkit check <lab> --format json` report as received
  report.html                 the class report (report.py)
  passes-seen.jsonl           the instructor's ledger of passes seen live (seen.py): extended by
                              every run, never emptied

A lab that could not be graded on a machine appears in its Gradescope and JUnit files as errors
worth 0 points whose message says why, so those files always list every exercise.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path

from labkit import __version__, grading
from labkit.classroom import remote, report
from labkit.classroom.grade import PASSED, UNREACHABLE, ClassResult, StudentResult
from labkit.labs import Lab


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _spreadsheet_safe(value: str) -> str:
    """Text from a machine must not turn into a formula in a spreadsheet."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def gradebook_csv(result: ClassResult) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    columns = [f"{lab.id}/{ex.id}" for lab in result.labs for ex in lab.exercises]
    writer.writerow(["student", "host", *columns, "score", "max_score", "state", "problems", "recorded_not_counted"])
    for s in result.students:
        points = ["" if cell.state == UNREACHABLE else str(cell.points) for _lab, _ex, cell in result.cells(s)]
        score, max_score = result.totals(s)
        writer.writerow([s.name, s.machine.host, *points, score, max_score, s.state,
                         _spreadsheet_safe("; ".join(s.problems)), " ".join(result.uncounted(s))])
    return buf.getvalue()


def lab_report(result: ClassResult, student: StudentResult, lab: Lab) -> dict:
    """The machine's report of the lab as counted here, or one that says why there is none (0 points, errors)."""
    counted = result.counted_report(student, lab)
    if counted is not None:
        return counted
    outcome = student.outcomes.get(lab.id)
    why = f"machine {outcome.outcome}: {outcome.reason}" if outcome else "not graded"
    results = []
    for ex in lab.exercises:
        cell = result.cell(student, lab, ex)
        seen = cell.seen if cell.state == PASSED else None      # the ledger's pass of a machine that did not answer
        results.append({"exercise": ex.id, "title": ex.title, "status": "error", "points": 0, "max_points": ex.points,
                        "message": why, "expected": None, "observed": None,
                        "details": {"machine": outcome.outcome if outcome else remote.UNREACHABLE}, "duration_s": 0.0,
                        "recorded": {"time": seen.time, "message": seen.message, "by": "class grade"} if seen else None})
    return {"labkit": __version__, "lab": lab.id, "title": lab.title, "host": student.machine.host,
            "time": result.time, "score": sum(grading.credited_points(r) for r in results),
            "max_score": sum(ex.points for ex in lab.exercises),
            "passed": sum(1 for r in results if grading.credited(r)), "total": len(results), "results": results}


def write_all(result: ClassResult, out: Path) -> dict[str, Path]:
    """Write every output file; returns the main ones by kind."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for s in result.students:
        reports = [lab_report(result, s, lab) for lab in result.labs]
        folder = out / s.name
        write_atomic(folder / "results.json", grading.gradescope_document(reports))
        write_atomic(folder / "junit.xml", grading.junit_document(reports, name=f"labkit {s.name}"))
        for lab in result.labs:
            raw = folder / f"{lab.id}.json"
            outcome = s.outcomes.get(lab.id)
            if outcome is not None and outcome.report is not None:
                write_atomic(raw, grading.to_json(outcome.report))
            elif raw.exists():
                raw.unlink()     # a report of an earlier run must not pass for this run's
    files = {
        "gradebook": out / "gradebook.csv",
        "raw": out / "class.json",
        "report": out / "report.html",
    }
    write_atomic(files["gradebook"], gradebook_csv(result))
    write_atomic(files["raw"], json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    write_atomic(files["report"], report.render(result))
    if result.ledger is not None:
        result.record_sightings()
        write_atomic(result.ledger.path, result.ledger.text())
        files["ledger"] = result.ledger.path
    return files
