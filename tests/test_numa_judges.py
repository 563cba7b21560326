"""The numa lab's feedback on exclusive CPU sets (labs/numa/checks.py _picking_feedback), in-process."""

from __future__ import annotations

import pytest

from labkit.exercises import CheckContext
from labkit.labs import get_lab
from labkit.state import LabEnv, LabState


@pytest.fixture
def ctx_and_checks():
    lab = get_lab("numa")
    state = LabState(lab.id)
    state.ensure_dir()
    return CheckContext(LabEnv(lab, state), lab.exercise("static-cpus")), lab._load("checks.py")


PICKED = [("beta/a", "packing: among free units ..."), ("epsilon/main", "packing: among free units ...")]


@pytest.mark.parametrize("tries", [1, 2])
def test_before_the_third_wrong_answer_no_container_is_named(ctx_and_checks, monkeypatch, tries):
    ctx, checks = ctx_and_checks
    monkeypatch.setattr(ctx, "count_wrong_answer", lambda: tries)
    message = checks._picking_feedback(ctx, PICKED)
    assert "does not say which containers or how many" in message
    assert "beta/a" not in message and "epsilon/main" not in message


@pytest.mark.parametrize("tries", [3, 5])
def test_once_a_container_is_named_the_feedback_does_not_claim_it_names_none(ctx_and_checks, monkeypatch, tries):
    ctx, checks = ctx_and_checks
    monkeypatch.setattr(ctx, "count_wrong_answer", lambda: tries)
    message = checks._picking_feedback(ctx, PICKED)
    assert "the first in admission order: beta/a" in message and "epsilon/main" not in message
    assert "which containers" not in message and "how many" in message


def test_answer_values_are_shown_as_yaml_not_python(ctx_and_checks):
    """Feedback quotes a student's YAML back in YAML: `mask null`, not Python's None or True."""
    _ctx, checks = ctx_and_checks
    assert checks._decision({"mask": None, "preferred": False, "admit": "maybe"}) == \
        "mask null, preferred no, admit maybe"
    assert checks._decision({"mask": [0, 1], "preferred": True, "admit": True}) == "mask [0, 1], preferred yes, admit yes"
    assert checks._shown({"mask": [0, 1], "prefered": False}) == "{mask: [0, 1], prefered: false}"


def test_a_cpu_list_with_a_blank_between_digits_is_not_read_as_one_number(ctx_and_checks):
    """"2 8" is no Linux list (cpuset.Parse refuses it); it was read as CPU 28."""
    from labkit.exercises import CheckFailed

    _ctx, checks = ctx_and_checks
    with pytest.raises(CheckFailed, match="is not a CPU list"):
        checks._cpus("2 8", "alpha/main")
    assert checks._cpus(" 2, 8 ", "alpha/main") == {2, 8} and checks._cpus("4 - 5,10", "x") == {4, 5, 10}
