"""Common wrong answers to weight."""

from importlib import util

from labkit.exercises import mistake
from labkit.resources.node import lab_nodes


def _solution(env):
    spec = util.spec_from_file_location("resources_weight_solution", env.lab.directory / "solutions" / "weight.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@mistake("container cgroup")
def read_a_container(env):
    """Reads the worker container's cgroup instead of the pod's."""
    record = lab_nodes(env)["node-1"].record("mystery")
    solution = _solution(env)
    solution.answer(env, *solution.read_value(env, record["containers"]["worker"]["cgroup"]))


@mistake("QoS cgroup")
def read_the_qos_level(env):
    """Reads kubepods/burstable, the QoS cgroup above the Pod."""
    record = lab_nodes(env)["node-1"].record("mystery")
    solution = _solution(env)
    solution.answer(env, *solution.read_value(env, record["cgroup"].rsplit("/", 1)[0]))
