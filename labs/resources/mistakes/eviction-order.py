"""Common wrong predictions of eviction-order."""

from importlib import util

import yaml

from labkit.exercises import answer_path, mistake


def _solution(env):
    spec = util.spec_from_file_location("resources_eviction_solution",
                                        env.lab.directory / "solutions" / "eviction-order.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _answer(env, order):
    path = answer_path(env.lab.id, "eviction-order")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"order": order}))


@mistake("order of the QoS classes")
def by_qos_class(env):
    """Evicts BestEffort first, then Burstable, then Guaranteed (the usual myth), and watches."""
    _answer(env, ["logs", "reports", "crawler", "analytics", "checkout", "payments"])
    _solution(env).watch(env)


@mistake("ignores priority")
def ignored_priority(env):
    """Ranks the Pods above their request by how far above they are, forgetting priority, and watches."""
    _answer(env, ["analytics", "logs", "reports", "crawler", "payments", "checkout"])
    _solution(env).watch(env)
