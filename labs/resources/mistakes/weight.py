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


@mistake("min_millicores is not the smallest", "judged on your prediction as it was when")
def refines_the_range_by_converting_forward(env):
    """Reads the pod cgroup's value, writes a guess around the scenario's 250m (240m to 260m),
    then runs `labkit resources convert --cpu` forward on the requests around it to see where the
    value changes, and corrects min_millicores and max_millicores from what it printed: the
    forward conversion showed the outcome, so the guess written before it is what is graded."""
    import re

    import yaml
    from typer.testing import CliRunner

    from labkit.exercises import answer_path
    from labkit.resources.cli import app

    record = lab_nodes(env)["node-1"].record("mystery")
    value, v2 = _solution(env).read_value(env, record["cgroup"])
    path = answer_path(env.lab.id, "weight")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"cgroup_value": value, "min_millicores": 240, "max_millicores": 260}))
    runner = CliRunner()
    same = []
    for milli in range(225, 266):
        shown = runner.invoke(app, ["convert", "--cpu", f"{milli}m"]).output
        found = re.search(r"cpu\.shares (\d+) -> cpu\.weight (\d+)", shown)
        if found and int(found.group(2) if v2 else found.group(1)) == value:
            same.append(milli)
    if same:
        path.write_text(yaml.safe_dump({"cgroup_value": value, "min_millicores": min(same),
                                        "max_millicores": max(same)}))
