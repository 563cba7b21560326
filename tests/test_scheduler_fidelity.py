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
