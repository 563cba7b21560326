"""Rendering check results: terminal text, JSON (labkit's own model), JUnit XML, Gradescope.

The JSON report is the source for everything else (class grading reads it back):
  {"labkit": version, "lab": id, "title": ..., "host": ..., "time": ISO-8601,
   "score": n, "max_score": n, "passed": n, "total": n, "passing": n, "live_score": n,
   "answers_revealed": bool, "results": [CheckResult.to_dict(), ...]}

`score` and `passed` count an exercise whose check passes now *or* that passed before (its
`recorded` pass: a rebuilt or broken lab loses no credit); `passing` and `live_score` count only
what passes now. Each result's `right_answer` is null unless the report reveals answers.

Values (expected, observed, right answer) are shown as text a person reads, never as Python or
JSON dicts: `show_value` (one line) and `value_lines` (a YAML block when one line is too long).
"""

from __future__ import annotations

import io
import json
import re
import socket
import textwrap
import time
import xml.etree.ElementTree as ET
from typing import Iterable

import yaml

from labkit import __version__
from labkit.exercises import PASS, CheckResult

FORMATS = ("table", "json", "yaml", "junit", "gradescope")


def credited(r: dict) -> bool:
    """The exercise counts as passed: its check passes now, or it passed before (recorded)."""
    return r["status"] == PASS or bool(r.get("recorded"))


def credited_points(r: dict) -> int:
    return r["points"] if r["status"] == PASS else (r["max_points"] if r.get("recorded") else 0)


def report(lab, results: list[CheckResult], reveal: bool = False) -> dict:
    rows = []
    for r in results:
        row = r.to_dict()
        if not reveal:
            row["right_answer"] = None
        rows.append(row)
    return {
        "labkit": __version__,
        "lab": lab.id,
        "title": lab.title,
        "host": socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "score": sum(credited_points(r) for r in rows),
        "max_score": sum(r["max_points"] for r in rows),
        "passed": sum(1 for r in rows if credited(r)),
        "total": len(rows),
        "passing": sum(1 for r in rows if r["status"] == PASS),
        "live_score": sum(r["points"] for r in rows),
        "answers_revealed": bool(reveal),
        "results": rows,
    }


def to_json(rep: dict) -> str:
    return json.dumps(rep, indent=2, default=str) + "\n"


# -- values and feedback as text ---------------------------------------------------------------

def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    return str(value)


def _flow(value) -> str:
    """A nested value in YAML flow style: {a: 1, b: [x, y]}."""
    if isinstance(value, (dict, list, tuple)):
        return yaml.safe_dump(_plain(value), default_flow_style=True, sort_keys=False, width=10**9,
                              allow_unicode=True).strip()
    return _scalar(value)


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def show_value(value) -> str:
    """One line: a tally as `a: 3, b: 1`, a list as `x, y`, nested parts in YAML flow style."""
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) or "(none)"
    if isinstance(value, (list, tuple)):
        return ", ".join(_flow(v) for v in value) or "(none)"
    return _scalar(value)


def value_lines(value, width: int | None = None) -> list[str]:
    """show_value when it fits `width`; otherwise one line per entry (a YAML block)."""
    line = show_value(value)
    if width is None or len(line) <= width or not isinstance(value, (dict, list, tuple)) or not value:
        return [line]
    return yaml.safe_dump(_plain(value), default_flow_style=False, sort_keys=False, width=10**9,
                          allow_unicode=True).rstrip("\n").splitlines()


def _wrap(text: str, width: int | None) -> list[str]:
    """Lines of `text`, wrapped at spaces to `width`; a word (a path, a name) is never split."""
    out = []
    for line in text.splitlines() or [""]:
        if width is None or len(line) <= width:
            out.append(line)
        else:
            indent = line[:len(line) - len(line.lstrip())]
            out += textwrap.wrap(line.strip(), width, initial_indent=indent, subsequent_indent=indent,
                                 break_long_words=False, break_on_hyphens=False) or [""]
    return out


def feedback_lines(r: dict, width: int | None = None, recorded: bool = True) -> list[str]:
    """The message, then expected / observed (saying where) / right answer, each value on the
    label's line when it fits, else on lines of its own below it; then (with `recorded`) the
    recorded pass of an exercise that fails now."""
    lines = _wrap(r["message"], width)
    observed = f"observed in {r['observed_in']}" if r.get("observed_in") else "observed"
    for label, value in (("expected", r.get("expected")), (observed, r.get("observed")),
                         ("right answer", r.get("right_answer"))):
        if value is None:
            continue
        values = value_lines(value, None if width is None else width - 2)
        if len(values) == 1 and (width is None or len(label) + 2 + len(values[0]) <= width):
            lines.append(f"{label}: {values[0]}")
        else:
            lines += [f"{label}:"] + [line for v in values for line in _wrap(f"  {v}", width)]
    if recorded and r.get("recorded") and r["status"] != PASS:
        lines.append(f"passed before, at {r['recorded'].get('time', '?')}: the points stay")
    return lines


def _failure_text(r: dict) -> str:
    return "\n".join(feedback_lines(r))


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
                "score": credited_points(r),
                "max_score": r["max_points"],
                "status": "passed" if credited(r) else "failed",
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


def render_text(rep: dict, console) -> None:
    """For a terminal: one block per exercise, fitted to the console's width. Nothing is cut: prose
    wraps at spaces, a word longer than the line (a path) stays whole on a line of its own."""
    from rich.text import Text

    width = max(40, console.width)
    marks = {"pass": ("\u2713", "green"), "fail": ("\u2717", "red"), "error": ("!", "yellow")}
    console.print(Text(f"{rep['title']} ({rep['lab']})", style="bold"), soft_wrap=True)
    for r in rep["results"]:
        mark, color = marks.get(r["status"], ("?", ""))
        head = Text()
        head.append(f"{mark} {r['status']:<5}", style=color)
        head.append(f" {r['exercise']}  {r['points']}/{r['max_points']}")
        if r.get("recorded") and r["status"] != PASS:
            head.append(f"  (passed at {r['recorded'].get('time', '?')}: {r['max_points']}/{r['max_points']} kept)",
                        style="green")
        console.print("")
        console.print(head, soft_wrap=True)
        for line in feedback_lines(r, width - 4, recorded=False):
            console.print(Text("    " + line), soft_wrap=True)
    console.print("")
    line = f"score {rep['score']}/{rep['max_score']}: {rep['passed']} of {rep['total']} exercises passed"
    before = rep["passed"] - rep.get("passing", rep["passed"])
    if before:
        line += f" ({before} of them passed before and fail now)"
    console.print(Text(line), soft_wrap=True)


def render(rep: dict, fmt: str) -> str:
    if fmt == "json":
        return to_json(rep)
    if fmt == "yaml":
        return yaml.safe_dump(json.loads(to_json(rep)), sort_keys=False, allow_unicode=True)
    if fmt == "junit":
        return to_junit(rep)
    if fmt == "gradescope":
        return to_gradescope(rep)
    raise ValueError(f"unknown format {fmt}")


def all_passed(results: Iterable[CheckResult]) -> bool:
    return all(r.status == PASS for r in results)
