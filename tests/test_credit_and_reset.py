"""Recorded passes, resetting one exercise, exercises by number and revealing right answers, on
two small labs of plain files (no kernel resources): `parts` has a reset_exercise hook, `whole`
has none."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from support import labkit

LAB_YAML = """\
id: {lab}
title: {lab} lab
summary: a lab of plain files
exercises:
  - id: answer
    title: Write the answer
    points: 2
    prompt: Write `value:` into your answer file.
    answer: "value: the number in the lab's number file"
    check: check_answer
  - id: flag
    title: Raise the flag
    points: 3
    prompt: Create the file `flag` in the lab's directory.
    check: check_flag
"""

LAB_PY = '''
def up(env):
    builds = env.dir / "builds"
    builds.write_text(str(int(builds.read_text()) + 1 if builds.exists() else 1))
    (env.dir / "number").write_text("{number}")
'''

HOOK = '''

def reset_exercise(env, exercise_id):
    with open(env.dir / "resets", "a") as f:
        f.write(exercise_id + "\\n")
    if exercise_id == "flag":
        (env.dir / "flag").unlink(missing_ok=True)


def student_work(env, exercise_id):
    flag = env.dir / "flag"
    return [f"the flag you raised ({flag})"] if flag.exists() and exercise_id in (None, "flag") else []


def keep_student_work(env, exercise_id):
    flag = env.dir / "flag"
    if not flag.exists() or exercise_id not in (None, "flag"):
        return []
    kept = env.dir.parent / "kept-flag"
    kept.write_text(flag.read_text())
    return [f"your flag is kept as {kept}"]
'''

CHECKS_PY = '''
from labkit.exercises import LIVE


def check_answer(ctx):
    if (ctx.env.dir / "busy").exists():        # what the answer is about has not happened yet
        from labkit.exercises import NotJudged
        raise NotJudged("the lab is still busy: check again in a few seconds")
    truth = int((ctx.env.dir / "number").read_text())
    given = ctx.answer_field(ctx.answer(), "value", int)
    if given == truth:
        return ctx.passed(f"{given} is the number")
    return ctx.failed("value: not the number in the lab's number file", expected="the number in the file",
                      observed=given, right_answer={"value": truth})


def check_flag(ctx):
    if (ctx.env.dir / "flag").exists():
        return ctx.passed("the flag is up")
    return ctx.failed("no flag", expected="a file named flag", observed="none", observed_in=LIVE)
'''


def make_lab(root: Path, lab: str, hook: bool, reveal: bool = False) -> None:
    d = root / lab
    d.mkdir(parents=True)
    (d / "lab.yaml").write_text(LAB_YAML.format(lab=lab) + ("reveal_answers: true\n" if reveal else ""))
    (d / "lab.py").write_text(LAB_PY.format(number=7) + (HOOK if hook else ""))
    (d / "checks.py").write_text(CHECKS_PY)


@pytest.fixture
def labs(tmp_path, monkeypatch):
    root = tmp_path / "labs"
    make_lab(root, "parts", hook=True)
    make_lab(root, "whole", hook=False)
    make_lab(root, "open", hook=False, reveal=True)
    monkeypatch.setenv("LABKIT_LABS_PATH", str(root))
    return Path(os.environ["LABKIT_STATE_DIR"]), Path(os.environ["LABKIT_ANSWERS_DIR"])


def answer(answers: Path, lab: str, value) -> None:
    (answers / lab).mkdir(parents=True, exist_ok=True)
    (answers / lab / "answer.yaml").write_text(f"value: {value}\n")


def report(lab: str, *extra: str, code: int = 1) -> dict:
    return json.loads(labkit("check", lab, "-o", "json", *extra, check=code).stdout)


def test_a_pass_is_recorded_and_outlives_a_rebuild(labs):
    state, answers = labs
    labkit("run", "whole", check=0)
    answer(answers, "whole", 7)
    rep = report("whole")
    assert (rep["score"], rep["passed"], rep["passing"]) == (2, 1, 1)
    recorded = json.loads((state / "whole" / "credit.json").read_text())["answer"]
    assert recorded["message"] == "7 is the number" and recorded["points"] == 2 and recorded["time"]
    answer(answers, "whole", 8)     # the student breaks it afterwards, then rebuilds the lab
    out = labkit("reset", "whole", check=0)
    assert "lab whole was rebuilt" in out.stderr
    assert (state / "whole" / "builds").read_text() == "2"
    rep = report("whole")
    result = rep["results"][0]
    assert result["status"] == "fail" and result["recorded"]["message"] == "7 is the number"
    assert (rep["score"], rep["passed"], rep["passing"], rep["live_score"]) == (2, 1, 0, 0)
    table = labkit("check", "whole", check=1).stdout
    assert f"answer  0/2  (passed at {recorded['time']}: 2/2 kept)" in table
    assert "score 2/5: 1 of 2 exercises passed (1 of them passed before and fail now)" in table
    assert "running: 1 of 2 exercises passed" in labkit("list", check=0).stdout
    labkit("cleanup", "whole", check=0)
    assert "stopped: 1 of 2 exercises passed" in labkit("list", check=0).stdout


def test_one_exercise_afresh_through_the_hook_or_a_rebuild(labs):
    state, _answers = labs
    labkit("run", "parts", check=0)
    (state / "parts" / "flag").write_text("up")
    assert report("parts", code=1)["results"][1]["status"] == "pass"
    before = json.loads((state / "parts" / "ready.json").read_text())
    refused = labkit("reset", "parts", "2", check=2)    # no terminal to ask on: it says what and how
    assert "resetting exercise flag of lab parts would revert:\n  - the flag you raised" in refused.stderr
    assert "`labkit reset parts 2 --yes`" in refused.stderr and (state / "parts" / "flag").exists()
    out = labkit("reset", "parts", "2", "--yes", check=0)        # by number, as `labkit show` lists them
    assert f"your flag is kept as {state / 'kept-flag'}" in out.stderr and (state / "kept-flag").read_text() == "up"
    # without asking, it still says what it reverts
    assert "Resetting exercise flag of lab parts reverts:\n  - the flag you raised" in out.stderr
    assert "exercise flag of lab parts starts afresh; the others keep their state" in out.stderr
    assert (state / "parts" / "resets").read_text() == "flag\n"
    assert (state / "parts" / "builds").read_text() == "1"        # not rebuilt
    ready = json.loads((state / "parts" / "ready.json").read_text())
    assert ready["*"] == before["*"] and ready["flag"] > before["*"]
    assert "flag" not in json.loads((state / "parts" / "progress.json").read_text())
    flag = report("parts")["results"][1]
    assert flag["status"] == "fail" and flag["recorded"]["message"] == "the flag is up"
    # without the hook: the whole lab is rebuilt, recorded passes stay
    labkit("run", "whole", check=0)
    out = labkit("reset", "whole", "flag", check=0)
    assert "lab whole cannot reset one exercise: rebuilding all of it (recorded passes are kept)" in out.stderr
    assert (state / "whole" / "builds").read_text() == "2"
    assert "has no exercise 'nope' (exercises: 1 answer, 2 flag)" in labkit("reset", "whole", "nope", check=2).stderr
    labkit("cleanup", "--all", check=0)
    assert "lab parts is not running" in labkit("reset", "parts", "flag", check=2).stderr


def test_an_exercise_reset_through_the_hook_does_not_probe_the_prerequisites_again(labs, monkeypatch):
    from labkit import runner
    from labkit.labs import get_lab
    labkit("run", "parts", check=0)
    labkit("run", "whole", check=0)
    probed = []
    monkeypatch.setattr(runner, "require_prerequisites", lambda lab: probed.append(lab.id))
    runner.reset(get_lab("parts"), exercise_id="flag")
    assert probed == []
    runner.reset(get_lab("whole"), exercise_id="flag")      # no hook: a rebuild, which probes them
    runner.reset(get_lab("parts"))
    assert probed == ["whole", "parts"]
    labkit("cleanup", "--all", check=0)


def test_exercises_by_number(labs):
    assert labkit("show", "parts", "2", check=0).stdout.startswith("# Raise the flag (3 points)")
    shown = labkit("show", "parts", "1", check=0).stdout
    assert "**Answer file** (value: the number in the lab's number file):" in shown
    assert "has no exercise '3' (exercises: 1 answer, 2 flag)" in labkit("show", "parts", "3", check=2).stderr


def test_right_answers_only_when_revealed(labs, monkeypatch):
    _state, answers = labs
    for lab in ("whole", "open"):
        labkit("run", lab, check=0)
        answer(answers, lab, 9)
    hidden = report("whole")["results"][0]
    assert hidden["right_answer"] is None and hidden["observed"] == 9 and hidden["observed_in"] == "your answer"
    assert report("whole")["results"][1]["observed_in"] == "the live lab"
    assert "right answer" not in labkit("check", "whole", check=1).stdout
    assert report("whole", "--reveal-answers")["results"][0]["right_answer"] == {"value": 7}
    assert "right answer: value: 7" in labkit("check", "whole", "--reveal-answers", check=1).stdout
    assert report("open")["results"][0]["right_answer"] == {"value": 7}         # lab.yaml: reveal_answers
    monkeypatch.setenv("LABKIT_REVEAL_ANSWERS", "1")
    assert report("whole")["answers_revealed"] is True
    labkit("cleanup", "--all", check=0)


def test_reveal_answers_must_be_true_or_false(tmp_path, monkeypatch):
    root = tmp_path / "labs"
    make_lab(root, "odd", hook=False)
    (root / "odd" / "lab.yaml").write_text((root / "odd" / "lab.yaml").read_text() + "reveal_answers: later\n")
    monkeypatch.setenv("LABKIT_LABS_PATH", str(root))
    assert textwrap.dedent(labkit("show", "odd", check=2).stderr).strip().endswith(
        "lab.yaml: reveal_answers: expected true or false, got str 'later'")


def test_a_prediction_grid_says_neither_how_many_cells_are_wrong_nor_which_until_it_is_settled(labs):
    """A count or a named cell would let a student find the answer one cell at a time; labkit
    counts the different wrong answers instead, and a settled (frozen) answer is told its cells."""
    from labkit.exercises import CheckContext
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    state_dir, answers = labs
    labkit("run", "parts", check=0)
    lab = get_lab("parts")
    ctx = CheckContext(LabEnv(lab, LabState("parts")), lab.exercise("answer"))
    wrong = ["web / node2 / answers", "web / node1 / client address"]
    messages = []
    for value in range(5):
        answer(answers, "parts", value)
        messages.append(ctx.grid_feedback(wrong, 8, "cells"))
        messages.append(ctx.grid_feedback(wrong, 8, "cells"))      # the same answer again counts once
    assert messages[0] == ("your prediction is not right (1 different wrong answer checked; labkit does not say how "
                           "many of its 8 cells are wrong, or which): observe each case in the live lab before you "
                           "change it")
    assert messages[-1].startswith("your prediction is not right (5 different wrong answers checked;")
    assert not any("web /" in m or "2 of" in m for m in messages)
    assert LabState("parts").wrong_answers_checked("answer") == 5
    answer(answers, "parts", 7)                         # the right one: the pass says how it was found
    [passed] = [r for r in report("parts")["results"] if r["exercise"] == "answer"]
    assert passed["status"] == "pass" and passed["details"]["wrong_answers_checked_before"] == 5
    assert passed["message"].endswith("(passed after 5 different wrong answers had been checked)"), passed["message"]
    assert ctx.grid_feedback(wrong, 8, "cells", settled=True) == \
        "2 of the 8 cells of your prediction are wrong: web / node2 / answers, web / node1 / client address"
    labkit("reset", "parts", "answer", check=0)         # its part afresh: the count goes on (no second first try)
    assert LabState("parts").wrong_answers_checked("answer") == 5

@pytest.mark.parametrize("text, said", [
    ("value: [7\n", "your answer is malformed: it is not valid YAML (line 2)"),
    ("value: 7\n---\nvalue: 8\n", "your answer is malformed: it holds more than one YAML document (another starts "
                                 "at line 2, after `---`): an answer is one document"),
    ("valeu: 7\n", "your answer is malformed: it has no key value; it has the key valeu instead — is it misspelled?"),
    ("- 7\n", "your answer is malformed: it should be a YAML mapping with the key value, not a list"),
    ("value: seven\n", "your answer is malformed: value should be a whole number, not a string"),
    ("value: 7\nvalue: 8\n", "your answer is malformed: it gives value twice (line 2)"),
    # a misspelled key is named, and so are the keys the exercise wants, but no value
    ("valeu: 7\nnote: hi\n", "your answer is malformed: it has no key value; it has the keys valeu, note instead "
                               "— is one of them misspelled?"),
])
def test_a_malformed_answer_says_so_and_is_not_counted_as_a_wrong_answer(labs, text, said):
    """A YAML error, a wrong type, a key given twice or a key the check reads missing is not a
    wrong answer: the feedback says the answer is malformed (naming the keys it has instead of a
    missing one), and the count of different wrong answers checked that an instructor sees
    (LabState.answer_tries, run_check) does not grow; a wrong answer does."""
    from labkit.state import LabState
    _state, answers = labs
    labkit("run", "parts", check=0)
    (answers / "parts").mkdir(parents=True, exist_ok=True)
    (answers / "parts" / "answer.yaml").write_text(text)
    [failed] = [r for r in report("parts")["results"] if r["exercise"] == "answer"]
    assert failed["status"] == "fail" and failed["message"].startswith(said), failed["message"]
    assert "It must hold: value: the number in the lab's number file" in failed["message"] or "twice" in said
    assert LabState("parts").wrong_answers_checked("answer") == 0
    answer(answers, "parts", 8)
    report("parts")
    assert LabState("parts").wrong_answers_checked("answer") == 1


def test_a_check_while_the_lab_is_still_busy_is_not_a_wrong_answer(labs):
    """A failure that does not judge the answer, only says that what it is about is still going on
    (a deletion the garbage collector has not finished: NotJudged), is not counted as a different
    wrong answer: the pass would otherwise report wrong answers the student never gave."""
    from labkit.state import LabState
    state, answers = labs
    labkit("run", "parts", check=0)
    (state / "parts" / "busy").write_text("yes")
    answer(answers, "parts", 7)
    [busy] = [r for r in report("parts")["results"] if r["exercise"] == "answer"]
    assert busy["status"] == "fail" and "still busy" in busy["message"]
    assert LabState("parts").wrong_answers_checked("answer") == 0
    (state / "parts" / "busy").unlink()
    [passed] = [r for r in report("parts")["results"] if r["exercise"] == "answer"]
    assert passed["status"] == "pass" and "wrong answer" not in passed["message"], passed["message"]


def test_run_makes_the_answers_directory_for_the_student_who_ran_sudo(labs):
    """The answer files the lab names can be written at once: `labkit run` makes <answers>/<lab>/,
    and under sudo the directories it makes belong to the user who ran sudo, not to root."""
    _, answers = labs
    assert not answers.exists()
    labkit("run", "parts", env={**os.environ, "SUDO_UID": "65534", "SUDO_GID": "65534"}, check=0)
    for directory in (answers, answers / "parts"):
        assert directory.is_dir() and (directory.stat().st_uid, directory.stat().st_gid) == (65534, 65534)


NAMED_YAML = """\
id: named
title: named lab
summary: answers that name live state, and a prediction grid
exercises:
  - id: path
    title: Name the file
    points: 1
    prompt: Write `right` into a file, and name that file in your answer.
    answer: "file: the path of the file you wrote"
    check: check_path
  - id: grid
    title: Predict
    points: 1
    prompt: Predict the number in the lab's number file.
    answer: "value: the number"
    check: check_grid
"""

NAMED_CHECKS = '''
from pathlib import Path


def check_path(ctx):
    path = Path(ctx.answer_field(ctx.answer(), "file", str))
    text = path.read_text().strip() if path.is_file() else ""
    checks = ctx.env.dir / "checks"              # a number that changes at every check, as a time does
    checks.write_text(str(int(checks.read_text()) + 1 if checks.exists() else 1))
    if text == "right":
        return ctx.passed("the file says right")
    return ctx.failed(f"the file {path} says {text or 'nothing'!r}, not right (check {checks.read_text()} of this lab)")


def check_grid(ctx):
    if ctx.answer_field(ctx.answer(), "value", int) == 7:
        return ctx.passed("7 is the number")
    return ctx.failed(ctx.grid_feedback(["value"], 1, "values") + " (see the number file)")
'''


def _run_checks_only_lab(tmp_path, monkeypatch, lab_id: str, lab_yaml: str, checks_py: str) -> Path:
    """A lab of its own with nothing to build (its lab.yaml and checks.py given), run; its answers
    directory."""
    root = tmp_path / "labs"
    (root / lab_id).mkdir(parents=True)
    (root / lab_id / "lab.yaml").write_text(lab_yaml)
    (root / lab_id / "lab.py").write_text("def up(env):\n    pass\n")
    (root / lab_id / "checks.py").write_text(checks_py)
    monkeypatch.setenv("LABKIT_LABS_PATH", str(root))
    labkit("run", lab_id, check=0)
    return Path(os.environ["LABKIT_ANSWERS_DIR"]) / lab_id


def test_wrong_answers_that_differ_only_in_the_live_state_they_name_are_counted_apart(tmp_path, monkeypatch):
    """The answer names a file whose content the student changes: five different wrong contents
    behind one answer file are five different wrong answers (they counted as one when only the
    answer file's text was compared); the same state checked again, with only a number in the
    feedback changed, is no new one. A check that counts while it judges (grid_feedback) is not
    counted again by run_check, and a record of answers' digests alone (as kept before failures
    were told apart) reads and goes on as it did."""
    import hashlib

    from labkit.state import LabState
    answers = _run_checks_only_lab(tmp_path, monkeypatch, "named", NAMED_YAML, NAMED_CHECKS)
    target = tmp_path / "target"
    answers.mkdir(parents=True, exist_ok=True)
    (answers / "path.yaml").write_text(f"file: {target}\n")
    grid = "value: 8\n"
    (answers / "grid.yaml").write_text(grid)
    state = LabState("named")
    (state.dir / "tries.json").write_text(json.dumps({"grid": [hashlib.sha256(grid.encode()).hexdigest()[:16]]}))

    def result(exercise: str) -> dict:
        return next(r for r in report("named")["results"] if r["exercise"] == exercise)

    for n, text in enumerate(["wrong", "left", "", "Right!", "rite"], start=1):
        target.write_text(text)
        for _ in range(2):                      # checked again as it is: no new wrong answer
            failed = result("path")
            assert failed["status"] == "fail" and "not right (check" in failed["message"], failed["message"]
            assert state.wrong_answers_checked("path") == n
    assert "(1 different wrong answer checked;" in result("grid")["message"]
    assert state.wrong_answers_checked("grid") == 1
    (answers / "grid.yaml").write_text("value: 9\n")
    assert "(2 different wrong answers checked;" in result("grid")["message"]
    assert state.wrong_answers_checked("grid") == 2
    target.write_text("right")
    passed = result("path")
    assert passed["status"] == "pass" and passed["message"] == \
        "the file says right (passed after 5 different wrong answers had been checked)", passed["message"]
    labkit("cleanup", "--all", check=0)


NOT_YET_YAML = """\
id: notyet
title: not yet
summary: an answer that can be judged only once the situation it is about is there
exercises:
  - id: answer
    title: Read it
    points: 1
    prompt: Make the situation (the file ready in the lab's directory), then read the number.
    answer: "value: the number"
    check: check_answer
  - id: both
    title: Read it and fix it
    points: 1
    prompt: Read the number, and make the file fixed in the lab's directory.
    answer: "value: the number"
    check: check_both
"""

NOT_YET_CHECKS = '''
from labkit.exercises import NotJudged


def check_answer(ctx):
    value = ctx.answer_field(ctx.answer(), "value", int)
    if not (ctx.env.dir / "ready").exists():
        raise NotJudged("the situation is not there yet: make it first")
    return ctx.passed("7 is the number") if value == 7 else ctx.failed("not the number")


def check_both(ctx):
    value = ctx.answer_field(ctx.answer(), "value", int)
    ctx.answer_not_wrong = value == 7
    fixed = ctx.env.dir / "fixed"
    problems = ([] if value == 7 else ["not the number"]) + \\
        ([] if fixed.exists() else ["not fixed yet: " + " ".join(sorted(f.name for f in ctx.env.dir.glob("extra-*")))])
    return ctx.failed("; ".join(problems)) if problems else ctx.passed("read and fixed")
'''


def test_a_check_that_cannot_judge_the_answer_yet_counts_no_wrong_answer(tmp_path, monkeypatch):
    """A newcomer wrote the namespace lab's conditions answer first, checked before deleting the
    namespace and again while the namespace controller worked, then once more: the pass said two
    wrong answers had come before it, although none had been judged. NotJudged says what to do
    first and counts nothing; a wrong answer judged still counts."""
    from labkit.state import LabState
    answers = _run_checks_only_lab(tmp_path, monkeypatch, "notyet", NOT_YET_YAML, NOT_YET_CHECKS)
    answers.mkdir(parents=True, exist_ok=True)
    (answers / "answer.yaml").write_text("value: 8\n")
    state = LabState("notyet")
    [failed, _both] = report("notyet")["results"]
    assert failed["status"] == "fail" and failed["message"] == "the situation is not there yet: make it first"
    assert failed["details"]["not_judged"] is True and state.wrong_answers_checked("answer") == 0
    (state.dir / "ready").write_text("")
    [failed, _both] = report("notyet")["results"]
    assert failed["message"] == "not the number" and state.wrong_answers_checked("answer") == 1
    (answers / "answer.yaml").write_text("value: 7\n")
    [passed, _both] = report("notyet")["results"]
    assert passed["message"] == "7 is the number (passed after 1 different wrong answer had been checked)"
    # an exercise that asks for an answer and live work: a failure of the work beside a right answer
    # (the feedback different each time) is no wrong answer; a wrong answer is one
    (answers / "both.yaml").write_text("value: 8\n")
    report("notyet")
    assert state.wrong_answers_checked("both") == 1
    # the same wrong answer while the work's feedback beside it changes is still one wrong answer
    # (README: an answer judged on its own is different only when its file differs)
    (state.dir / "extra-z").write_text("")
    [_answer, failed] = report("notyet")["results"]
    assert "extra-z" in failed["message"] and state.wrong_answers_checked("both") == 1
    (state.dir / "extra-z").unlink()
    (answers / "both.yaml").write_text("value: 7\n")
    for n in range(3):
        (state.dir / f"extra-{'abc'[n]}").write_text("")
        [_answer, failed] = report("notyet")["results"]
        assert failed["message"].startswith("not fixed yet") and state.wrong_answers_checked("both") == 1
    (state.dir / "fixed").write_text("")
    [_answer, passed] = report("notyet", code=0)["results"]
    assert passed["message"] == "read and fixed (passed after 1 different wrong answer had been checked)"
    labkit("cleanup", "--all", check=0)


def test_a_check_waits_for_another_command_on_the_lab_and_says_so(labs):
    """`labkit check` holds the lab's lock as run, reset and cleanup do: a check started while
    another labkit command holds it says it waits, does not judge a lab half rebuilt, and records
    its pass once it has the lock."""
    import subprocess
    import sys

    state, answers = labs
    labkit("run", "whole", check=0)
    answer(answers, "whole", 7)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys\n"
                               f"fd = os.open({str(state / 'whole' / 'lock')!r}, os.O_RDWR)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        from support import LABKIT
        check = subprocess.Popen([*LABKIT, "check", "whole", "-o", "json"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        said = check.stderr.readline()
        assert "waiting for another labkit command on lab whole to finish" in said, said
        assert check.poll() is None and not (state / "whole" / "credit.json").exists()
    finally:
        holder.stdin.close()
        holder.wait()
    out, _ = check.communicate(timeout=60)
    assert check.returncode == 1 and json.loads(out)["passed"] == 1
    assert "answer" in json.loads((state / "whole" / "credit.json").read_text())


def test_the_labs_lock_is_taken_again_in_the_thread_that_holds_it_and_waited_for_in_another(tmp_path):
    import threading

    from labkit.state import LabState

    state = LabState("whole", root=tmp_path)
    waited, got = threading.Event(), threading.Event()

    def other():
        with state.locked(waiting=waited.set):
            got.set()

    with state.locked():
        with state.locked():            # a labkit command calling code that takes the lock itself
            pass
        thread = threading.Thread(target=other)
        thread.start()
        assert waited.wait(60) and not got.is_set()
    thread.join(60)
    assert got.is_set()
