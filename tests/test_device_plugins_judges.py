"""The device-plugins lab's judges in-process: the feedback on predictions of the checkpoint
exercise, and what the plugin exercises' judges make of observations (kubelet's record of
Register calls, as labs/device-plugins/checks.py observes it)."""

from __future__ import annotations

import re

import pytest
import yaml

from labkit.exercises import CheckContext, CheckFailed
from labkit.labs import get_lab
from labkit.state import LabEnv, LabState


@pytest.fixture
def lab():
    the_lab = get_lab("device-plugins")
    state = LabState(the_lab.id)
    state.ensure_dir()
    return the_lab, LabEnv(the_lab, state)


RIGHT = {"train": ["widget-0", "widget-1"], "prep": ["widget-3"], "next": ["widget-2"]}
WRONG = [{**RIGHT, "next": ["widget-1"]}, {**RIGHT, "next": ["widget-3"]}, {**RIGHT, "train": ["widget-0"]},
         {**RIGHT, "prep": ["widget-2"]}, {**RIGHT, "infer": ["widget-2"]}, {**RIGHT, "ghost": ["widget-2"]},
         {"train": ["widget-0", "widget-1"], "prep": ["widget-3"]}, {"next": ["widget-0"]}]


@pytest.mark.parametrize("held", WRONG)
def test_checkpoint_feedback_is_filled_in(lab, held):
    # every message of judge_checkpoint is a complete sentence: no {placeholder} left unformatted
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("checkpoint"))
    with pytest.raises(CheckFailed) as failed:
        checks.judge_checkpoint(ctx, {"held": held}, " (a note)")
    message = str(failed.value)
    assert not re.search(r"\{\w+\}", message), message
    assert message.endswith(" (a note)"), message
    assert checks.judge_checkpoint(ctx, {"held": RIGHT}).passed
