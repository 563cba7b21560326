"""Answer files and the keys their exercises read: every exercise with an answer file declares the
keys of its answer mapping in lab.yaml (`answer_keys`), and an answer with any other key — a
misspelled `reasn:` beside `reason:`, a stray `nodes:` — is malformed: not graded, not counted as a
try, and told which key is unknown and which keys the exercise reads."""

from __future__ import annotations

import os

import pytest

from labkit.errors import ConfigError
from labkit.exercises import AnswerMalformed, run_check
from labkit.labs import discover, load_lab
from support import REPO
from test_namespace_judging import context


def _answer_exercises():
    os.environ.setdefault("LABKIT_LABS_PATH", str(REPO / "tests" / "labs"))
    found = []
    for lab_id, directory in sorted(discover().items()):
        if directory.parent not in (REPO / "labs", REPO / "tests" / "labs"):
            continue
        lab = load_lab(directory)
        found += [(lab, exercise) for exercise in lab.exercises]
    return found


def test_every_exercise_with_an_answer_file_declares_the_keys_its_check_reads():
    exercises = _answer_exercises()
    assert {lab.id for lab, _ in exercises} >= {"gc", "namespace", "numa", "scheduler", "demo"}
    undeclared = [f"{lab.id}/{ex.id}" for lab, ex in exercises if ex.answer and not ex.answer_keys]
    assert not undeclared, f"answer exercises without answer_keys in lab.yaml: {undeclared}"
    stray = [f"{lab.id}/{ex.id}" for lab, ex in exercises if ex.answer_keys and not ex.answer]
    assert not stray


def test_the_keys_of_an_answer_named_by_a_param_are_substituted():
    lab = next(lab for lab, ex in _answer_exercises() if lab.id == "kube-proxy")
    exercise = lab.exercise("traffic-policy")
    assert exercise.answer_keys == (exercise.params["cluster_service"], exercise.params["local_service"])


@pytest.mark.parametrize("text,words", [
    ("reason: OutOfcpu\nreasn: OutOfcpu\nrequested: 1\nused: 0\ncapacity: 1\n",
     ["it has the key reasn, which this exercise does not read (it reads reason, requested, used and capacity"]),
    ("reason: OutOfcpu\nrequested: 1\nused: 0\ncapacity: 1\nnodes: [node-c]\nnode: node-c\n",
     ["the keys nodes, node, which this exercise does not read (", "remove or rename the others"]),
    ("reasn: OutOfcpu\nrequested: 1\nused: 0\ncapacity: 1\n",
     ["it has the key reasn, which this exercise does not read — is it misspelled? (it reads reason,"]),
])
def test_an_unknown_key_is_named_also_beside_every_key_the_exercise_reads(text, words):
    ctx = context("scheduler", "node-name", text)
    with pytest.raises(AnswerMalformed) as raised:
        ctx.answer()
    message = raised.value.message
    assert message.startswith(AnswerMalformed.PREFIX), message
    for word in words:
        assert word in message, message
    assert "OutOfcpu" not in message.split("\nIt must hold:")[0]


def test_an_answer_with_an_unknown_key_is_not_graded_and_not_a_try(monkeypatch):
    ctx = context("gc", "stuck-finalizer", "pod: reports-abcde\nfinalizer: example.com/upload\nfinaliser: x\n")
    tries = ctx.env.state.dir / "tries.json"
    tries.unlink(missing_ok=True)
    monkeypatch.setattr(ctx.lab, "check_function",
                        lambda exercise: lambda c: c.failed(f"graded {sorted(c.answer())}"))
    result = run_check(ctx.env, ctx.exercise)
    assert result.status == "fail" and result.details.get("malformed") is True, result
    assert "finaliser, which this exercise does not read" in result.message, result.message
    assert "graded" not in result.message
    assert ctx.env.state.wrong_answers_checked("stuck-finalizer") == 0
    ctx.answer_path.write_text("pod: reports-abcde\nfinalizer: example.com/upload\n")
    assert run_check(ctx.env, ctx.exercise).message == "graded ['finalizer', 'pod']"


def test_a_pod_manifest_answer_and_other_shapes_are_left_to_their_checks():
    ctx = context("numa", "single-numa", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n")
    assert ctx.answer()["kind"] == "Pod"
    ctx = context("gc", "background-delete", "- Deployment\n- Pod\n")
    assert ctx.answer() == ["Deployment", "Pod"]       # not a mapping: the check says what it wants


@pytest.mark.parametrize("entry,words", [
    ("answer_keys: [a]\n", "only an exercise with an answer file"),
    ("answer: a mapping\n    answer_keys: a\n", "expected a list of key names"),
    ("answer: a mapping\n    answer_keys: [a, a]\n", "listed twice"),
    ("answer: a mapping\n    answer_keys: [\"{{nope}}\"]\n", "params has no 'nope'"),
])
def test_lab_yaml_answer_keys_are_validated(tmp_path, entry, words):
    tmp_path = tmp_path / "keys"
    tmp_path.mkdir()
    (tmp_path / "lab.yaml").write_text(
        "id: keys\ntitle: Keys\nsummary: s\nexercises:\n  - id: one\n    title: One\n    points: 1\n"
        f"    prompt: p\n    check: check_one\n    {entry}")
    (tmp_path / "lab.py").write_text("def up(env):\n    pass\n")
    with pytest.raises(ConfigError) as raised:
        load_lab(tmp_path)
    assert words in str(raised.value), raised.value
