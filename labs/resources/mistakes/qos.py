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


@mistake("prediction is not right", "observe each case")
def forgot_defaulting(env):
    """Classifies the limits-only Pod as Burstable, forgetting that the API server copies limits into requests."""
    _write(env, lambda d: d["qos"].update(queue="Burstable"))


@mistake("1 of the 6 oom_score_adj values", "queue/broker's oom_score_adj")
def old_guaranteed_score(env):
    """Gives Guaranteed containers -998, the value of kubelets before the sandbox got it."""
    _write(env, lambda d: d["oom_score_adj"].update({"queue/broker": -998}))


@mistake("1 of the 6 oom_score_adj values", "api/log-shipper's oom_score_adj")
def burstable_without_request_as_besteffort(env):
    """Gives a Burstable Pod's container without a memory request 1000, like a BestEffort one."""
    _write(env, lambda d: d["oom_score_adj"].update({"api/log-shipper": 1000}))


@mistake("prediction is not right")
def init_container_ignored(env):
    """Ignores the init container without limits (migrate Guaranteed) and the container without
    requests next to a Guaranteed one (api Guaranteed), with the scores that would follow."""
    _write(env, lambda d: (d["qos"].update(migrate="Guaranteed", api="Guaranteed"),
                           d["oom_score_adj"].update({"migrate/app": -997, "api/server": -997, "api/log-shipper": -997})))
