"""Every prediction exercise of every lab (lab.yaml `withheld_by`), in-process: the lab's own tool
refuses to show the exercise's outcome before an answer is recorded, and names the exercise and its
answer file; once it has shown the outcome, editing the answer file does not change what the check
grades; a reset of the exercise keeps that kept prediction (labkit.runner.reset: one rule for every
lab), and only --forget-prediction forgets it, which the grade details then report.

SHOWS drives, for each exercise, the code path of one of its `withheld_by` tools that decides
whether the outcome is shown (the gate the command calls, with the exercise's own scenario); a
prediction exercise without an entry fails the test."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from labkit import predictions, runner
from labkit.errors import LabkitError
from labkit.exercises import answer_path
from labkit.labs import discover, load_lab


def _prediction_exercises() -> list[tuple[str, str]]:
    out = []
    for lab_id, directory in sorted(discover().items()):
        lab = load_lab(directory)
        out += [(lab.id, ex.id) for ex in lab.exercises if ex.is_prediction]
    return out


PREDICTIONS = _prediction_exercises()


def _lab(lab_id):
    return load_lab(discover()[lab_id])


# -- the gate each tool calls, on the exercise's own scenario: a refusal (text) or None (shown) -------

def _gc(lab, ex):
    from labkit.gc.scenario import load
    from labkit.gc.withhold import gate
    return gate(load(lab.directory / ex.params["experiment"]))


def _scheduler(lab, ex):
    from labkit.scheduler.play import load_case
    from labkit.scheduler.withhold import gate
    path = lab.directory / ex.params["case"]
    return gate(load_case(path), path, "labkit scheduler explain")


def _spread(lab, ex):
    """`labkit scheduler explain POD -n sched` on shop's Pending replica once the constraint the
    prompt asks for is in place: the decision holds spread's outcome."""
    from labkit.scheduler.withhold import spread_exercise_outcome, spread_gate
    outcome = spread_exercise_outcome()
    assert outcome
    return spread_gate(outcome, "Pod sched/shop-x")


def _noexecute(lab, ex):
    """`labkit scheduler play -f` a taint-eviction case of the student's own: node-e's six Pods
    under the drain taint, other names."""
    from labkit.scheduler.withhold import noexecute_gate
    module = lab._load("lab.py")
    pods = [{"name": f"copy-{i}", "nodeName": "n1", "containers": [{"name": "c"}],
             **({"tolerations": t} if t else {})} for i, t in enumerate(module.DRAIN_PODS.values())]
    case = {"id": "mine", "config": "taint-eviction-controller", "expect": {}, "pods": pods,
            "nodes": [{"name": "n1", "allocatable": {}, "taints": [dict(module.DRAIN_TAINT)]}]}
    return noexecute_gate(case, "mine.yaml", "labkit scheduler play")


def _numa_pods(lab, ex):
    from labkit.numa import withhold
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.machine import load_machine
    from labkit.numa.pods import load_pods
    gate = withhold.Gate("labkit numa admit")
    scenarios = lab.directory / "scenarios"
    if ex.id == "qos":
        found = [gate.qos(pod) for pod in load_pods(scenarios / withhold.POD_SCENARIOS["qos"])]
    else:
        machine, config, before, asked = withhold.SITUATIONS[ex.id]
        node = Node(load_machine(machine), load_config(scenarios / config))
        for pod in load_pods(scenarios / before) if before else []:
            node.admit(pod)
        found = []
        for pod in load_pods(scenarios / asked):
            found.append(gate.admission(node, pod))
            node.admit(pod)
    return withhold.message(ex.id) if ex.id in found else None


def _numa_merge(lab, ex):
    from labkit.numa import withhold
    found = withhold.pending_for_merge(json.loads((lab.directory / ex.params["feeder"]).read_text()))
    return withhold.message(found) if found else None


def _resources(lab, ex):
    from labkit.resources import cli, situations
    if ex.id == "weight":           # `labkit resources convert --shares N` with the weight Pod's value
        shares, _weight = situations.weight_values(lab)
        return predictions.refusal(lab.id, ex.id, "the requests") if cli._weight_answer(shares, None) else None
    if ex.id == "qos":              # `labkit resources plan -f` the exercise's Pods
        ours = [p for p in situations.qos_pods(lab).values() if situations.is_qos_pod(lab, p)]
        tool = "labkit resources plan"
    else:                           # `labkit resources evict` on a node running the exercise's Pods
        pods = situations._scenario(lab, ex.params["file"].rsplit("/", 1)[-1], ex.params["node"])
        ours = situations.eviction_pods_among(lab, pods)
        tool = "labkit resources evict"
    assert ours
    return None if situations.reveal(lab, ex.id, tool) else situations.refusal(lab, ex.id, "the outcome")


def _kube_proxy(lab, ex):
    from labkit.kubeproxy.cluster_state import load_scenario
    from labkit.kubeproxy.situations import observed
    from labkit.state import LabEnv, LabState
    state = load_scenario(lab.directory / "scenarios" / "cluster.yaml")
    try:
        observed(LabEnv(lab, LabState(lab.id)), state, None, "192.168.50.12", 30101, "labkit kube-proxy curl")
    except LabkitError as exc:
        return str(exc)
    return None


def _mounts(lab, ex):
    from labkit.mounts import scenario, withhold
    said = []
    assert withhold.guarded(scenario.load(lab.directory / ex.params["scenario"]))
    return None if withhold.release(said.append, "labkit mounts play") else " ".join(said)


def _devices(lab, ex):
    from labkit.devices.play import load_case
    from labkit.devices.withhold import gate
    path = lab.directory / ex.params["case"]
    return gate(load_case(path), path)


TERMINATING_CREATE = """id: refused
title: a create into a namespace being terminated
category: namespace
source: {path: staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go, test: Admit, kind: code}
fidelity: derived
controllers: {namespace: running}
namespaces: [zz]
objects:
  - {ref: keep, apiVersion: v1, kind: ConfigMap, namespace: zz, name: keep, finalizers: [example.com/x]}
  - {ref: ns, apiVersion: v1, kind: Namespace, name: zz, existing: true}
steps:
  - {op: delete, target: ns, body: {}}
  - op: create
    object: {ref: late, apiVersion: v1, kind: ConfigMap, namespace: zz, name: late}
"""


def _namespace(lab, ex):
    """`labkit gc run -f` a scenario of the student's own that deletes a namespace and then creates
    in it (a newcomer's way to see terminating-create's refusal before predicting it)."""
    import tempfile
    from labkit.gc.scenario import load
    from labkit.gc.withhold import gate
    from labkit.namespaces.withhold import gate as terminating_gate
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "refused.yaml"
        path.write_text(TERMINATING_CREATE)
        scenario = load(path)
        return gate(scenario) or terminating_gate(scenario)


SHOWS = {("gc", "predict-dangling"): _gc, ("namespace", "terminating-create"): _namespace,
         ("device-plugins", "checkpoint"): _devices,
         ("scheduler", "score-predict"): _scheduler, ("scheduler", "preempt-predict"): _scheduler,
         ("scheduler", "noexecute"): _noexecute, ("scheduler", "spread"): _spread,
         ("numa", "qos"): _numa_pods, ("numa", "cpu-hints"): _numa_pods, ("numa", "static-cpus"): _numa_pods,
         ("numa", "memory"): _numa_pods, ("numa", "merge"): _numa_merge,
         ("resources", "qos"): _resources, ("resources", "eviction-order"): _resources,
         ("resources", "weight"): _resources,
         ("kube-proxy", "traffic-policy"): _kube_proxy,
         ("mount-propagation", "predict-e2e-matrix"): _mounts}


def test_every_prediction_exercise_is_driven_here():
    assert sorted(SHOWS) == sorted(PREDICTIONS)


def _answer(lab, ex) -> str:
    """An answer the exercise's tools accept as recorded (whole, where a lab asks for that)."""
    if (lab.id, ex.id) == ("kube-proxy", "traffic-policy"):
        nodes = {n: {"answers": True, "client_ip_preserved": False} for n in ("node1", "node2")}
        return yaml.safe_dump({ex.params["cluster_service"]: nodes, ex.params["local_service"]: nodes})
    if lab.id == "mount-propagation":
        return yaml.safe_dump({p: [p] for p in ("host", "master", "slave", "private", "default")})
    if lab.id == "resources":
        from labkit.resources import situations
        if ex.id == "qos":
            pods = situations.qos_pods(lab)
            whole = {"qos": {n: "Burstable" for n in pods},
                     "oom_score_adj": {f"{n}/{c.name}": 1 for n, p in pods.items() for c in p.running_containers()}}
        elif ex.id == "eviction-order":
            whole = {"order": sorted(situations.eviction_pod_names(lab))}
        else:
            whole = {"cgroup_value": 1, "min_millicores": 1, "max_millicores": 2}
        return yaml.safe_dump(whole) + "# first prediction\n"
    if lab.id == "scheduler":       # a whole prediction, which the check can read (withhold.prediction_problem)
        if ex.id == "noexecute":
            return yaml.safe_dump({name: 0 for name in ex.answer_keys}) + "# first prediction\n"
        if ex.id == "spread":
            return yaml.safe_dump({"zones": {"zone-a": 1, "zone-b": 1, "zone-c": 1},
                                   "nodes": {n: "first prediction" for n in ("zone-a-1", "zone-a-2", "zone-b-1",
                                                                             "zone-c-1")}})
        case = yaml.safe_load((lab.directory / ex.params["case"]).read_text())
        nodes = [n["name"] for n in case["nodes"]]
        if ex.id == "score-predict":
            return yaml.safe_dump({"node": nodes[0], "fit": {n: 0 for n in nodes}}) + "# first prediction\n"
        return yaml.safe_dump({"node": nodes[0], "victims": []}) + "# first prediction\n"
    return yaml.safe_dump({"first": "prediction"})


@pytest.fixture
def running(monkeypatch):
    """The lab's state says it is up (numa's tools withhold only while it runs); nothing is built."""
    def up(lab_id):
        state = Path(os.environ["LABKIT_STATE_DIR"]) / lab_id
        state.mkdir(parents=True, exist_ok=True)
        (state / "status.json").write_text(json.dumps({"phase": "up"}))
    return up


@pytest.mark.parametrize("lab_id, exercise_id", PREDICTIONS)
def test_the_tool_withholds_until_answered_then_keeps_the_answer_and_resets_keep_it(lab_id, exercise_id, running,
                                                                                    monkeypatch):
    lab = _lab(lab_id)
    ex = lab.exercise(exercise_id)
    running(lab.id)
    shows = SHOWS[(lab.id, ex.id)]
    path = answer_path(lab.id, ex.id)
    path.unlink(missing_ok=True)
    refused = shows(lab, ex)
    assert refused and ex.id in refused and str(path) in refused, refused
    assert predictions.kept(lab.id, ex.id) is None

    first = _answer(lab, ex)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(first)
    if lab.id == "numa":        # numa records an answer when the exercise's check has seen it
        assert shows(lab, ex)
        predictions.record(lab.id, ex.id, first)
    assert shows(lab, ex) is None                                   # shown now, and the answer kept
    path.write_text(first.replace("prediction", "copied").replace("false", "true").replace("[host]", "[]"))
    assert shows(lab, ex) is None
    assert predictions.graded_text(lab.id, ex.id)[0] == first      # what the check grades
    assert predictions.grade_details(lab.id, ex.id)["prediction_kept"]["by"] in ex.withheld_by

    # a one-exercise reset keeps it (the lab's own reset of its part is not run here: it needs the
    # built lab; tests/test_mistakes.py resets every exercise of every built lab)
    monkeypatch.setattr(runner, "lab_is_up", lambda env: True)
    monkeypatch.setattr(runner, "require_prerequisites", lambda lab: None)
    reset = []
    module = SimpleNamespace(reset_exercise=lambda env, exercise: reset.append(exercise))
    monkeypatch.setattr(type(lab), "environment_module", lambda self: module)
    runner.reset(lab, exercise_id=ex.id)
    assert reset == [ex.id] and predictions.kept(lab.id, ex.id).text == first
    assert runner.kept_predictions(lab, ex.id) == [ex.id]

    said = []
    runner.reset(lab, exercise_id=ex.id, forget_prediction=True, say=said.append)
    assert predictions.kept(lab.id, ex.id) is None and any("forgot your" in s for s in said)
    assert predictions.grade_details(lab.id, ex.id)["predictions_forgotten"][0]["why"] == \
        "labkit reset --forget-prediction"
    path.unlink()
    assert shows(lab, ex), "withheld again once forgotten"


def test_forget_prediction_is_refused_for_an_exercise_that_predicts_nothing(monkeypatch):
    lab = _lab("gc")
    other = next(ex for ex in lab.exercises if not ex.is_prediction)
    monkeypatch.setattr(runner, "require_prerequisites", lambda lab: None)
    with pytest.raises(LabkitError, match=f"exercise {other.id} predicts nothing"):
        runner.reset(lab, exercise_id=other.id, forget_prediction=True)
