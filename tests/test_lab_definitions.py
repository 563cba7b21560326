"""lab.yaml loading: every lab that ships is valid, and a malformed file names file, field and expectation."""

import textwrap

import pytest

from labkit.errors import ConfigError
from labkit.labs import discover, load_lab
from labkit.paths import BUILTIN_LABS

GOOD = """\
id: sample
title: Sample
summary: A sample lab.
prerequisites: [root]
exercises:
  - id: one
    title: First
    points: 2
    params: {service: web}
    prompt: Name the chain of service {{service}}.
    hints: ["Look at service {{ service }}."]
    check: check_one
    answer: "chain: <name>"
"""


def write_lab(tmp_path, text, name="sample", checks="def check_one(ctx):\n    return ctx.passed('ok')\n"):
    d = tmp_path / "labs" / name
    d.mkdir(parents=True)
    (d / "lab.yaml").write_text(textwrap.dedent(text))
    (d / "checks.py").write_text(checks)
    return d


def test_good_lab_loads_and_params_reach_prompt_and_hints(tmp_path):
    lab = load_lab(write_lab(tmp_path, GOOD))
    ex = lab.exercises[0]
    assert (lab.id, ex.id, ex.points, ex.check) == ("sample", "one", 2, "check_one")
    assert ex.prompt == "Name the chain of service web."
    assert ex.hints == ("Look at service web.",)
    assert ex.params == {"service": "web"}
    assert callable(lab.check_function(ex))


@pytest.mark.parametrize("mutate, field, expected", [
    (lambda t: t.replace("points: 2", "points: ten"), "exercises[0].points", "non-negative integer"),
    (lambda t: t.replace("points: 2", "points: -1"), "exercises[0].points", "non-negative integer"),
    (lambda t: t.replace("    title: First\n", ""), "exercises[0].title", "non-empty string"),
    (lambda t: t.replace("id: sample", "id: other"), "id", "directory name"),
    (lambda t: t.replace("prerequisites: [root]", "prerequisites: [warp-drive]"), "prerequisites[0]", "one of"),
    (lambda t: t.replace("{{service}}.", "{{svc}}."), "exercises[0].prompt", "params has no 'svc'"),
    (lambda t: t.replace("check: check_one", "check: 'not a name'"), "exercises[0].check", "Python function name"),
    (lambda t: t + "colour: blue\n", "colour", "unknown field"),
    (lambda t: t.replace("hints: [", "hint: ["), "exercises[0].hint", "unknown field"),
    (lambda t: t.split("exercises:")[0] + "exercises: []\n", "exercises", "non-empty list"),
    (lambda t: t.replace("  - id: one", "  - id: One!"), "exercises[0].id", "lowercase"),
])
def test_malformed_lab_yaml_names_file_field_and_expectation(tmp_path, mutate, field, expected):
    d = write_lab(tmp_path, mutate(GOOD))
    with pytest.raises(ConfigError) as info:
        load_lab(d)
    err = info.value
    assert err.path == str(d / "lab.yaml")
    assert err.field == field
    assert expected in err.problem
    assert str(d / "lab.yaml") in str(err) and field in str(err)


def test_yaml_syntax_error_names_the_line(tmp_path):
    d = write_lab(tmp_path, GOOD.replace("title: Sample", "title: [unclosed"))
    with pytest.raises(ConfigError) as info:
        load_lab(d)
    assert info.value.field.startswith("line ") and "not valid YAML" in info.value.problem


def test_duplicate_exercise_ids_are_rejected(tmp_path):
    doubled = GOOD + GOOD.split("exercises:\n")[1]
    with pytest.raises(ConfigError, match=r"exercises\[1\]\.id: duplicate"):
        load_lab(write_lab(tmp_path, doubled))


def test_missing_check_function_is_reported_against_lab_yaml(tmp_path):
    lab = load_lab(write_lab(tmp_path, GOOD, checks="def something_else(ctx):\n    pass\n"))
    with pytest.raises(ConfigError, match=r"exercises\[0\]\.check: checks.py has no function 'check_one'"):
        lab.check_function(lab.exercises[0])


def test_every_shipped_lab_is_complete():
    """Each lab in labs/ loads, every check exists, and every exercise has a reference solution."""
    for lab_id, directory in discover().items():
        if directory.parent != BUILTIN_LABS:
            continue
        lab = load_lab(directory)
        assert (directory / "README.md").exists(), f"{lab_id}: README.md missing"
        assert callable(getattr(lab.environment_module(), "up", None))
        for ex in lab.exercises:
            lab.check_function(ex)
            assert ex.hints, f"{lab_id}/{ex.id} has no hints"
            assert lab.solution_path(ex).exists(), f"{lab_id}/{ex.id} has no reference solution"


# SPEC_AWAITED: exercises of the shipped labs without `solved:` in lab.yaml yet. Every other
# exercise must state what "solved" means (what holds, what stays as it was); an entry here whose
# exercise has its statement now fails the test too (remove it).
SPEC_AWAITED: set[tuple[str, str]] = set()


def test_every_exercise_says_what_solved_means():
    lacking = {(lab_id, ex.id) for lab_id, directory in discover().items() if directory.parent == BUILTIN_LABS
               for ex in load_lab(directory).exercises if not ex.solved}
    missing = sorted(lacking - SPEC_AWAITED)
    assert not missing, f"exercises without `solved: {{holds: [...], unchanged: [...]}}` in lab.yaml: {missing}"
    arrived = sorted(SPEC_AWAITED - lacking)
    assert not arrived, f"SPEC_AWAITED names exercises that state it now (remove them): {arrived}"


def test_solved_is_parsed_with_params_and_both_parts_are_required(tmp_path):
    text = GOOD.replace("    check: check_one\n", "    check: check_one\n    solved:\n"
                        "      holds: [\"{{service}} answers on every port it declares\"]\n"
                        "      unchanged: [\"the other Services\"]\n")
    ex = load_lab(write_lab(tmp_path, text)).exercises[0]
    assert ex.solved == {"holds": ("web answers on every port it declares",), "unchanged": ("the other Services",)}
    broken = text.replace("      unchanged: [\"the other Services\"]\n", "")
    with pytest.raises(ConfigError, match=r"exercises\[0\]\.solved\.unchanged: expected a non-empty list"):
        load_lab(write_lab(tmp_path / "b", broken))


# RESET_HOOKS_AWAITED: shipped labs without lab.py's reset_exercise(env, exercise_id) (one
# exercise's part afresh) or student_work(env, exercise_id) (what a reset would revert of the
# student's work, so `labkit reset` can ask first). An entry whose lab has both fails the test too.
RESET_HOOKS_AWAITED: set[str] = set()


def test_every_lab_resets_one_exercise_and_says_what_a_reset_reverts():
    lacking = set()
    for lab_id, directory in discover().items():
        if directory.parent != BUILTIN_LABS:
            continue
        module = load_lab(directory).environment_module()
        if not all(callable(getattr(module, hook, None)) for hook in ("reset_exercise", "student_work")):
            lacking.add(lab_id)
    assert not sorted(lacking - RESET_HOOKS_AWAITED), f"labs without reset_exercise and student_work: {sorted(lacking - RESET_HOOKS_AWAITED)}"
    assert not sorted(RESET_HOOKS_AWAITED - lacking), f"RESET_HOOKS_AWAITED names labs that have both now: {sorted(RESET_HOOKS_AWAITED - lacking)}"
