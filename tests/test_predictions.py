"""labkit.predictions, in-process: when a tool may show a prediction exercise's outcome, which answer
is kept and graded, what forgetting records. (The rule applied to every lab's prediction exercises
is tests/test_prediction_exercises.py.)"""

from __future__ import annotations

import json

import pytest

from labkit import predictions
from labkit.exercises import answer_path

LAB, EX = "demo-predict", "guess"


def _write(text: str) -> None:
    path = answer_path(LAB, EX)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_withheld_until_written_then_the_first_showing_keeps_the_answer():
    assert not predictions.reveal(LAB, EX, "labkit demo show")
    assert predictions.kept(LAB, EX) is None
    _write("   \n")                                   # blank is no answer
    assert not predictions.reveal(LAB, EX, "labkit demo show")
    _write("a: 1\n")
    assert predictions.reveal(LAB, EX, "labkit demo show", situation="the scenario")
    _write("a: 2\n")                                  # rewritten after seeing: the first one stays
    assert predictions.reveal(LAB, EX, "labkit demo other")
    found = predictions.kept(LAB, EX)
    assert (found.text, found.tool, found.situation) == ("a: 1\n", "labkit demo show", "the scenario")
    assert predictions.graded_text(LAB, EX)[0] == "a: 1\n"
    assert "labkit demo show" in predictions.graded_text(LAB, EX)[1]


def test_the_kept_answer_carries_when_its_file_was_written():
    # a lab that also sees experiments made by hand compares that time with the experiment's
    import os
    _write("a: 1\n")
    os.utime(answer_path(LAB, EX), (1000.5, 1000.5))
    assert predictions.reveal(LAB, EX, "labkit demo show")
    assert predictions.kept(LAB, EX).written == 1000.5
    # kept from the checked copy (the answer file gone): when it was written is not known
    predictions.forget(LAB, EX, "test")
    predictions.record(LAB, EX, "a: 2\n")
    answer_path(LAB, EX).unlink()
    assert predictions.keep(LAB, EX, "labkit demo show").written is None
    assert predictions.kept(LAB, EX).written is None


def test_an_incomplete_answer_is_not_recorded():
    _write("a: 1\n")
    assert not predictions.reveal(LAB, EX, "labkit demo show", complete=lambda text: "b:" in text)
    assert predictions.kept(LAB, EX) is None
    _write("a: 1\nb: 2\n")
    assert predictions.reveal(LAB, EX, "labkit demo show", complete=lambda text: "b:" in text)


def test_rule_checked_needs_the_check_and_keeps_the_checked_text_when_the_file_is_gone():
    _write("a: 1\n")
    assert not predictions.reveal(LAB, EX, "labkit demo show", rule=predictions.CHECKED_RULE)
    predictions.record(LAB, EX, "a: 1\n")
    answer_path(LAB, EX).unlink()
    assert predictions.reveal(LAB, EX, "labkit demo show", rule=predictions.CHECKED_RULE)
    assert predictions.kept(LAB, EX).text == "a: 1\n"


def test_refusal_names_the_exercise_and_the_answer_file_and_how_to_record():
    text = predictions.refusal(LAB, EX, "the outcome")
    assert text.startswith(f"the outcome withheld: exercise {EX} of lab {LAB}")
    assert str(answer_path(LAB, EX)) in text
    assert "labkit check" not in text
    assert f"labkit check {LAB} {EX}" in predictions.refusal(LAB, EX, rule=predictions.CHECKED_RULE)


def test_reveal_or_refuse_says_what_is_withheld_until_an_answer_is_written_then_keeps_it():
    said = predictions.reveal_or_refuse(LAB, EX, "labkit demo play", "case.yaml", "case.yaml is the situation")
    assert said == (f"case.yaml is the situation (`labkit show {LAB} {EX}`): write your prediction to "
                    f"{answer_path(LAB, EX)} first; from then on labkit shows it, and the check grades your "
                    "prediction as it was at that moment")
    assert predictions.kept(LAB, EX) is None
    _write("a: 1\n")
    assert predictions.reveal_or_refuse(LAB, EX, "labkit demo play", "case.yaml", "case.yaml is the situation") is None
    found = predictions.kept(LAB, EX)
    assert (found.text, found.tool, found.situation) == ("a: 1\n", "labkit demo play", "case.yaml")


def test_gate_withholds_the_exercise_s_own_situations_and_keeps_answered_ones():
    asked = []

    def keys(ex):
        asked.append(ex)
        return {"k1", "k2"} if ex == EX else {"other"}
    gate = predictions.Gate(LAB, [EX, "second"], "labkit demo run", keys)
    assert gate.about("k3") is None
    assert gate.about("k2") == EX
    assert gate.about(lambda ex: "other" if ex == "second" else "x") == "second"
    assert sorted(set(asked)) == ["guess", "second"]          # the keys are built once per exercise
    assert len(asked) == 2
    _write("a: 1\n")
    gate = predictions.Gate(LAB, [EX], "labkit demo run", keys)
    assert predictions.kept(LAB, EX) is None
    assert gate.about("k1", situation="pod a") is None      # answered: shown, and kept now
    assert predictions.kept(LAB, EX).situation == "pod a"


def test_forget_records_what_was_forgotten_for_the_grade_report():
    _write("a: 1\n")
    predictions.reveal(LAB, EX, "labkit demo show")
    assert predictions.grade_details(LAB, EX)["prediction_kept"]["by"] == "labkit demo show"
    forgotten = predictions.forget(LAB, EX, "labkit reset --forget-prediction")
    assert forgotten.text == "a: 1\n" and predictions.kept(LAB, EX) is None
    details = predictions.grade_details(LAB, EX)
    assert "prediction_kept" not in details
    assert [(e["why"], e["kept_by"]) for e in details["predictions_forgotten"]] == \
        [("labkit reset --forget-prediction", "labkit demo show")]
    log = json.loads((predictions.directory(LAB) / predictions.FORGOTTEN).read_text())
    assert log[0]["kept_text"] == "a: 1\n"
    assert predictions.forget(LAB, EX, "again") is None           # nothing kept: nothing recorded
    assert len(predictions.forgotten(LAB, EX)) == 1


def test_the_check_gets_the_kept_answer_and_a_broken_kept_one_fails():
    import pytest
    from types import SimpleNamespace

    from labkit.exercises import CheckFailed
    ctx = SimpleNamespace(lab=SimpleNamespace(id=LAB), exercise=SimpleNamespace(id=EX), answer=lambda: {"file": 1})
    assert predictions.graded_answer(ctx) == ({"file": 1}, "")         # nothing kept: the answer file
    _write("a: [1\n")
    predictions.reveal(LAB, EX, "labkit demo show")
    _write("a: 1\n")                                                     # fixed after seeing: does not count
    with pytest.raises(CheckFailed, match="not valid YAML when its outcome was shown"):
        predictions.graded_answer(ctx)
    predictions.forget(LAB, EX, "test")
    _write("a: 1\na: 2\n")
    predictions.reveal(LAB, EX, "labkit demo show")
    with pytest.raises(CheckFailed, match=r"gave a twice \(line 2\)"):
        predictions.graded_answer(ctx)
    predictions.forget(LAB, EX, "test")
    _write("a: 1\n")
    predictions.reveal(LAB, EX, "labkit demo show")
    _write("a: 2\n")
    data, note = predictions.graded_answer(ctx)
    assert data == {"a": 1} and "`labkit demo show` first showed you the outcome" in note


@pytest.mark.parametrize("text,problem", [
    ("qos: {a: Burstable}\n", None),
    ("qos: [a\n", "it is not valid YAML"),
    ("qos: {}\nqos: {}\n", "it gives qos twice (line 2)"),
    ("- a\n", "it is not a YAML mapping"),
    ("qos: {}\n---\nqos: {}\n", "it holds more than one YAML document (an answer is one document)")])
def test_a_tool_reads_an_answer_text_as_one_mapping_before_the_exercise_s_parts(text, problem):
    from labkit.predictions import mapping_problem

    data, found = mapping_problem(text)
    assert found == problem and (data is None) == (problem is not None)
