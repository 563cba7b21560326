"""Common wrong predictions of checkpoint. Checked before `labkit devices play` has shown the
outcome (as a student first checks), a wrong prediction is told that it is wrong and where to look,
not which Pod (checks.judge_checkpoint); what each one gets wrong is named once the answer is kept
(tests/test_device_plugins_judges.py)."""

import yaml

from labkit.exercises import answer_path, mistake


def _answer(env, held):
    path = answer_path(env.lab.id, "checkpoint")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(held if "held" in held else {"held": held}))


@mistake("prediction is not right", "UpdateAllocatedDevices")
def ended_pod_keeps_its_widget(env):
    """Restores infer's allocation and keeps it: a Pod that ended still holds widget-2, so next is rejected."""
    _answer(env, {"train": ["widget-0", "widget-1"], "infer": ["widget-2"], "prep": ["widget-3"]})


@mistake("prediction is not right", "Unhealthy device")
def unhealthy_widget_taken_back(env):
    """Thinks kubelet takes widget-1 back from train because it is Unhealthy now."""
    _answer(env, {"train": ["widget-0"], "prep": ["widget-3"], "next": ["widget-2"]})


@mistake("prediction is not right", "readCheckpoint")
def checkpoint_forgotten(env):
    """Thinks a restarted kubelet starts with no allocations: next gets the first healthy widget."""
    _answer(env, {"next": ["widget-0"]})


@mistake("prediction is not right", "devicesToAllocate")
def new_pod_gets_a_held_widget(env):
    """Thinks the init container's widget is free once fetch finished, so next gets widget-3."""
    _answer(env, {"train": ["widget-0", "widget-1"], "prep": ["widget-3"], "next": ["widget-3"]})


@mistake("twice")
def widget_counted_per_container(env):
    """Lists prep's widget once per container (fetch and main), as the checkpoint has two entries."""
    _answer(env, {"train": ["widget-0", "widget-1"], "prep": ["widget-3", "widget-3"], "next": ["widget-2"]})


@mistake("prediction is not right", "devicesToReuse")
def init_and_main_get_different_widgets(env):
    """Thinks prep's init container and main container hold a widget each, leaving none for next."""
    _answer(env, {"train": ["widget-0", "widget-1"], "prep": ["widget-2", "widget-3"], "next": []})


@mistake("held:")
def flat_answer(env):
    """Writes the Pods at the top of the answer file, without `held:`."""
    path = answer_path(env.lab.id, "checkpoint")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"train": ["widget-0", "widget-1"], "prep": ["widget-3"], "next": ["widget-2"]}))
