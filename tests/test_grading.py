"""Report formats: JUnit XML parses with one testcase per exercise; Gradescope has its documented
keys; recorded passes count in the score; right answers are withheld unless revealed; the
terminal text fits 80 columns without cutting anything; values never print as dicts."""

import json
import xml.etree.ElementTree as ET

from rich.console import Console

from labkit import grading
from labkit.exercises import ANSWER, LIVE, CheckResult
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
    assert failure.text == "wrong chain\nexpected: KUBE-SVC-X\nobserved: chain: Y"
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


def test_gradescope_gives_a_recorded_pass_its_points():
    rep = sample()
    rep["results"][1]["recorded"] = {"time": "2025-01-02T10:00:00+0000", "message": "right chain"}
    doc = json.loads(grading.gradescope_document([rep]))
    assert [t["status"] for t in doc["tests"]] == ["passed", "passed", "failed"]
    assert [t["score"] for t in doc["tests"]] == [2, 3, 0]
    assert "passed before, at 2025-01-02T10:00:00+0000: the points stay" in doc["tests"][1]["output"]


def test_report_counts_recorded_passes_and_withholds_right_answers():
    exercises = (Exercise("a", "First", 2, "p", (), "ca", answer="x"), Exercise("b", "Second", 3, "p", (), "cb"))
    lab = Lab("sample", "Sample lab", "s", (), exercises, directory=None)
    a = CheckResult("a", "First", "fail", 0, 2, "the chain is wrong: look at KUBE-SERVICES",
                    expected="the chain KUBE-SERVICES jumps to", observed="KUBE-SVC-Y", observed_in=ANSWER,
                    right_answer="KUBE-SVC-SECRET", recorded={"time": "T", "message": "ok"})
    b = CheckResult("b", "Second", "pass", 3, 3, "fine")
    rep = grading.report(lab, [a, b])
    assert (rep["score"], rep["passed"], rep["passing"], rep["live_score"]) == (5, 2, 1, 3)
    assert "KUBE-SVC-SECRET" not in json.dumps(rep) and rep["answers_revealed"] is False
    for fmt in ("json", "junit", "gradescope"):
        assert "KUBE-SVC-SECRET" not in grading.render(rep, fmt)
    revealed = grading.report(lab, [a, b], reveal=True)
    assert revealed["results"][0]["right_answer"] == "KUBE-SVC-SECRET"
    assert "right answer: KUBE-SVC-SECRET" in grading.to_junit(revealed)
    assert "observed in your answer: KUBE-SVC-Y" in grading.to_junit(rep)


def test_numbers_show_their_tolerance():
    from labkit.exercises import approx
    assert approx(0.25, 0.05) == "0.25 ± 0.05" and approx(2, 0.5, "s") == "2 ± 0.5 s"


def test_values_are_shown_as_text_never_as_dicts():
    assert grading.show_value({"pod-a": 3, "pod-b": 1}) == "pod-a: 3, pod-b: 1"
    assert grading.show_value(["Deployment", "Pod"]) == "Deployment, Pod"
    assert grading.show_value({"node1": {"answers": True, "ips": ["a", "b"]}}) == "node1: {answers: true, ips: [a, b]}"
    assert grading.show_value(True) == "true" and grading.show_value(0.25) == "0.25"
    long = {f"endpoint-{i}": i for i in range(12)}
    assert grading.value_lines(long, 40) == [f"endpoint-{i}: {i}" for i in range(12)]
    assert grading.value_lines(long, None) == [grading.show_value(long)]


def test_terminal_text_fits_80_columns_and_cuts_nothing():
    path = "/home/a-student-with-a-long-name/labkit-answers/kube-proxy/clusterip-by-hand-with-a-long-name.yaml"
    exercises = (Exercise("clusterip-by-hand", "By hand", 4, "p", (), "c", answer="a mapping"),)
    lab = Lab("kube-proxy", "kube-proxy's iptables rules, live", "s", (), exercises, directory=None)
    message = f"no answer yet: write it to\n  {path}\nIt must hold: " + "a mapping with the chain names " * 4
    result = CheckResult("clusterip-by-hand", "By hand", "fail", 0, 4, message,
                         expected="the KUBE-SVC chain kube-proxy derives from the service port name",
                         observed={f"pod-{i}": i for i in range(20)}, observed_in=LIVE)
    console = Console(width=80, record=True, force_terminal=False, color_system=None)
    grading.render_text(grading.report(lab, [result]), console)
    text = console.export_text()
    lines = text.splitlines()
    assert lines[lines.index("    no answer yet: write it to") + 1] == "      " + path   # whole, on its own line
    assert all(len(line) <= 80 for line in lines if path not in line), text
    assert "\u2026" not in text and "..." not in text
    assert "    observed in the live lab:" in lines and "      pod-19: 19" in lines
    assert "{" not in text
