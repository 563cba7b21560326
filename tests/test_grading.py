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


def test_junit_carries_control_characters_from_check_output():
    rep = sample()
    rep["results"][1]["message"] = "curl said \x1b[31mno\x1b[0m\x00 and \ud800"
    root = ET.fromstring(grading.to_junit(rep).encode())
    failure = root.find("testsuite").findall("testcase")[1].find("failure")
    assert failure.get("message") == "curl said \ufffd[31mno\ufffd[0m\ufffd and \ufffd"


def test_documents_over_several_labs():
    first, second = sample(), sample()
    second["lab"] = "other"
    doc = json.loads(grading.gradescope_document([first, second]))
    assert (doc["score"], doc["max_score"]) == (4, 20)
    assert [t["number"] for t in doc["tests"]] == [str(i) for i in range(1, 7)]
    assert doc["tests"][3]["name"] == "other: First"
    root = ET.fromstring(grading.junit_document([first, second], name="labkit alice").encode())
    assert root.get("name") == "labkit alice"
    assert [s.get("name") for s in root.findall("testsuite")] == ["sample", "other"]
    # one lab's document is exactly what `labkit check --format gradescope|junit` writes
    assert grading.gradescope_document([first]) == grading.to_gradescope(first)
