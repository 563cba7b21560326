"""Report formats: JUnit XML parses with one testcase per exercise; Gradescope has its documented keys."""

import json
import xml.etree.ElementTree as ET

from labkit import grading
from labkit.exercises import CheckResult
from labkit.labs import Exercise, Lab


def sample():
    exercises = (
        Exercise("a", "First", 2, "p", (), "ca"),
        Exercise("b", "Second <&>", 3, "p", (), "cb"),
        Exercise("c", "Third", 5, "p", (), "cc"),
    )
    lab = Lab("sample", "Sample lab", "s", (), exercises, directory=None)
    results = [
        CheckResult("a", "First", "pass", 2, 2, "fine"),
        CheckResult("b", "Second <&>", "fail", 0, 3, "wrong chain", expected="KUBE-SVC-X", observed={"chain": "Y"}),
        CheckResult("c", "Third", "error", 0, 5, "lab not running"),
    ]
    return grading.report(lab, results)


def test_json_report_totals():
    rep = json.loads(grading.to_json(sample()))
    assert (rep["score"], rep["max_score"], rep["passed"], rep["total"]) == (2, 10, 1, 3)
    assert [r["status"] for r in rep["results"]] == ["pass", "fail", "error"]


def test_junit_parses_with_one_testcase_per_exercise():
    root = ET.fromstring(grading.to_junit(sample()).encode())
    suite = root.find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "1"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["a", "b", "c"]
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    failure = cases[1].find("failure")
    assert failure.get("message") == "wrong chain"
    assert "expected: KUBE-SVC-X" in failure.text and '"chain": "Y"' in failure.text
    assert cases[2].find("error") is not None


def test_gradescope_results_have_documented_keys():
    doc = json.loads(grading.to_gradescope(sample()))
    assert doc["score"] == 2
    assert len(doc["tests"]) == 3
    for i, test in enumerate(doc["tests"], start=1):
        assert set(test) >= {"name", "number", "score", "max_score", "status", "output"}
        assert test["number"] == str(i)
        assert test["status"] in ("passed", "failed")
    assert [t["status"] for t in doc["tests"]] == ["passed", "failed", "failed"]
    assert [t["max_score"] for t in doc["tests"]] == [2, 3, 5]
    assert "expected: KUBE-SVC-X" in doc["tests"][1]["output"]
