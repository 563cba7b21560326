"""Every lab's common wrong solutions (labs/<lab>/mistakes/<exercise>.py).

Each one, applied to its exercise freshly reset (`labkit reset LAB EXERCISE`), must make the check
fail with a message that names the mistake, and the feedback a student sees (message, expected,
observed, details) must not give the right answer away. Each exercise with an answer file is also
solved with its reference solution afterwards: its check passes, and its answer file says what
"the answer" is for the feedback test.

The labs run at the same time, each in its own labkit instance and process (`python
test_mistakes.py LAB` drives one lab: reset, mistake, check, in-process, and prints the outcomes
as JSON), so the whole run takes about as long as the slowest lab.

Applying a mistake live costs a reset, the mistake and a check (0.4 CPU-seconds on average, up
to seconds of waiting for a controller), and the labs have some 450: by default each exercise's
mistakes are a fixed sample, all of them when it has up to SAMPLE, otherwise its first, middle
and last (applied_mistakes); LABKIT_MISTAKES_LIVE=1 applies every one.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import TEST_LABS, drive_labs  # noqa: E402
from labkit.labs import discover, load_lab  # noqa: E402
from support import REPO  # noqa: E402

# MISTAKES_AWAITED: the only exercises of the built-in labs allowed fewer than two common mistakes,
# each with the reason. Every other exercise of every lab under labs/ and tests/labs/ must have
# two or more; an entry here whose exercise has its mistakes now fails the test too (remove it).
MISTAKES_AWAITED: dict[tuple[str, str], str] = {}
SAMPLE = 3
LIVE_ENV = "LABKIT_MISTAKES_LIVE"       # 1: apply every common mistake, not a sample of each exercise's
PYTHON_DICT = re.compile(r"""\{\s*(['"])[^'"]*\1\s*:""")


@functools.cache
def _labs() -> dict:
    os.environ.setdefault("LABKIT_LABS_PATH", str(TEST_LABS))
    return {lab_id: load_lab(directory) for lab_id, directory in discover().items()}


def applied_mistakes(mistakes: list) -> list:
    """The mistakes of one exercise that are applied: every one with LABKIT_MISTAKES_LIVE=1 or
    when there are up to SAMPLE; otherwise SAMPLE of them spread evenly over the file's order
    (the first, the middle and the last). The same ones on every run of the same tree."""
    if len(mistakes) <= SAMPLE or os.environ.get(LIVE_ENV, "").strip() in ("1", "true", "yes"):
        return list(mistakes)
    last = len(mistakes) - 1
    return [mistakes[round(i * last / (SAMPLE - 1))] for i in range(SAMPLE)]


def _cases(answer_only: bool = False):
    cases = []
    for lab_id, lab in _labs().items():
        for exercise in lab.exercises:
            if answer_only:
                if exercise.answer and lab.mistakes(exercise):
                    cases.append(pytest.param(lab_id, exercise.id, id=f"{lab_id}/{exercise.id}"))
                continue
            cases += [pytest.param(lab_id, exercise.id, m.name, id=f"{lab_id}/{exercise.id}/{m.name}")
                      for m in applied_mistakes(lab.mistakes(exercise))]
    return cases


# -- the driver: one lab, in its own process ------------------------------------------------------

def _read_answer(path: Path):
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def drive(lab_id: str) -> list[dict]:
    """Apply the mistakes of the lab's running instance (applied_mistakes of each exercise's) and
    each answer exercise's reference solution; one record per attempt."""
    from labkit import grading, runner
    from labkit.exercises import answer_path

    lab = _labs()[lab_id]
    records = []

    def attempt(exercise, apply, **record):
        path = answer_path(lab.id, exercise.id)
        path.unlink(missing_ok=True)
        try:      # a fresh start: also a prediction kept by an earlier attempt's tool is forgotten
            runner.reset(lab, exercise_id=exercise.id, forget_prediction=exercise.is_prediction)
            apply()
        except Exception as exc:    # reported by the test, with the mistake's name
            records.append({**record, "exercise": exercise.id, "error": f"{type(exc).__name__}: {exc}"})
            return
        [result] = grading.report(lab, runner.check(lab, exercise.id), reveal=True)["results"]
        records.append({**record, "exercise": exercise.id, "answer": _read_answer(path), "result": result})

    for exercise in lab.exercises:
        mistakes = applied_mistakes(lab.mistakes(exercise))
        for m in mistakes:
            attempt(exercise, lambda: runner.apply_mistake(lab, exercise.id, m.name), mistake=m.name)
        if exercise.answer and mistakes:
            attempt(exercise, lambda: runner.solve(lab, exercise.id), mistake=None)
        if mistakes:        # the exercise resets from what the last attempt left, too
            try:
                runner.reset(lab, exercise_id=exercise.id)
            except Exception as exc:
                records.append({"exercise": exercise.id, "mistake": "(reset)", "error": f"{type(exc).__name__}: {exc}"})
    return records


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory):
    """(lab, exercise, mistake or None for the reference solution) -> record, for every lab
    the selected tests need; the labs are driven at the same time."""
    found = drive_labs(request, tmp_path_factory, __file__, "mistakes", timeout=900)
    return {(lab_id, r["exercise"], r["mistake"]): r for lab_id, records in found.items() for r in records}


# -- what counts as giving the answer away ---------------------------------------------------------

def _leaves(value):
    """Every key and scalar of a (nested) value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif value is not None:
        yield value


def _pairs(value):
    """Every (key, scalar) of a (nested) mapping: a prediction's `shared: kept`."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list, tuple)):
                yield from _pairs(item)
            elif item is not None:
                yield str(key), item
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _pairs(item)


def _trivial(leaf) -> bool:
    return isinstance(leaf, bool) or (isinstance(leaf, (int, float)) and float(leaf).is_integer() and abs(leaf) < 10) \
        or len(str(leaf).strip()) < 4


def _text(value) -> str:
    return str(value).lower() if not isinstance(value, bool) else ("true" if value else "false")


def secrets(exercise, reference_answer, right_answer, student_answer: str | None) -> list[re.Pattern]:
    """What of the right answer a student could copy from feedback, as patterns: each key and
    value of the reference solution's answer file and of the check's own right_answer, except
    trivial ones (true/false, numbers 0-9, fewer than 4 characters), those the exercise's own text
    shows (title, prompt, answer description, hints) and those the student wrote; and each
    `key: value` pair of them (`shared: kept`, also as JSON) unless the student wrote that pair."""
    public = " ".join([exercise.title, exercise.prompt, exercise.answer or "", *exercise.hints]).lower()
    try:
        written = yaml.safe_load(student_answer) if student_answer else None
    except yaml.YAMLError:
        written = None
    written_text = (student_answer or "").lower()
    written_pairs = {(k.lower(), _text(v)) for k, v in _pairs(written)}
    found = set()
    for truth in (reference_answer, right_answer):
        for leaf in _leaves(truth):
            text = _text(leaf).strip()
            if not _trivial(leaf) and text not in public and text not in written_text:
                found.add(re.escape(text))
        for key, value in _pairs(truth):
            if (key.lower(), _text(value)) not in written_pairs:
                found.add(rf"""['"]?{re.escape(key.lower())}['"]?\s*:\s*['"]?{re.escape(_text(value))}\b""")
    return [re.compile(pattern) for pattern in sorted(found)]


def shown(result: dict) -> str:
    """Everything of a result a student sees (reports carry right_answer only when revealed)."""
    from labkit.grading import show_value
    parts = [result["message"], json.dumps(result.get("details") or {})]
    parts += [show_value(result[k]) for k in ("expected", "observed") if result.get(k) is not None]
    return "\n".join(parts)


# -- the tests ------------------------------------------------------------------------------------

def test_every_exercise_has_two_common_mistakes():
    lacking = {}
    for lab_id, lab in _labs().items():
        if lab.directory.parent not in (REPO / "labs", TEST_LABS):
            continue
        for exercise in lab.exercises:
            count = len(lab.mistakes(exercise))
            if count < 2:
                lacking[(lab_id, exercise.id)] = count
    missing = "\n".join(f"  {lab}/{ex}: {n} mistake(s)" for (lab, ex), n in sorted(lacking.items())
                        if (lab, ex) not in MISTAKES_AWAITED)
    assert not missing, f"exercises with fewer than 2 common mistakes (labs/<lab>/mistakes/<exercise>.py):\n{missing}"
    arrived = [f"{lab}/{ex}" for lab, ex in sorted(MISTAKES_AWAITED) if (lab, ex) not in lacking]
    assert not arrived, f"MISTAKES_AWAITED names exercises that have their mistakes now (remove them): {arrived}"


def test_the_demo_lab_declares_its_mistakes():
    lab = load_lab(TEST_LABS / "demo")
    found = {m.name: m for m in lab.mistakes(lab.exercise("find-address"))}
    assert list(found) == ["with_prefix_length", "host_a_address"]
    assert found["with_prefix_length"].names == ("without /prefix",)
    assert found["with_prefix_length"].description == "Copies the address as `ip addr` prints it, prefix length included."


def test_the_sample_takes_the_first_middle_and_last_mistakes_and_every_one_when_asked(monkeypatch):
    monkeypatch.delenv(LIVE_ENV, raising=False)
    assert applied_mistakes(list("abc")) == list("abc")
    assert applied_mistakes(list("abcdefg")) == ["a", "d", "g"]
    assert applied_mistakes(list("abcdef")) == ["a", "c", "f"]     # round() halves to even: index 2
    monkeypatch.setenv(LIVE_ENV, "1")
    assert applied_mistakes(list("abcdefg")) == list("abcdefg")


@pytest.mark.parametrize("lab_id,exercise,name", _cases())
def test_a_common_mistake_fails_its_check_and_is_named(outcomes, lab_id, exercise, name):
    record = outcomes[(lab_id, exercise, name)]
    mistake = _labs()[lab_id].mistake(_labs()[lab_id].exercise(exercise), name)
    assert "error" not in record, f"{lab_id}/{exercise}: applying {name!r} ({mistake.description}) failed: " \
                                  f"{record['error']}"
    result = record["result"]
    assert result["status"] == "fail", f"{lab_id}/{exercise}: the wrong solution {name!r} ({mistake.description}) " \
                                       f"got {result['status']}: {result['message']}"
    missing = [w for w in mistake.names if w.lower() not in result["message"].lower()]
    assert not missing, f"{lab_id}/{exercise}/{name}: the failure does not name the mistake " \
                        f"(missing {missing}): {result['message']}"
    texts = [result["message"]] + [v for v in (result.get("expected"), result.get("observed")) if isinstance(v, str)]
    assert not any(PYTHON_DICT.search(t) for t in texts), f"{lab_id}/{exercise}/{name}: a Python dict in: {texts}"
    assert result.get("observed") is None or result.get("observed_in"), "observed without saying where"


@pytest.mark.parametrize("lab_id,exercise,name", _cases())
def test_feedback_on_a_mistake_gives_no_answer_away(outcomes, lab_id, exercise, name):
    lab = _labs()[lab_id]
    ex = lab.exercise(exercise)
    record = outcomes[(lab_id, exercise, name)]
    reference = outcomes.get((lab_id, exercise, None))
    assert "error" not in record, record["error"]
    answer = yaml.safe_load(reference["answer"]) if reference and reference.get("answer") else None
    text = shown(record["result"]).lower()
    leaked = [p.pattern for p in secrets(ex, answer, record["result"].get("right_answer"), record["answer"])
              if p.search(text)]
    assert not leaked, f"{lab_id}/{exercise}/{name}: the feedback gives away {leaked}:\n{shown(record['result'])}"


def test_the_feedback_test_sees_an_answer_given_away():
    from labkit.labs import Exercise
    ex = Exercise("predict", "Predict", 1, "Predict `shared`: deleted or kept?", (), "c", answer="shared: deleted or kept")
    truth = {"shared": "kept", "finalizer": "foregroundDeletion", "count": 3, "ok": True}
    student = "shared: deleted\nfinalizer: orphan\ncount: 4\nok: false\n"
    patterns = secrets(ex, truth, None, student)

    def leaks(text):
        return [p.pattern for p in patterns if p.search(shown({"message": text}).lower())]
    assert leaks("expected shared: kept") and leaks('expected: {"shared": "kept"}')
    assert leaks("the Deployment waited with foregroundDeletion, not orphan")
    assert not leaks("shared: wrong (you wrote deleted); count: wrong; look at `labkit gc log`")
    assert not leaks("your answer says count: 4 and finalizer: orphan")


@pytest.mark.parametrize("lab_id", sorted({c.values[0] for c in _cases()}))
def test_each_exercise_resets_after_its_mistakes(outcomes, lab_id):
    failed = {ex: r["error"] for (lab, ex, name), r in outcomes.items() if lab == lab_id and name == "(reset)"}
    assert not failed, f"`labkit reset {lab_id} EXERCISE` failed after the mistakes: {failed}"


@pytest.mark.parametrize("lab_id,exercise", _cases(answer_only=True))
def test_the_reference_answer_passes_after_the_mistakes(outcomes, lab_id, exercise):
    record = outcomes[(lab_id, exercise, None)]
    assert "error" not in record, record["error"]
    assert record["result"]["status"] == "pass", record["result"]["message"]
    assert record["answer"], "the reference solution wrote no answer file"


if __name__ == "__main__":
    sys.stdout.write(json.dumps(drive(sys.argv[1])))
