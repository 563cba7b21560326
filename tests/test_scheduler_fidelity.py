"""The scheduler reconstruction (labkit/scheduler) against every scheduler case: the shared ones
(shared/fidelity/scheduler, from kube-scheduler's tests and code) and labkit's own
(tests/fidelity/scheduler), each played by `labkit scheduler play`'s code and compared with its
expectations; the command itself on all of them; and the pieces the cases rest on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from labkit.scheduler import framework as fw
from labkit.scheduler.objects import Pod, tolerates
from labkit.scheduler.play import load_case, play
from support import REPO, shared_fidelity

SHARED = shared_fidelity("scheduler")
OWN = REPO / "tests" / "fidelity" / "scheduler"
CASES = sorted(OWN.glob("*.yaml")) + (sorted(SHARED.glob("*.yaml")) if SHARED else [])


def test_the_shared_cases_are_there():
    assert SHARED is not None and len(list(SHARED.glob("*.yaml"))) >= 11, \
        "shared/fidelity/scheduler is missing: it lies beside the repository (LABKIT_FIDELITY_DIR moves it)"


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_every_case_holds(path):
    case = load_case(path)
    assert case["id"] == path.stem
    played = play(case)
    failed = [f"{c.what}: expected {c.want!r}, got {c.got!r}" for c in played.checks if not c.ok]
    assert played.checks and not failed, "\n".join(failed)


def test_the_command_plays_every_case_and_says_so_in_its_exit_code(tmp_path):
    out = subprocess.run([sys.executable, "-m", "labkit", "scheduler", "play", "-o", "json",
                          *sum((["-f", str(p)] for p in CASES), [])], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert [r["id"] for r in json.loads(out.stdout)] == [p.stem for p in CASES]
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text((OWN / "labkit-01-worked-example.yaml").read_text().replace("node: b", "node: a"))
    failed = subprocess.run([sys.executable, "-m", "labkit", "scheduler", "play", "-f", str(wrong)],
                            capture_output=True, text=True, cwd=REPO)
    assert failed.returncode == 1 and "node: expected 'a', got 'b'" in failed.stdout


def test_fit_error_sorts_the_histogram_as_strings_and_counts_absent_nodes():
    statuses = {f"n{i}": fw.Status(fw.UNSCHEDULABLE, ["Insufficient cpu"]) for i in range(10)}
    statuses["x"] = fw.Status(fw.UNSCHEDULABLE, ["Insufficient memory"])
    message = fw.fit_error_message(13, statuses, fw.Status(fw.UNRESOLVABLE, ["node(s) didn't satisfy plugin(s) [NodeAffinity]"]))
    assert message == ("0/13 nodes are available: 1 Insufficient memory, 10 Insufficient cpu, "
                       "2 node(s) didn't satisfy plugin(s) [NodeAffinity].")
    assert fw.fit_error_message(2, statuses, None, pre_filter_msg="pod has unbound immediate PersistentVolumeClaims") == \
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."


def test_tolerations_match_as_the_api_defines():
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    assert tolerates({"key": "dedicated", "operator": "Exists"}, taint)
    assert tolerates({"operator": "Exists"}, taint)                       # empty key + Exists: everything
    assert tolerates({"key": "dedicated", "value": "gpu"}, taint)         # operator defaults to Equal
    assert not tolerates({"key": "dedicated", "value": "cpu"}, taint)
    assert not tolerates({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, taint)


def test_requests_take_the_init_container_peak_with_sidecars_and_overhead():
    pod = Pod({"name": "p", "overhead": {"cpu": "10m"},
               "initContainers": [{"name": "side", "restartPolicy": "Always", "requests": {"cpu": "100m"}},
                                  {"name": "init", "requests": {"cpu": "500m"}}],
               "containers": [{"name": "c", "requests": {"cpu": "200m"}}]})
    # containers + sidecar = 300m; the init container runs beside the sidecar: 600m; plus overhead
    assert pod.requests()["cpu"] == 610
    assert Pod({"name": "bare", "containers": [{"name": "c"}]}).requests(non_zero=True) == {"cpu": 100, "memory": 200 * 1024 * 1024}


def test_num_feasible_nodes_to_find():
    assert [fw.num_feasible_nodes_to_find(n) for n in (50, 1000, 5000, 6000)] == [50, 420, 500, 300]
    assert fw.num_feasible_nodes_to_find(1000, 100) == 1000 and fw.num_feasible_nodes_to_find(200, 10) == 100


def test_explain_shows_every_node_and_score_the_decision_used():
    import random as _random

    from labkit.scheduler.explain import explain
    from labkit.scheduler.play import pod_of, snapshot_of
    from labkit.scheduler.profiles import make_profile

    case = load_case(OWN / "labkit-01-worked-example.yaml")
    nodes, _pods = snapshot_of(case)
    cycle = fw.schedule(make_profile("default"), nodes, pod_of(case["incoming"]), rng=_random.Random(0))
    text = explain(cycle)
    assert "  a                fits" in text and "total: a 424, b 475" in text
    assert "NodeResourcesFit: a 37->37x1=37, b 75->75x1=75" in text and text.endswith("Bound to b: the highest total (475).")
    case = load_case(SHARED / "sched-07-taint-and-insufficient-cpu.yaml")
    nodes, _pods = snapshot_of(case)
    cycle = fw.schedule(make_profile("default"), nodes, pod_of(case["incoming"]))
    text = explain(cycle)
    assert "node-a           TaintToleration: node(s) had untolerated taint {dedicated: gpu} (UnschedulableAndUnresolvable)" in text
    assert text.endswith(case["expect"]["unschedulable"]["message"])


def test_simulate_binds_a_workload_and_spreads_it():
    from labkit.scheduler.simulate import run as simulate

    result = simulate(6, 60, seed=1)
    assert (result.bound, result.unschedulable) == (60, 0)


# -- PodTopologySpread's system default constraints (podtopologyspread/plugin.go systemDefaultConstraints,
# common.go buildDefaultConstraints, helper/spread.go DefaultSelector, scoring.go) ----------------------

def _api_node(name: str, zone: str | None = None) -> dict:
    labels = {"kubernetes.io/hostname": name, **({"topology.kubernetes.io/zone": zone} if zone else {})}
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def _api_pod(name: str, labels: dict, node: str = "", owner: dict | None = None, namespace: str = "default") -> dict:
    meta = {"name": name, "namespace": namespace, "labels": labels, "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [dict(owner, controller=True, uid="uid-owner")]
    spec = {"containers": [{"name": "c", "image": "pause"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec}


def _spread_scores(nodes: list[dict], pods: list[dict], incoming: dict, workloads: dict, profile=None):
    import random as _random

    from labkit.scheduler.objects import Node, NodeInfo
    from labkit.scheduler.profiles import make_profile

    infos = [NodeInfo(Node(n)) for n in nodes]
    by_name = {n.name: n for n in infos}
    for p in pods:
        by_name[p["spec"]["nodeName"]].add(Pod(p))
    profile = profile or make_profile({"plugins": ["PodTopologySpread"]})
    cycle = fw.schedule(profile, infos, Pod(incoming), rng=_random.Random(0), workloads=workloads)
    return cycle, cycle.scores.get("PodTopologySpread")


def test_system_default_spreading_scores_a_pod_a_service_selects():
    """scoring_test.go TestPodTopologySpreadScore, "system defaulting, nodes don't have zone, pods
    match service": matching Pods spread 4/3/2/1 over four nodes without a zone label; the same
    scores as one hostname constraint of maxSkew 3."""
    nodes = [_api_node(n) for n in ("node-a", "node-b", "node-c", "node-d")]
    pods = [_api_pod(f"p-{n[-1]}{i}", {"foo": ""}, n) for n, k in (("node-a", 4), ("node-b", 3), ("node-c", 2),
                                                                    ("node-d", 1)) for i in range(k)]
    service = {"metadata": {"name": "s", "namespace": "default"}, "spec": {"selector": {"foo": ""}}}
    _cycle, scores = _spread_scores(nodes, pods, _api_pod("p", {"foo": ""}), {"services": [service]})
    assert {n: norm for n, (_raw, norm) in scores.items()} == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_system_default_spreading_takes_the_replicaset_selector_and_keeps_nodes_without_a_zone():
    """scoring_test.go TestPreScoreStateEmptyNodes, "system default constraints and a replicaset":
    hostname maxSkew 3 and zone maxSkew 5 with the ReplicaSet's selector; nodes without a zone
    label are not ignored (a zone "" of their own): weights log(4 + 2) and log(2 + 2)."""
    import math

    from labkit.scheduler.plugins import default_selector

    nodes = [_api_node("node-a", "mars"), _api_node("node-b", "mars"), _api_node("node-c"), _api_node("node-d")]
    rs = {"metadata": {"name": "rs1", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"foo": "tar"}}}}
    incoming = _api_pod("p", {"foo": "tar", "baz": "sup"}, owner={"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                                  "name": "rs1"})
    assert default_selector(Pod(incoming), {"replicasets": [rs]}) == \
        {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["tar"]}]}
    cycle, scores = _spread_scores(nodes, [], incoming, {"replicasets": [rs]})
    constraints, weights, counts, ignored = cycle.state["PodTopologySpread/score"]
    assert [(c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"]) for c in constraints] == \
        [("kubernetes.io/hostname", 3, "ScheduleAnyway"), ("topology.kubernetes.io/zone", 5, "ScheduleAnyway")]
    assert weights == [math.log(6), math.log(4)] and counts[1] == {"mars": 0, "": 0} and not ignored
    assert set(scores) == {"node-a", "node-b", "node-c", "node-d"}


def test_no_default_spreading_for_a_bare_pod_an_unknown_owner_or_a_pod_with_constraints_of_its_own():
    """DefaultSelector is empty for a Pod no Service selects and no known controller owns
    (scoring_test.go TestPreScoreSkip: PreScore skips); a Pod with constraints of its own is
    spread by those alone ("default constraints and a replicaset, but pod has constraints")."""
    nodes = [_api_node("node-a", "z1"), _api_node("node-b", "z2")]
    rs = {"metadata": {"name": "rs1", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"foo": "bar"}}}}
    bare = _api_pod("p", {"foo": "bar"})
    cycle, _scores = _spread_scores(nodes, [], bare, {"replicasets": [rs]})
    assert "PodTopologySpread" in cycle.score_skipped
    missing = _api_pod("p", {"foo": "bar"}, owner={"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs2"})
    cycle, _scores = _spread_scores(nodes, [], missing, {"replicasets": [rs]})
    assert "PodTopologySpread" in cycle.score_skipped
    elsewhere = {"metadata": {"name": "s", "namespace": "other"}, "spec": {"selector": {"foo": "bar"}}}
    cycle, _scores = _spread_scores(nodes, [], bare, {"services": [elsewhere, {"metadata": {"name": "x",
                                                                                           "namespace": "default"},
                                                                              "spec": {}}]})
    assert "PodTopologySpread" in cycle.score_skipped
    own = dict(missing, spec=dict(missing["spec"], topologySpreadConstraints=[
        {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"baz": "sup"}}}]))
    own["metadata"] = dict(own["metadata"], ownerReferences=[{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                              "name": "rs1", "controller": True}])
    cycle, _scores = _spread_scores(nodes + [dict(_api_node("node-c"), metadata={"name": "node-c", "labels":
                                                                                {"planet": "mars"}})],
                                    [], own, {"replicasets": [rs]})
    constraints = cycle.state["PodTopologySpread/score"][0]
    assert [c["topologyKey"] for c in constraints] == ["planet"]


def test_list_defaulting_uses_the_given_constraints_and_ignores_nodes_without_their_keys():
    """PodTopologySpreadArgs defaultingType List: args.defaultConstraints (a DoNotSchedule one
    filters); requireAllTopologies holds, so a node without a key is ignored at Score."""
    from labkit.scheduler.profiles import make_profile

    profile = make_profile({"plugins": ["PodTopologySpread"], "pluginConfig": {"PodTopologySpread": {
        "defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}]}}})
    nodes = [_api_node("node-a", "z1"), _api_node("node-b", "z2"), _api_node("node-c")]
    rs = {"metadata": {"name": "rs1", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": "x"}}}}
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1"}
    pods = [_api_pod("x-1", {"app": "x"}, "node-a", owner)]
    cycle, _scores = _spread_scores(nodes, pods, _api_pod("x-2", {"app": "x"}, owner=owner), {"replicasets": [rs]},
                                    profile)
    assert cycle.statuses["node-a"].reasons == ["node(s) didn't match pod topology spread constraints"]
    assert cycle.statuses["node-c"].reasons == \
        ["node(s) didn't match pod topology spread constraints (missing required label)"]
    assert cycle.chosen == "node-b"


def test_spread_scores_round_halves_away_from_zero_as_go_does():
    """scoring.go Score: int64(math.Round(score)); Python's round() would take 2.5 to 2."""
    import math

    from labkit.scheduler.plugins import PodTopologySpread

    plugin = PodTopologySpread()
    node = type("N", (), {"name": "n", "node": type("X", (), {"labels": {"k": "v"}})()})()
    cycle = type("C", (), {"state": {"PodTopologySpread/score": (
        [{"topologyKey": "k", "maxSkew": 1}], [2.5], [{"v": 1}], set())}})()
    assert plugin.score(cycle, None, node) == 3 == math.floor(2.5 + 0.5)
