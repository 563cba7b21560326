"""labkit.numa.withhold, in-process: what counts as a prediction exercise's own situation (a machine
or hints file under another name, written by hand), and the answer kept when a tool first shows
an answered exercise's outcome (graded instead of later edits; forgotten only by
--forget-prediction, labkit.predictions)."""

import json
import os
from pathlib import Path

import pytest

from labkit import predictions
from labkit.exercises import answer_path
from labkit.numa import withhold
from labkit.numa.machine import load_machine, machine_from_dict

SCENARIOS = Path(__file__).resolve().parent.parent / "labs" / "numa" / "scenarios"


def handwritten(name: str) -> dict:
    """A shipped machine as a student would write it: other core ids, no distances, keys reordered."""
    data = json.loads(json.dumps(load_machine(name).to_dict()))
    for node in data["topology"]:
        node.pop("distances", None)
        for core in node["cores"]:
            core["core_id"] = 1000 - min(core["thread_ids"])
    data["topology"] = data["topology"][::-1]
    return data


@pytest.mark.parametrize("name", ["dual-socket-ht", "lab-two-node"])
def test_a_handwritten_copy_of_a_machine_is_that_machine(name):
    copy = machine_from_dict(handwritten(name), "<mine>")
    for aspects in (("cpu",), ("cpu", "memory")):
        assert withhold.machine_key(copy, aspects) == withhold.machine_key(load_machine(name), aspects)
    other = handwritten(name)        # the same CPUs paired into cores differently: another machine
    a, b = other["topology"][0]["cores"][:2]
    a["thread_ids"], b["thread_ids"] = [a["thread_ids"][0], b["thread_ids"][0]], [a["thread_ids"][1], b["thread_ids"][1]]
    assert withhold.machine_key(machine_from_dict(other, "<other>"), ("cpu",)) != \
        withhold.machine_key(load_machine(name), ("cpu",))


@pytest.fixture
def lab_up():
    state = Path(os.environ["LABKIT_STATE_DIR"]) / "numa"
    state.mkdir(parents=True, exist_ok=True)
    (state / "status.json").write_text(json.dumps({"phase": "up"}))

    class Env:
        dir = state
    return Env


def test_the_merge_exercises_hints_renamed_and_regrouped_are_still_withheld(lab_up):
    trainer = json.loads((SCENARIOS / "merge-trainer.json").read_text())
    gpu, cpu = trainer["providers"]
    mine = {"numaNodes": [1, 0], "policy": "restricted",
            "providers": [{"cpu": [dict(h, mask=h["mask"][::-1]) for h in cpu["cpu"]][::-1],
                           "foo.io/gpu": gpu["example.com/gpu"]}, {"nothing": None}]}
    assert withhold.pending_for_merge(mine) == "merge"
    mine["providers"][0]["cpu"] = mine["providers"][0]["cpu"][:2]       # other hints, the same merge outcome
    assert withhold.pending_for_merge(mine) == "merge"
    mine["providers"][0]["cpu"] = mine["providers"][0]["cpu"][1:]       # other hints: another merge
    assert withhold.pending_for_merge(mine) is None


def test_the_answer_shown_first_is_kept_and_only_forgetting_it_withholds_again(lab_up):
    feeder = json.loads((SCENARIOS / "merge-feeder.json").read_text())
    path = answer_path("numa", "merge")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("placeholder: 1\n")
    withhold.record(lab_up, "merge", path.read_text())
    assert predictions.kept("numa", "merge") is None
    assert withhold.pending_for_merge(feeder) is None           # shown: the answer as it is now is kept
    path.write_text("copied: 2\n")
    assert withhold.pending_for_merge(feeder) is None
    found = predictions.kept("numa", "merge")
    assert found.text == "placeholder: 1\n" and found.tool == "labkit numa merge"
    predictions.forget("numa", "merge", "labkit reset --forget-prediction")
    assert predictions.kept("numa", "merge") is None and not withhold.recorded("merge")
    assert withhold.pending_for_merge(feeder) == "merge"        # unanswered again: withheld


def test_an_answer_removed_after_its_check_is_the_one_kept(lab_up):
    path = answer_path("numa", "merge")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("checked: 1\n")
    withhold.record(lab_up, "merge", path.read_text())
    path.unlink()
    withhold.keep("merge", "labkit numa merge")
    assert predictions.kept("numa", "merge").text == "checked: 1\n"



def test_an_answer_changed_since_its_check_read_it_whole_is_withheld_not_kept(lab_up):
    """The check saw a whole answer; the student then broke it (a class misspelt), which the check
    refuses as malformed and does not record: the tools withhold the outcome again, say why, and
    keep nothing (kept, the broken answer could only fail). Checked whole again, it is shown and
    kept."""
    feeder = json.loads((SCENARIOS / "merge-feeder.json").read_text())
    path = answer_path("numa", "merge")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("whole: 1\n")
    withhold.record(lab_up, "merge", path.read_text())
    path.write_text("whole: misspelt\n")
    assert withhold.pending_for_merge(feeder) == "merge" and not withhold.recorded("merge")
    assert "changed since `labkit check numa merge` last read it whole" in withhold.message("merge")
    assert predictions.kept("numa", "merge") is None
    withhold.record(lab_up, "merge", path.read_text())
    assert withhold.pending_for_merge(feeder) is None
    assert predictions.kept("numa", "merge").text == "whole: misspelt\n"

def test_hints_with_the_exercises_merge_outcome_are_withheld_whatever_else_they_hold(lab_up):
    """Judged by labkit's own merge under the three policies, not by the hints as written: an inert
    extra provider does not make another exercise; hints that merge otherwise are not withheld."""
    trainer = json.loads((SCENARIOS / "merge-trainer.json").read_text())
    inert = {**trainer, "providers": trainer["providers"] + [{"x.io/nic": [{"mask": [0, 1], "preferred": True}]}]}
    assert withhold._canonical(inert["providers"]) != withhold._canonical(trainer["providers"])
    assert withhold.merge_outcome(inert) == withhold.merge_outcome(trainer)
    assert withhold.pending_for_merge(inert) == "merge"
    other = {**trainer, "providers": [{"example.com/gpu": [{"mask": [1], "preferred": True}]}, trainer["providers"][1]]}
    assert withhold.merge_outcome(other) != withhold.merge_outcome(trainer)
    assert withhold.pending_for_merge(other) is None


def with_extra_socket(name: str) -> dict:
    """A shipped machine with one more socket (its own NUMA node, CPUs numbered after the others)."""
    data = json.loads(json.dumps(load_machine(name).to_dict()))
    first = max(t for node in data["topology"] for c in node["cores"] for t in c["thread_ids"]) + 1
    socket = max(c["socket_id"] for node in data["topology"] for c in node["cores"]) + 1
    node = json.loads(json.dumps(data["topology"][0]))
    node["node_id"] = len(data["topology"])
    node.pop("distances", None)
    for other in data["topology"]:
        other.pop("distances", None)
    for i, core in enumerate(node["cores"]):
        core.update(core_id=first + i, socket_id=socket, thread_ids=[first + 2 * i, first + 2 * i + 1])
    data["topology"].append(node)
    data.update(num_cores=data["num_cores"] + 2 * len(node["cores"]),
                num_physical_cores=data["num_physical_cores"] + len(node["cores"]), num_sockets=socket + 1)
    data["memory_capacity"] += node["memory"]
    return data


def test_the_static_cpus_pods_on_a_machine_with_an_extra_socket_are_withheld(lab_up, tmp_path):
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.pods import load_pods

    bigger = machine_from_dict(with_extra_socket("dual-socket-ht"), "<bigger>")
    assert withhold.machine_key(bigger, ("cpu",)) != withhold.machine_key(load_machine("dual-socket-ht"), ("cpu",))
    node = Node(bigger, load_config(SCENARIOS / "kubelet-static.yaml"))
    gate = withhold.Gate("labkit numa admit")
    found = []
    node.admit_all(load_pods(SCENARIOS / "static-pods.yaml"), before=lambda n, pod: found.append(gate.admission(n, pod)))
    assert found[0] == "static-cpus", found          # alpha gets the CPUs it gets on the exercise's machine
    # takeByTopology on that machine, giving a container's exclusive CPUs of the exercise: withheld too
    path = tmp_path / "bigger.json"
    path.write_text(json.dumps(with_extra_socket("dual-socket-ht")))
    assert withhold.pending_for_take(str(path)) is None
    alpha = json.loads(sorted(withhold._static_outcomes())[0])[0]
    assert withhold.pending_for_take(str(path), taken=frozenset(alpha)) == "static-cpus"
    assert withhold.pending_for_take(str(path), taken=frozenset({99})) is None


def test_a_pod_one_of_whose_containers_gets_a_static_cpus_containers_cpus_is_withheld(lab_up, tmp_path):
    """One container asking for one CPU on the exercise's empty machine gets beta/a's CPU (the
    reserved CPU's sibling): `labkit numa admit` showed it, as a Pod-wide comparison of the CPUs
    missed it (beta has a shared container too), while `take` withholds a take giving it."""
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.pods import load_pods

    pod_file = tmp_path / "one.yaml"
    pod_file.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: one}\nspec:\n  containers:\n"
                        "    - name: c\n      image: x\n      resources:\n        limits: {cpu: '1', memory: 1Gi}\n")
    one = load_pods(pod_file)[0]
    node = Node(load_machine("dual-socket-ht"), load_config(SCENARIOS / "kubelet-static.yaml"))
    containers = {json.dumps(cpus) for outcome in withhold._static_outcomes() for cpus in json.loads(outcome)}
    assert json.loads(withhold.static_outcome(node, one))[0] in [json.loads(c) for c in containers if c != '"shared"']
    assert withhold.Gate("labkit numa admit").admission(node, one) == "static-cpus"
    pod_file.write_text(pod_file.read_text().replace("cpu: '1'", "cpu: '3'"))      # 2,6,8: no container's
    assert withhold.Gate("labkit numa admit").admission(node, load_pods(pod_file)[0]) is None


def test_a_pod_whose_admission_merges_the_trainers_hints_is_withheld_while_merge_is_unanswered(lab_up, tmp_path):
    """A Pod with the trainer container's resources on lab-two-node: its admission shows the merge
    exercise's outcome for that container under the node's policy, so admit/show/run withhold it."""
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.pods import load_pods

    pod_file = tmp_path / "mine.yaml"
    pod_file.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: mine}\nspec:\n  containers:\n"
                        "    - name: c\n      image: x\n      resources:\n"
                        "        limits: {cpu: '4', memory: 1Gi, example.com/gpu: '2'}\n")
    mine = load_pods(pod_file)[0]
    node = Node(load_machine("lab-two-node"), load_config(SCENARIOS / "kubelet-config.yaml"))
    gate = withhold.Gate("labkit numa admit")
    assert gate.merge(node, mine) == "merge"
    assert node.admit_all([]) == [] and not node.cpu_state.assignments      # the node is left as it was
    pod_file.write_text(pod_file.read_text().replace("limits: {cpu: '4', memory: 1Gi, ",
                                                     "requests: {cpu: '4', memory: 1Gi}\n        limits: {"))
    assert gate.merge(node, load_pods(pod_file)[0]) is None      # Burstable: no CPU hints, another merge


def test_a_small_guaranteed_pods_admission_is_no_copy_of_the_merge_exercise(lab_up, tmp_path):
    """Its hints merge as the feeder's do, but hold no NIC hints: shown while merge is unanswered."""
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.pods import load_pods

    pod_file = tmp_path / "small.yaml"
    pod_file.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: small}\nspec:\n  containers:\n"
                        "    - name: c\n      image: x\n      resources:\n        limits: {cpu: '2', memory: 1Gi}\n")
    node = Node(load_machine("lab-two-node"), load_config(SCENARIOS / "kubelet-config.yaml"))
    small = load_pods(pod_file)[0]
    feeder = json.loads((SCENARIOS / "merge-feeder.json").read_text())
    assert any(withhold.merge_outcome(d) == withhold.merge_outcome(feeder) for d in withhold.container_hints(node, small))
    assert withhold.Gate("labkit numa admit").merge(node, small) is None


def test_static_cpus_feedback_names_the_rule_but_no_container_until_repeated_tries(lab_up):
    """An exclusive set takeByTopology does not pick: the feedback says which rule it breaks, but
    neither which container nor how many (changing one container's CPUs at a time would find the
    answer); from the third different wrong answer it names one container, the first in admission
    order. A set at odds with the Pod file, the config or the answer itself is named at once."""
    import yaml

    from labkit.exercises import run_check
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    lab = get_lab("numa")
    env = LabEnv(lab, LabState("numa"))
    right = {"alpha/main": "2,8", "beta/a": "6", "beta/b": "shared", "gamma/main": "1,3,7,9", "delta/web": "shared",
             "epsilon/main": "4-5,10"}
    path = answer_path("numa", "static-cpus")
    path.parent.mkdir(parents=True, exist_ok=True)

    def check(pool="0,11", **cpus):
        path.write_text(yaml.safe_dump({"cpus": {**right, **{k.replace("_", "/"): v for k, v in cpus.items()}},
                                        "defaultCpuSet": pool}))
        return run_check(env, lab.exercise("static-cpus"))

    first = check(alpha_main="2,4", pool="0,8,11")
    assert first.status == "fail" and "hyperthread siblings" in first.message
    assert "alpha/main" not in first.message and "1 different wrong answer checked" in first.message
    # 0,8,11 is what this answer's own exclusive sets leave: not "not the CPUs left after every exclusive assignment"
    assert "defaultCpuSet: the CPUs your answer's exclusive sets leave" in first.message
    assert "not the CPUs left" not in first.message
    second = check(alpha_main="2,10", pool="0,8,11")
    assert second.status == "fail" and "alpha/main" not in second.message
    third = check(alpha_main="2,4", gamma_main="1,3,5,7", pool="0,8-9,11")
    assert third.status == "fail" and "3 different wrong answers" in third.message
    assert "alpha/main: hyperthread siblings" in third.message and "gamma/main" not in third.message
    reserved = check(alpha_main="0,2")
    assert reserved.status == "fail" and "alpha/main: CPU 0 is reserved" in reserved.message
    assert check().status == "pass"


def test_a_qos_answer_that_cannot_be_judged_is_not_counted_as_a_wrong_answer(lab_up):
    """A class spelt otherwise, a Pod missing or one the file does not hold: the feedback says what
    the answer must hold, and the pass does not report it as a wrong answer tried (it did: "passed
    after 2 different wrong answers" for two misspellings)."""
    import yaml

    from labkit.exercises import run_check
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    lab = get_lab("numa")
    env = LabEnv(lab, LabState("numa"))
    right = {"web": "Guaranteed", "batch": "BestEffort", "cache": "Guaranteed", "api": "Burstable",
             "migrate": "Burstable", "scratch": "BestEffort"}
    path = answer_path("numa", "qos")
    path.parent.mkdir(parents=True, exist_ok=True)
    for answer in ({**right, "web": "guaranteed"}, {**right, "schema": "BestEffort"}):
        path.write_text(yaml.safe_dump({"qos": answer}))
        result = run_check(env, lab.exercise("qos"))
        assert result.status == "fail" and "one QoS class for each Pod" in result.message, result.message
    path.write_text(yaml.safe_dump({"qos": {**right, "cache": "Burstable"}}))
    assert "1 different wrong answer checked" in run_check(env, lab.exercise("qos")).message
    path.write_text(yaml.safe_dump({"qos": right}))
    result = run_check(env, lab.exercise("qos"))
    assert result.status == "pass" and "passed after 1 different wrong answer had" in result.message, result.message


MERGE_RIGHT = {"trainer": {"best-effort": {"mask": [0, 1], "preferred": False, "admit": True},
                           "restricted": {"mask": [0, 1], "preferred": False, "admit": False},
                           "single-numa-node": {"mask": None, "preferred": False, "admit": False}},
               "feeder": {p: {"mask": [0], "preferred": True, "admit": True}
                          for p in ("best-effort", "restricted", "single-numa-node")}}
MEMORY_RIGHT = {"admitted": {"orders": True, "payments": True, "reports": False, "search": True},
                "memory": {"orders/app": [0], "payments/app": [1], "search/app": [0]}}
STATIC_RIGHT = {"cpus": {"alpha/main": "2,8", "beta/a": "6", "beta/b": "shared", "gamma/main": "1,3,7,9",
                         "delta/web": "shared", "epsilon/main": "4-5,10"}, "defaultCpuSet": "0,11"}


def _malformed(right: dict, path: str, value) -> dict:
    import copy
    out = copy.deepcopy(right)
    *parents, last = path.split(".")
    where = out
    for key in parents:
        where = where[key]
    if value is KeyError:
        del where[last]
    else:
        where[last] = value
    return out


@pytest.mark.parametrize("exercise, right, broken", [
    ("merge", MERGE_RIGHT, [("trainer.restricted.admit", "false"), ("feeder.single-numa-node", KeyError),
                            ("trainer.best-effort.mask", "0,1")]),
    ("memory", MEMORY_RIGHT, [("admitted.orders", "true"), ("memory.search/app", "0"), ("memory.orders/app", KeyError)]),
    ("cpu-hints", {"hints": [{"mask": [0, 1], "preferred": False}]},
     [("hints", [{"mask": [0, 1], "prefered": False}]), ("hints", [{"mask": [0, 1], "preferred": "no"}]),
      ("hints", [{"mask": [2], "preferred": False}])]),
    ("static-cpus", STATIC_RIGHT, [("cpus.epsilon/main", KeyError), ("cpus.beta/a", "6 7"),
                                   ("defaultCpuSet", "zero")]),
])
def test_an_answer_that_cannot_be_read_as_the_exercises_is_not_counted_as_a_wrong_answer(lab_up, exercise, right,
                                                                                          broken):
    """A value of the wrong type (a quoted true, a mask written as a string), a key missing or
    misspelt, a NUMA node the machine lacks: the answer is malformed, its feedback says so, and the
    pass does not report it as a wrong answer tried (they were counted: "passed after 5 different
    wrong answers" for two wrong ones and three of these)."""
    import yaml

    from labkit.exercises import run_check
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    lab = get_lab("numa")
    env = LabEnv(lab, LabState("numa"))
    path = answer_path("numa", exercise)
    path.parent.mkdir(parents=True, exist_ok=True)
    for where, value in broken:
        path.write_text(yaml.safe_dump(_malformed(right, where, value)))
        result = run_check(env, lab.exercise(exercise))
        assert result.status == "fail" and result.details.get("malformed"), (where, result.message)
    path.write_text(yaml.safe_dump(right))
    result = run_check(env, lab.exercise(exercise))
    assert result.status == "pass" and "passed after" not in result.message, result.message


def test_the_memory_pods_asking_for_other_cpus_are_withheld_while_memory_is_unanswered(lab_up, tmp_path):
    """A copy of the memory exercise's Pods under other names, each asking for 2 CPUs instead of 1:
    the Memory Manager places their memory as it places the exercise's (the CPUs do not change the
    merged hint here), and `labkit numa admit` showed all of it. A Pod whose memory differs is shown."""
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.pods import load_pods

    text = (SCENARIOS / "memory-pods.yaml").read_text().replace('cpu: "1"', 'cpu: "2"')
    for old, new in (("orders", "o1"), ("payments", "p1"), ("reports", "r1"), ("search", "s1")):
        text = text.replace(f"name: {old}", f"name: {new}")
    pod_file = tmp_path / "copy.yaml"
    pod_file.write_text(text)
    node = Node(load_machine("lab-two-node"), load_config(SCENARIOS / "kubelet-memory.yaml"))
    gate = withhold.Gate("labkit numa admit")
    found = []
    node.admit_all(load_pods(pod_file), before=lambda n, pod: found.append(gate.admission(n, pod)))
    assert found[0] == "memory", found
    other = tmp_path / "other.yaml"
    other.write_text(pod_file.read_text().split("---")[0].replace("memory: 3Gi", "memory: 1Gi"))
    empty = Node(load_machine("lab-two-node"), load_config(SCENARIOS / "kubelet-memory.yaml"))
    assert withhold.Gate("labkit numa admit").admission(empty, load_pods(other)[0]) is None


def test_a_live_pod_with_a_qos_pods_signature_has_its_class_withheld_when_shown(lab_up, tmp_path):
    """The node agent the lab starts has no resources, as Pod batch of exercise qos: `labkit numa show`
    printed its class (BestEffort) before qos had an answer, as its record was made while no lab ran.
    Its class is judged when shown, by its QoS signature; a Pod unlike every qos Pod shows its class."""
    from labkit.numa.livenode import PodRecord
    from labkit.numa.pods import load_pods
    from labkit.pods import qos_signature

    agent = load_pods(SCENARIOS / "node-agent.yaml")[0]
    record = PodRecord(agent.name, agent.namespace, agent.uid, "BestEffort", [], False,
                       json.dumps(qos_signature(agent), default=str))
    assert not withhold.recorded("qos") and record.shown_qos == "withheld"
    assert PodRecord.from_json(record.to_json()).shown_qos == "withheld"
    pod_file = tmp_path / "odd.yaml"
    pod_file.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: odd}\nspec:\n  containers:\n"
                        "    - name: c\n      image: x\n      resources:\n        requests: {cpu: 100m}\n")
    odd = load_pods(pod_file)[0]
    assert PodRecord("odd", "default", odd.uid, "Burstable", [], False,
                     json.dumps(qos_signature(odd), default=str)).shown_qos == "Burstable"


def test_the_json_of_a_live_pod_whose_class_is_withheld_withholds_its_cgroup_too(lab_up):
    """`labkit numa show -o json` gave the node agent's cgroup, .../kubepods/besteffort/pod<uid>/...,
    next to its withheld class."""
    from types import SimpleNamespace

    from labkit.numa import live_cli
    from labkit.numa.livenode import ContainerRecord, PodRecord
    from labkit.numa.pods import load_pods
    from labkit.pods import qos_signature

    agent = load_pods(SCENARIOS / "node-agent.yaml")[0]
    container = ContainerRecord("agent", False, False, ["sleep", "infinity"], cgroup="/x/kubepods/besteffort/pod1/c1")
    record = PodRecord(agent.name, agent.namespace, agent.uid, "BestEffort", [container], False,
                       json.dumps(qos_signature(agent), default=str))
    view = SimpleNamespace(pod=record, container=container, state="running", pids=[1], exclusive=False,
                           want_cpus=frozenset({0}), want_mems=None, cgroup_cpus=None, proc=None)
    shown = live_cli._view_json(view)
    assert shown["qos"] == "withheld" and "besteffort" not in json.dumps(shown)
