"""In-process judgement of the namespace lab's checks (and the shared answer loading they use) on
observations of work a student could do: each wrong piece of work fails with a message that says
what is wrong and where to look. No lab is built: the judges get plain observations."""

from __future__ import annotations

import importlib.util

import pytest

from labkit.exercises import AnswerMissing, CheckContext, CheckFailed, answer_path
from labkit.labs import get_lab
from labkit.state import LabEnv, LabState


def context(lab_id: str, exercise_id: str, answer_text: str | None = None) -> CheckContext:
    lab = get_lab(lab_id)
    state = LabState(lab.id)
    state.ensure_dir()
    ctx = CheckContext(LabEnv(lab, state, token="test"), lab.exercise(exercise_id))
    if answer_text is not None:
        path = answer_path(lab.id, exercise_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(answer_text)
    return ctx


def checks(lab_id: str):
    lab = get_lab(lab_id)
    spec = importlib.util.spec_from_file_location(f"{lab_id}_checks_under_test", lab.directory / "checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the shared answer loading ------------------------------------------------------------------

@pytest.mark.parametrize("lab_id,exercise,text,key,line", [
    ("namespace", "terminating-create", "error: first guess\nerror: second guess\n", "error", 2),
    ("gc", "owner-chain", "pod: p\nreplicaset: a\ndeployment: b\nreplicaset: b\ndeployment: a\n", "replicaset", 4),
    ("numa", "cpu-hints", "hints: []\nhints: [1]\n", "hints", 2),
])
def test_an_answer_that_gives_a_key_twice_is_refused_not_read_as_the_last_one(lab_id, exercise, text, key, line):
    ctx = context(lab_id, exercise, text)
    with pytest.raises(CheckFailed) as failed:
        ctx.answer()
    assert f"your answer gives {key} twice (line {line}): YAML keeps only the last one" in str(failed.value)
    assert not isinstance(failed.value, AnswerMissing)


def test_a_key_used_once_in_each_of_two_mappings_is_not_a_duplicate():
    ctx = context("gc", "predict-dangling", "orphan: deleted\nshared_owners: [anchor]\nnested: {orphan: kept}\n")
    assert ctx.answer()["nested"] == {"orphan": "kept"}
