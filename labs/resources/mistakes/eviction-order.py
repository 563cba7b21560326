"""Common wrong predictions of eviction-order."""

from importlib import util
from pathlib import Path

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


@mistake("not watched these Pods", "otherwise than the lab's file")
def watches_an_edited_copy(env):
    """Predicts the ranking right, then runs a copy of the scenario with two requests changed
    (analytics asks for 250Mi, checkout for 32Mi) and watches the eviction manager rank those
    Pods instead of the scenario's."""
    from labkit.resources import eviction
    from labkit.resources.node import lab_nodes

    solution = _solution(env)
    _answer(env, solution.ORDER)
    scenario = Path(env.dir) / "scenarios" / "pressure.yaml"
    docs = [d for d in yaml.safe_load_all(scenario.read_text()) if d]
    requests = {"analytics": "250Mi", "checkout": "32Mi"}
    for doc in docs:
        if doc["metadata"]["name"] in requests:
            doc["spec"]["containers"][0]["resources"]["requests"]["memory"] = requests[doc["metadata"]["name"]]
    mine = scenario.with_name("pressure-mine.yaml")
    mine.write_text(yaml.safe_dump_all(docs))
    node = lab_nodes(env)["node-3"]
    node.apply(node.load(mine))
    for name in solution.ORDER:
        env.lab.environment_module().wait_settled(env, "node-3", name)
    eviction.run(node)
