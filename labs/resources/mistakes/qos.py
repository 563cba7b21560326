"""Common wrong answers to qos."""

import copy

import yaml

from labkit.exercises import answer_path, mistake


def _write(env, change):
    from importlib import util
    spec = util.spec_from_file_location("resources_qos_solution", env.lab.directory / "solutions" / "qos.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data = copy.deepcopy(module.ANSWER)
    change(data)
    path = answer_path(env.lab.id, "qos")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))


@mistake("queue: not Burstable")
def forgot_defaulting(env):
    """Classifies the limits-only Pod as Burstable, forgetting that the API server copies limits into requests."""
    _write(env, lambda d: d["qos"].update(queue="Burstable"))


@mistake("queue/broker: oom_score_adj not -998")
def old_guaranteed_score(env):
    """Gives Guaranteed containers -998, the value of kubelets before the sandbox got it."""
    _write(env, lambda d: d["oom_score_adj"].update({"queue/broker": -998}))


@mistake("api/log-shipper: oom_score_adj not 1000")
def burstable_without_request_as_besteffort(env):
    """Gives a Burstable Pod's container without a memory request 1000, like a BestEffort one."""
    _write(env, lambda d: d["oom_score_adj"].update({"api/log-shipper": 1000}))
