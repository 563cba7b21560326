"""Rendering check results: terminal table, JSON (labkit's own model), JUnit XML, Gradescope.

The JSON report is the source for everything else (class grading reads it back):
  {"labkit": version, "lab": id, "title": ..., "host": ..., "time": ISO-8601,
   "score": n, "max_score": n, "passed": n, "total": n,
   "results": [CheckResult.to_dict(), ...]}
"""

from __future__ import annotations

import io
import json
import re
import socket
import time
import xml.etree.ElementTree as ET
from typing import Iterable

from labkit import __version__
from labkit.exercises import PASS, CheckResult

FORMATS = ("table", "json", "junit", "gradescope")


def report(lab, results: list[CheckResult]) -> dict:
    return {
        "labkit": __version__,
        "lab": lab.id,
        "title": lab.title,
        "host": socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "score": sum(r.points for r in results),
        "max_score": sum(r.max_points for r in results),
        "passed": sum(1 for r in results if r.status == PASS),
        "total": len(results),
        "results": [r.to_dict() for r in results],
    }


def to_json(rep: dict) -> str:
    return json.dumps(rep, indent=2, default=str) + "\n"


def _failure_text(r: dict) -> str:
    lines = [r["message"]]
    if r.get("expected") is not None:
        lines.append(f"expected: {_compact(r['expected'])}")
    if r.get("observed") is not None:
        lines.append(f"observed: {_compact(r['observed'])}")
    return "\n".join(lines)


def _compact(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def to_junit(rep: dict) -> str:
    return junit_document([rep], name=f"labkit {rep['lab']}")


def junit_document(reps: list[dict], name: str) -> str:
    """JUnit XML with one testsuite per lab report (class grading writes several per student)."""
    suites = ET.Element("testsuites", name=name)
    for rep in reps:
        _junit_suite(suites, rep)
    ET.indent(suites)
    buf = io.BytesIO()
    ET.ElementTree(suites).write(buf, encoding="utf-8", xml_declaration=True)
    return buf.getvalue().decode() + "\n"


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text) -> str:
    """Text XML 1.0 can carry: control characters (e.g. from a program's output) become U+FFFD."""
    return _NOT_XML.sub("\ufffd", str(text))


def _junit_suite(suites: ET.Element, rep: dict) -> None:
    results = rep["results"]
    suite = ET.SubElement(
        suites, "testsuite", name=_xml(rep["lab"]), tests=str(len(results)),
        failures=str(sum(1 for r in results if r["status"] == "fail")),
        errors=str(sum(1 for r in results if r["status"] == "error")),
        skipped="0", time=f"{sum(r['duration_s'] for r in results):.3f}",
        timestamp=_xml(rep["time"]), hostname=_xml(rep["host"]),
    )
    props = ET.SubElement(suite, "properties")
    for key in ("score", "max_score"):
        ET.SubElement(props, "property", name=key, value=str(rep[key]))
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=_xml(f"labkit.{rep['lab']}"), name=_xml(r["exercise"]),
                             time=f"{r['duration_s']:.3f}")
        if r["status"] == "fail":
            node = ET.SubElement(case, "failure", message=_xml(r["message"]), type="CheckFailed")
            node.text = _xml(_failure_text(r))
        elif r["status"] == "error":
            node = ET.SubElement(case, "error", message=_xml(r["message"]), type="CheckError")
            node.text = _xml(_failure_text(r))
        out = ET.SubElement(case, "system-out")
        out.text = _xml(f"{r['title']}: {r['points']}/{r['max_points']} points. {r['message']}")


def to_gradescope(rep: dict) -> str:
    return gradescope_document([rep])


def gradescope_document(reps: list[dict]) -> str:
    """Gradescope autograder results.json: tests[] plus the top-level score, over one or more labs."""
    tests = []
    for rep in reps:
        for r in rep["results"]:
            output = _failure_text(r) if r["status"] != PASS else r["message"]
            tests.append({
                "name": f"{rep['lab']}: {r['title']}",
                "number": str(len(tests) + 1),
                "score": r["points"],
                "max_score": r["max_points"],
                "status": "passed" if r["status"] == PASS else "failed",
                "output": output,
                "visibility": "visible",
            })
    doc = {
        "score": sum(rep["score"] for rep in reps),
        "max_score": sum(rep["max_score"] for rep in reps),
        "output": "; ".join(f"labkit {rep['lab']}: {rep['passed']} of {rep['total']} exercises passed"
                            for rep in reps),
        "visibility": "visible",
        "tests": tests,
    }
    return json.dumps(doc, indent=2) + "\n"


def render_table(rep: dict, console) -> None:
    from rich.table import Table

    table = Table(title=f"{rep['title']} ({rep['lab']})", show_lines=True)
    table.add_column("exercise", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("feedback")
    style = {"pass": "[green]pass[/]", "fail": "[red]fail[/]", "error": "[yellow]error[/]"}
    from rich.markup import escape
    for r in rep["results"]:
        table.add_row(escape(r["exercise"]), style.get(r["status"], r["status"]),
                      f"{r['points']}/{r['max_points']}", escape(_failure_text(r)))
    console.print(table)
    console.print(f"score {rep['score']}/{rep['max_score']}: {rep['passed']} of {rep['total']} exercises passed")


def render(rep: dict, fmt: str) -> str:
    if fmt == "json":
        return to_json(rep)
    if fmt == "junit":
        return to_junit(rep)
    if fmt == "gradescope":
        return to_gradescope(rep)
    raise ValueError(f"unknown format {fmt}")


def all_passed(results: Iterable[CheckResult]) -> bool:
    return all(r.status == PASS for r in results)
