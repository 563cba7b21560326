"""Which cases `labkit scheduler explain` and `play` withhold before a prediction is written
(labkit.scheduler.withhold), in-process: the cases of score-predict and preempt-predict, and any
case that shows part of their outcome, whatever its names, with nodes added or left out."""

from __future__ import annotations

import copy

import pytest

from labkit.inputs import load_yaml
from labkit.labs import get_lab
from labkit.scheduler import withhold

CASES = {"score-predict": "score.yaml", "preempt-predict": "preempt.yaml"}
TINY = {"name": "tiny", "labels": {"kubernetes.io/hostname": "tiny"},
        "allocatable": {"cpu": "100m", "memory": "1Gi", "pods": "110"}}


def _case(exercise: str) -> dict:
    return load_yaml(get_lab("scheduler").directory / "scenarios" / CASES[exercise])


def _renamed(case: dict) -> dict:
    case = copy.deepcopy(case)
    names = {n["name"]: f"w{i}" for i, n in enumerate(case["nodes"])}
    for n in case["nodes"]:
        n["name"] = names[n["name"]]
        n["labels"]["kubernetes.io/hostname"] = n["name"]
    for i, p in enumerate(case.get("pods") or []):
        p["name"], p["nodeName"] = f"p{i}", names[p["nodeName"]]
    case["incoming"]["name"] = "mine"
    return case


@pytest.mark.parametrize("exercise", sorted(CASES))
def test_the_case_a_renamed_copy_and_copies_with_nodes_added_or_left_out_are_the_exercises(exercise):
    case = _case(exercise)
    assert withhold.exercise_of(case)[0] == exercise
    assert withhold.exercise_of(_renamed(case))[0] == exercise
    bigger = copy.deepcopy(case)
    bigger["nodes"].append(TINY)            # a node the incoming Pod fits nowhere: the same decision
    assert withhold.exercise_of(bigger)[0] == exercise
    for node in case["nodes"]:              # each node alone shows its score, or its victims
        alone = copy.deepcopy(case)
        alone["nodes"] = [n for n in alone["nodes"] if n["name"] == node["name"]]
        alone["pods"] = [p for p in alone.get("pods") or [] if p["nodeName"] == node["name"]]
        assert withhold.exercise_of(alone)[0] == exercise, node["name"]


@pytest.mark.parametrize("exercise", sorted(CASES))
def test_another_incoming_pod_or_other_pods_on_every_node_make_another_case(exercise):
    case = _case(exercise)
    other = copy.deepcopy(case)
    other["incoming"]["containers"][0]["requests"]["cpu"] = "250m"
    assert withhold.exercise_of(other) is None
    moved = copy.deepcopy(case)
    for n in moved["nodes"]:
        n["allocatable"] = {**n["allocatable"], "cpu": "32"}
    assert withhold.exercise_of(moved) is None



def _near_copies(case: dict) -> dict:
    """Hand edits of the score case that leave every node's scores as they are, or a point off."""
    out = {}
    written = copy.deepcopy(case)           # the same quantities, written otherwise
    written["incoming"]["containers"][0]["requests"] = {"cpu": "1000m", "memory": "2048Mi"}
    for n in written["nodes"]:
        n["allocatable"] = {**n["allocatable"], "cpu": f"{int(n['allocatable']['cpu']) * 1000}m"}
    for p in written["pods"]:
        p["containers"][0]["requests"]["memory"] = f"{int(p['containers'][0]['requests']['memory'][:-2]) * 1024}Mi"
    out["quantities written otherwise"] = written
    split = copy.deepcopy(case)             # each Pod's requests split between two Pods
    for i, pod in enumerate(list(split["pods"])):
        asked = pod["containers"][0]["requests"]
        half = {"cpu": f"{int(asked['cpu']) * 500}m", "memory": f"{int(asked['memory'][:-2]) * 512}Mi"}
        pod["containers"][0]["requests"] = dict(half)
        split["pods"].append({"name": f"twin-{i}", "nodeName": pod["nodeName"],
                              "containers": [{"name": "c", "requests": dict(half)}]})
    spare = next(n["name"] for n in split["nodes"] if all(p["nodeName"] != n["name"] for p in split["pods"]))
    split["pods"].append({"name": "speck", "nodeName": spare,          # and a Pod too small to change a score
                          "containers": [{"name": "c", "requests": {"cpu": "10m", "memory": "1Mi"}}]})
    out["a Pod split in two"] = split
    more = copy.deepcopy(case)              # a few MiB more on every Pod and a label
    for p in more["pods"]:
        p["containers"][0]["requests"]["memory"] = f"{int(p['containers'][0]['requests']['memory'][:-2]) * 1024 + 3}Mi"
        p["labels"] = {"edited": "yes"}
    for n in more["nodes"]:
        n["allocatable"] = {**n["allocatable"], "memory": f"{int(n['allocatable']['memory'][:-2]) * 1024 + 3}Mi"}
    out["a few MiB more"] = more
    return out


@pytest.mark.parametrize("edit", ["quantities written otherwise", "a Pod split in two", "a few MiB more"])
def test_hand_edited_near_copies_of_the_score_case_are_withheld(edit):
    case = _case("score-predict")
    assert withhold.exercise_of(_near_copies(case)[edit])[0] == "score-predict"


def test_the_shared_cases_and_labkits_own_are_not_withheld():
    from support import shared_fidelity
    from pathlib import Path
    own = Path(__file__).resolve().parent / "fidelity" / "scheduler"
    paths = sorted(own.glob("*.yaml")) + sorted((shared_fidelity("scheduler") or own).glob("*.yaml"))
    assert paths
    assert [p.name for p in paths if withhold.exercise_of(load_yaml(p))] == []


def _preempt_near_copies(case: dict) -> dict:
    """Hand edits of the preemption case that leave every node's victims as they are."""
    out = {}
    written = copy.deepcopy(case)           # the same quantities, written otherwise, and new names
    written["incoming"]["containers"][0]["requests"] = {"cpu": "3000m", "memory": "1024Mi"}
    written["incoming"]["name"] = "vip"
    for p in written["pods"]:
        p["containers"][0]["requests"] = {"cpu": f"{int(p['containers'][0]['requests']['cpu']) * 1000}m",
                                          "memory": "1024Mi"}
    out["quantities written otherwise"] = written
    renumbered = copy.deepcopy(case)        # the priorities renumbered, in the same order
    for p in renumbered["pods"]:
        p["priority"] = p["priority"] * 3 + 7
    renumbered["incoming"]["priority"] = 5000
    out["priorities renumbered"] = renumbered
    # the incoming Pod, or the nodes, with another quantity that does not bind: the same victims
    more_memory = copy.deepcopy(case)
    more_memory["incoming"]["containers"][0]["requests"]["memory"] = "2Gi"
    out["incoming asks more memory"] = more_memory
    less_cpu = copy.deepcopy(case)
    less_cpu["incoming"]["containers"][0]["requests"]["cpu"] = "2500m"
    out["incoming asks less cpu"] = less_cpu
    bigger = copy.deepcopy(case)
    for n in bigger["nodes"]:
        n["allocatable"] = {**n["allocatable"], "memory": "16Gi"}
    out["nodes with more memory"] = bigger
    return out


@pytest.mark.parametrize("edit", ["quantities written otherwise", "priorities renumbered", "incoming asks more memory",
                                  "incoming asks less cpu", "nodes with more memory"])
def test_hand_edited_near_copies_of_the_preemption_case_are_withheld(edit):
    case = _case("preempt-predict")
    near = _preempt_near_copies(case)[edit]
    assert withhold._node_shapes(near) != withhold._node_shapes(case) or withhold._incoming(near) != \
        withhold._incoming(case)            # not the same case under other names: a near-copy
    assert withhold.exercise_of(near)[0] == "preempt-predict"


def test_a_preemption_case_that_evicts_other_pods_is_not_withheld():
    case = _case("preempt-predict")
    other = copy.deepcopy(case)
    other["incoming"]["containers"][0]["requests"] = {"cpu": "1", "memory": "1Gi"}
    assert withhold.exercise_of(other) is None


def _live(case: dict, namespace: str = "copy") -> tuple[list, object]:
    """The case as the live scheduler would meet it, built by hand in the lab: API-shaped Nodes
    (status.allocatable) and Pods (resources.requests, the default not-ready/unreachable
    tolerations admission adds, priority 0), in a namespace of the student's."""
    from labkit.scheduler.objects import Node, NodeInfo, Pod

    default = [{"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300} for k in ("not-ready", "unreachable")]

    def pod(p: dict, node: str | None) -> dict:
        spec = {"priority": p.get("priority", 0), "tolerations": default + list(p.get("tolerations") or []),
                "containers": [{"name": c["name"], "resources": {"requests": c["requests"]}} for c in p["containers"]]}
        if node:
            spec["nodeName"] = node
        return {"metadata": {"name": p["name"], "namespace": namespace, "uid": f"u-{p['name']}"}, "spec": spec}
    nodes = [NodeInfo(Node({"metadata": {"name": n["name"], "labels": n["labels"]},
                            "spec": {"taints": n.get("taints") or []},
                            "status": {"allocatable": n["allocatable"]}})) for n in case["nodes"]]
    by_name = {n.name: n for n in nodes}
    for p in case.get("pods") or []:
        by_name[p["nodeName"]].add(Pod(pod(p, p["nodeName"])))
    return nodes, Pod(pod(case["incoming"], None))


@pytest.mark.parametrize("exercise", sorted(CASES))
def test_a_live_decision_on_a_copy_of_the_case_built_in_the_lab_is_the_exercises(exercise):
    """`labkit scheduler explain POD` gates the situation the live decision was made in
    (explain.situation of the controller's cycle) as `explain -f` gates a case: a copy of the case
    made with kubectl, Pods carrying the tolerations admission adds, is the exercise's."""
    import random

    from labkit.scheduler import framework as fw
    from labkit.scheduler.explain import situation
    from labkit.scheduler.profiles import make_profile

    case = _case(exercise)
    nodes, incoming = _live(case)
    cycle = fw.schedule(make_profile("default"), nodes, incoming, pdbs=case.get("pdbs"), rng=random.Random(0))
    assert withhold.exercise_of(situation(cycle))[0] == exercise
    other = copy.deepcopy(case)
    other["incoming"]["containers"][0]["requests"]["cpu"] = "250m"
    nodes, incoming = _live(other)
    cycle = fw.schedule(make_profile("default"), nodes, incoming, pdbs=case.get("pdbs"), rng=random.Random(0))
    assert withhold.exercise_of(situation(cycle)) is None


def test_a_decision_with_spreads_outcome_waits_for_the_spread_answer_whatever_the_names():
    """spread asks, for shop's Pending replica, the zone counts and each pool node's Filter reason:
    a decision with that outcome (explain.spread_outcome, without names) is withheld until spread's
    answer is written, and that answer is then kept; the same pool with its zones and nodes renamed
    has the same outcome; another outcome (the shared spread case's) is shown."""
    import random

    from labkit import predictions
    from labkit.exercises import answer_path
    from labkit.scheduler import framework as fw
    from labkit.scheduler.explain import spread_outcome
    from labkit.scheduler.objects import Node, NodeInfo, Pod
    from labkit.scheduler.profiles import make_profile

    spread = "node(s) didn't match pod topology spread constraints"
    truth = withhold.spread_exercise_outcome()
    assert truth == [[1, ["Insufficient cpu"]], [2, [spread]], [2, [spread, spread]]]
    # the pool renamed: zones x, y, z and nodes n1..n4, the replicas already placed 2/2/1
    zones = {"n1": ("x", "4"), "n2": ("x", "4"), "n3": ("y", "4"), "n4": ("z", "1500m")}
    nodes = [NodeInfo(Node({"metadata": {"name": n, "labels": {"topology.kubernetes.io/zone": z,
                                                               "kubernetes.io/hostname": n}},
                            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}))
             for n, (z, cpu) in zones.items()]

    def replica(i, node=None):
        spec = {"topologySpreadConstraints": [withhold.SPREAD_CONSTRAINT],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}]}
        return Pod({"metadata": {"name": f"r{i}", "namespace": "mine", "labels": {"app": "shop"}},
                    "spec": dict(spec, **({"nodeName": node} if node else {}))})
    for i, node in enumerate(("n1", "n2", "n3", "n3", "n4")):
        next(n for n in nodes if n.name == node).add(replica(i, node))
    cycle = fw.schedule(make_profile("default"), nodes, replica(9), rng=random.Random(0))
    assert spread_outcome(cycle) == truth
    assert withhold.spread_gate([[0, ["fits"]]], "Pod sched/other") is None
    assert withhold.spread_gate(None, "Pod sched/bound") is None
    refusal = withhold.spread_gate(spread_outcome(cycle), "Pod mine/r9")
    assert refusal.startswith("Pod mine/r9: its zones and each node's Filter reason") and "exercise spread" in refusal
    assert "Insufficient" not in refusal
    path = answer_path("scheduler", "spread")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("zones: {zone-a: 3, zone-b: 2, zone-c: 1}\nnodes: {zone-a-1: x, zone-a-2: x, zone-b-1: x, zone-c-1: x}\n")
    assert withhold.spread_gate(spread_outcome(cycle), "Pod mine/r9") is None
    path.write_text("zones: {zone-a: 2, zone-b: 2, zone-c: 1}\nnodes: {zone-a-1: x, zone-a-2: x, zone-b-1: x, zone-c-1: x}\n")
    assert predictions.kept("scheduler", "spread").text == "zones: {zone-a: 3, zone-b: 2, zone-c: 1}\nnodes: {zone-a-1: x, zone-a-2: x, zone-b-1: x, zone-c-1: x}\n"



SPREAD_WHOLE = "zones: {zone-a: 2, zone-b: 2, zone-c: 1}\nnodes: {zone-a-1: x, zone-a-2: x, zone-b-1: x, zone-c-1: x}\n"


@pytest.mark.parametrize("broken, problem", [
    (SPREAD_WHOLE.replace("zone-c-1:", "zone-c1:"), "nodes: 'zone-c1' is not a node of the pool"),
    (SPREAD_WHOLE.replace(", zone-c-1: x", ""), "nodes: zone-c-1 is missing"),
    (SPREAD_WHOLE.replace("zone-b: 2", "zone-b1: 2"), "zones: 'zone-b1' is not a zone of the pool"),
    (SPREAD_WHOLE.replace(", zone-c: 1", ""), "zones: zone-c is missing"),
    (SPREAD_WHOLE.replace("zone-b-1: x", "zone-b-1: ''"), "nodes: zone-b-1 has no reason")])
def test_a_spread_answer_the_check_cannot_read_is_no_answer_the_outcome_is_shown_for(broken, problem):
    """spread's check refuses an answer whose zones or nodes are not the pool's (a misspelt or
    missing one) before it judges anything: explain must not show spread's outcome for such an
    answer nor keep it (kept, it could only fail), and says what is wrong with it."""
    from labkit import predictions
    from labkit.exercises import answer_path
    outcome = withhold.spread_exercise_outcome()
    path = answer_path("scheduler", "spread")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(broken)
    refused = withhold.spread_gate(outcome, "Pod mine/r9")
    assert refused and "not a whole answer yet" in refused and problem in refused, refused
    assert predictions.kept("scheduler", "spread") is None
    path.write_text(SPREAD_WHOLE)
    assert withhold.spread_gate(outcome, "Pod mine/r9") is None
    assert predictions.kept("scheduler", "spread").text == SPREAD_WHOLE


# -- noexecute: a Pod that tolerates as one of node-e's six, under a NoExecute taint of the drain key --

def _drain():
    module = get_lab("scheduler")._load("lab.py")
    return dict(module.DRAIN_TAINT), {name: list(t) for name, t in module.DRAIN_PODS.items()}


def _eviction_case(tolerations: dict, taint: dict) -> dict:
    return {"id": "mine", "config": withhold.EVICTION_CASE, "expect": {},
            "nodes": [{"name": "n1", "allocatable": {}, "taints": [taint]}],
            "pods": [{"name": f"p-{name}", "nodeName": "n1", "containers": [{"name": "c"}],
                      **({"tolerations": t} if t else {})} for name, t in tolerations.items()]}


def test_each_of_node_es_pods_copied_under_the_drain_key_is_noexecutes_and_other_taints_are_not():
    taint, six = _drain()
    for name, tolerations in six.items():
        assert withhold.noexecute_reveals(_eviction_case({name: tolerations}, taint)), name
        other_value = dict(taint, value="whenever")
        assert withhold.noexecute_reveals(_eviction_case({name: tolerations}, other_value)), name
        # under a taint of another key, tolerations that name drain are no copy (the wildcard,
        # which names every key, is one under any taint: renamed_copies_of_the_six below)
        other_key = dict(taint, key="labkit.example/elsewhere")
        if name != "wildcard":
            assert not withhold.noexecute_reveals(_eviction_case({name: tolerations}, other_key)), name
        no_execute_elsewhere = dict(taint, effect="NoSchedule")
        assert not withhold.noexecute_reveals(_eviction_case({name: tolerations}, no_execute_elsewhere)), name
    # tolerations written otherwise to the same effect: the same verdicts under every drain taint
    same = {"stubborn, without its effect": [{"key": taint["key"], "operator": "Exists"}],
            "patient, with the default toleration too": [*six["patient"], {
                "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}]}
    for what, tolerations in same.items():
        assert withhold.noexecute_reveals(_eviction_case({"x": tolerations}, taint)), what
    # a Pod that behaves as none of the six (another tolerationSeconds) is shown
    sixty = [dict(six["patient"][0], tolerationSeconds=60)]
    assert not withhold.noexecute_reveals(_eviction_case({"x": sixty}, taint))


def _drain_renamed(tolerations: list, key: str, values: dict) -> list:
    return [dict(t, key=key, **({"value": values.get(t["value"], t["value"])} if t.get("value") else {}))
            if t.get("key") == "drain" else dict(t) for t in tolerations]


def test_renamed_copies_of_the_six_under_a_taint_of_another_key_are_noexecutes():
    """The six copied under `retire=soon:NoExecute`, each toleration of drain renamed with it (and
    other-value's value too): the controller treats each copy as it treats its original under
    the drain taint, so a case holding one that tolerates anything shows noexecute's outcome
    whatever the key (before, only the key drain was withheld: `play` showed every copy's time)."""
    taint, six = _drain()
    renamed_taint = {"key": "retire", "value": "soon", "effect": "NoExecute"}
    for values in ({taint["value"]: "soon"}, {taint["value"]: "soon", "later": "afterwards"}):
        for name, tolerations in six.items():
            if not tolerations:       # plain: a Pod that tolerates nothing goes at once under any taint (the README says so)
                continue
            copy_ = _drain_renamed(tolerations, "retire", values)
            assert withhold.noexecute_reveals(_eviction_case({name: copy_}, renamed_taint)), (name, copy_)
    # what names neither the taint's key nor every key is no copy: the fidelity case's Pod without
    # tolerations, and a Pod that tolerates the renamed taint for another number of seconds
    assert not withhold.noexecute_reveals(_eviction_case({"bare": []}, renamed_taint))
    sixty = [{"key": "retire", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]
    assert not withhold.noexecute_reveals(_eviction_case({"x": sixty}, renamed_taint))
    # as the incoming Pod of a scheduling case, next to a node with the renamed taint
    case = {"id": "mine", "expect": {}, "nodes": [{"name": "n1", "allocatable": {"cpu": "1"},
                                                   "taints": [renamed_taint]}],
            "incoming": {"name": "x", "containers": [{"name": "c", "requests": {"cpu": "100m"}}],
                         "tolerations": _drain_renamed(six["patient"], "retire", {})}}
    assert withhold.noexecute_reveals(case)


def test_a_scheduling_case_whose_incoming_pod_tolerates_as_one_of_the_six_next_to_a_drain_taint_is_noexecutes():
    taint, six = _drain()
    case = {"id": "mine", "expect": {}, "nodes": [{"name": "n1", "allocatable": {"cpu": "1"}, "taints": [taint]}],
            "incoming": {"name": "x", "containers": [{"name": "c", "requests": {"cpu": "100m"}}],
                         "tolerations": six["other-value"]}}
    assert withhold.noexecute_reveals(case)
    case["nodes"][0]["taints"] = []
    assert not withhold.noexecute_reveals(case)


def test_the_shared_noexecute_case_is_played_and_the_gate_keeps_the_prediction(monkeypatch, tmp_path):
    from support import shared_fidelity
    from labkit import predictions
    from labkit.exercises import answer_path
    from pathlib import Path
    shared = shared_fidelity("scheduler") or Path(__file__).resolve().parent / "fidelity" / "scheduler"
    for path in sorted(shared.glob("*.yaml")):
        assert not withhold.noexecute_reveals(load_yaml(path)), path.name
    taint, six = _drain()
    case = _eviction_case(six, taint)
    answer_path("scheduler", "noexecute").unlink(missing_ok=True)
    refused = withhold.noexecute_gate(case, "mine.yaml", "labkit scheduler play")
    assert refused and "noexecute" in refused and str(answer_path("scheduler", "noexecute")) in refused
    assert "never" not in refused and "120" not in refused
    answer_path("scheduler", "noexecute").parent.mkdir(parents=True, exist_ok=True)
    answer_path("scheduler", "noexecute").write_text("".join(f"{name}: 0\n" for name in six))
    assert withhold.noexecute_gate(case, "mine.yaml", "labkit scheduler play") is None
    assert predictions.kept("scheduler", "noexecute").text == "".join(f"{name}: 0\n" for name in six)


def test_labkit_scheduler_play_refuses_a_copy_of_node_es_pods_under_the_drain_taint_then_plays_it(tmp_path):
    """The command a student runs: `labkit scheduler play -f` their own taint-eviction case says
    what it withholds and why (the exercise, the answer file), exit 1, without an eviction time;
    with a prediction written it plays the case."""
    import yaml
    from typer.testing import CliRunner

    from labkit.cli import app
    from labkit.exercises import answer_path
    taint, six = _drain()
    path = tmp_path / "mine.yaml"
    case = _eviction_case(six, taint)
    case["expect"] = {"evicted_after_seconds": {"p-plain": 0}}
    path.write_text(yaml.safe_dump(case))
    answer_path("scheduler", "noexecute").unlink(missing_ok=True)
    refused = CliRunner().invoke(app, ["scheduler", "play", "-f", str(path)], prog_name="labkit")
    assert refused.exit_code == 1 and "exercise noexecute" in refused.output, refused.output
    assert str(answer_path("scheduler", "noexecute")) in refused.output and "evicted" not in refused.output
    answer_path("scheduler", "noexecute").parent.mkdir(parents=True, exist_ok=True)
    answer_path("scheduler", "noexecute").write_text("".join(f"{name}: 0\n" for name in six))
    shown = CliRunner().invoke(app, ["scheduler", "play", "-f", str(path), "-o", "json"], prog_name="labkit")
    assert shown.exit_code == 0 and "evicted_after_seconds" in shown.output, shown.output


@pytest.mark.parametrize("exercise, broken, whole", [
    ("score-predict", "node: node1\nfit: {node-1: 50, node-2: 49, node-3: 93}\n",
     "node: node-2\nfit: {node-1: 1, node-2: 2, node-3: 3}\n"),
    ("score-predict", "node: node-1\nfit: {node-1: 50, node-2: 49}\n",
     "node: node-3\nfit: {node-1: 0, node-2: 0, node-3: 100}\n"),
    ("preempt-predict", "node: node-1\nvictims: [batch_a]\n", "node: node-2\nvictims: []\n"),
    ("preempt-predict", "node: node-1\nvictim: [batch-a]\n", "node: node-1\nvictims: [web-a]\n")])
def test_an_answer_the_check_cannot_read_is_no_prediction_the_case_is_shown_for(exercise, broken, whole):
    """A misspelt node or Pod, a missing part or key: the check refuses such an answer as
    malformed, so explain does not show the case for it nor keep it (kept, it could only fail),
    and says what is wrong with it; a whole prediction, right or wrong, is shown and kept."""
    from labkit import predictions
    from labkit.exercises import answer_path
    path = answer_path("scheduler", exercise)
    path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(broken)
    refused = withhold.gate(_case(exercise), "mine.yaml")
    assert refused and "not a whole prediction yet" in refused, refused
    assert predictions.kept("scheduler", exercise) is None
    path.write_text(whole)
    assert withhold.gate(_case(exercise), "mine.yaml") is None
    assert predictions.kept("scheduler", exercise).text == whole


def test_a_noexecute_answer_with_a_time_of_another_form_is_no_prediction_yet():
    from labkit import predictions
    from labkit.exercises import answer_path
    taint, six = _drain()
    case = _eviction_case(six, taint)
    path = answer_path("scheduler", "noexecute")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{name}: 0\n" for name in six).replace("patient: 0", "patient: 120s"))
    refused = withhold.noexecute_gate(case, "mine.yaml", "labkit scheduler play")
    assert refused and "patient is neither" in refused and predictions.kept("scheduler", "noexecute") is None
    path.write_text("".join(f"{name}: never\n" for name in six))
    assert withhold.noexecute_gate(case, "mine.yaml", "labkit scheduler play") is None
