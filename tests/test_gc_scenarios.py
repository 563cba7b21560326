"""Every shared garbage-collector scenario (fidelity/gc/) played on a fresh embedded server, the
namespace scenarios (fidelity/namespace/), scenarios of this repository, and the runner itself."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from labkit.gc.runner import run_scenario
from support import labkit, shared_fidelity

HERE = Path(__file__).resolve().parent


GC_DIR, NS_DIR = shared_fidelity("gc"), shared_fidelity("namespace")
GC_CASES = sorted(GC_DIR.glob("*.yaml")) if GC_DIR else []
NS_CASES = sorted(NS_DIR.glob("*.yaml")) if NS_DIR else []
OWN_CASES = sorted((HERE / "scenarios").glob("*.yaml"))
# scenarios that take upstream's real minute-long timings (the pod GC's 40 s quarantine and 20 s
# period): played only when asked for, LABKIT_SLOW_SCENARIOS=1
SLOW_CASES = sorted((HERE / "scenarios" / "slow").glob("*.yaml"))
# The time in which the controllers only wait (the namespace controller's 5 s grace period and
# estimate/2+1 s requeues, the GC's backoffs, a scenario's `wait: {for: 15s}`) is skipped: the
# controllers run on a clock the runner moves ahead (labkit.gc.runner.EmbeddedTarget); in real
# time, as `labkit gc run` plays them, with LABKIT_SLOW_SCENARIOS=1.
REAL_TIME = os.environ.get("LABKIT_SLOW_SCENARIOS") == "1"


def play(path):
    return run_scenario(path, skip_idle_time=not REAL_TIME)


needs_fidelity = pytest.mark.skipif(GC_DIR is None or NS_DIR is None, reason="the shared fidelity scenarios (shared/fidelity beside "
                                    "the repository, or LABKIT_FIDELITY_DIR) are not on this machine")


def explain(report) -> str:
    return "\n".join(report.failures()) + "\n" + json.dumps(report.as_dict()["steps"], indent=1)


@needs_fidelity
def test_all_shared_gc_scenarios_are_found():
    assert len(GC_CASES) >= 7


@needs_fidelity
@pytest.mark.parametrize("path", GC_CASES, ids=lambda p: p.stem)
def test_shared_gc_scenario(path):
    report = play(path)
    assert report.passed, explain(report)


@needs_fidelity
def test_all_shared_namespace_scenarios_are_found():
    assert len(NS_CASES) >= 4


@pytest.fixture(scope="module")
def namespace_reports():
    """Every namespace scenario (shared and this repository's), played at once, each on its own
    embedded server: in real time they spend most of their time waiting for the namespace
    controller's upstream delays (5 s after a change, 8 s between passes), so playing them one
    after another would only add those waits up."""
    from concurrent.futures import ThreadPoolExecutor
    cases = NS_CASES + [p for p in OWN_CASES if p.stem.startswith("ns-")]
    with ThreadPoolExecutor(max_workers=len(cases) or 1) as pool:
        return dict(zip(cases, pool.map(play, cases)))


@needs_fidelity
@pytest.mark.parametrize("path", NS_CASES, ids=lambda p: p.stem)
def test_shared_namespace_scenario(path, namespace_reports):
    report = namespace_reports[path]
    assert report.passed, explain(report)


@pytest.mark.parametrize("path", OWN_CASES, ids=lambda p: p.stem)
def test_repository_scenario(path, request):
    report = request.getfixturevalue("namespace_reports")[path] if path.stem.startswith("ns-") else play(path)
    assert report.passed, explain(report)


# Real-time scenarios (PodGC's 40 s quarantine and 20 s period): opt-in, LABKIT_SLOW_SCENARIOS=1;
# not collected otherwise, so the default suite reports no skip.
if os.environ.get("LABKIT_SLOW_SCENARIOS") == "1":
    @pytest.mark.parametrize("path", SLOW_CASES, ids=lambda p: p.stem)
    def test_slow_repository_scenario(path):
        report = run_scenario(path)
        assert report.passed, explain(report)


def _variant(tmp_path: Path, source: Path, name: str, change) -> Path:
    data = yaml.safe_load(source.read_text())
    data["id"] = name
    change(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_scenario_fails_when_the_gc_does_not_do_its_work(tmp_path):
    source = HERE / "scenarios" / "gc-owner-never-existed.yaml"

    def stop_gc(data):
        data["controllers"] = {"garbagecollector": "stopped"}
        data["steps"][0]["timeout_s"] = 1
    report = play(_variant(tmp_path, source, "variant-gc-stopped", stop_gc))
    assert not report.passed
    failed = {c.what for c in report.checks if not c.ok}
    assert {"absent orphaned", "object shared"} <= failed
    assert not report.steps[0]["ok"] and "not true after 1 s" in report.steps[0]["detail"]


def test_a_namespace_scenario_fails_when_the_namespace_controller_does_not_run(tmp_path):
    source = HERE / "scenarios" / "ns-extra-spec-finalizer.yaml"

    def stop_namespace_controller(data):
        data["controllers"]["namespace"] = "stopped"
        data["steps"][2]["timeout_s"] = 1
    report = play(_variant(tmp_path, source, "variant-ns-stopped", stop_namespace_controller))
    assert not report.passed
    assert not report.steps[2]["ok"] and "not true after 1 s" in report.steps[2]["detail"]
    # the scenario's last step empties spec.finalizers: without the controller that force-finalizes
    # the namespace, and its ConfigMap stays behind in storage
    assert {c.what for c in report.checks if not c.ok} == {"absent cm"}


def test_an_invariant_that_does_not_hold_is_reported(tmp_path):
    source = HERE / "scenarios" / "runner-format-additions.yaml"

    def wrong_invariant(data):
        data["expect"]["invariants"] = [{"while": "present(gen)", "then": 'finalizers(gen) == ["foregroundDeletion"]'}]
    report = play(_variant(tmp_path, source, "variant-wrong-invariant", wrong_invariant))
    assert not report.passed
    (invariant,) = report.invariants
    assert not invariant["ok"] and invariant["detail"].startswith("violated")


def test_unsupported_requirements_fail_at_once(tmp_path):
    source = HERE / "scenarios" / "gc-owner-never-existed.yaml"
    path = _variant(tmp_path, source, "variant-needs-more", lambda d: d.update(requires=["no-such-feature"]))
    report = run_scenario(path)
    assert not report.passed and report.unsupported.startswith("requires no-such-feature")


def _prediction_written() -> None:
    """A prediction of exercise predict-dangling in this test's answers directory: `labkit gc run`
    then plays scenarios with owners that never existed or live in another namespace."""
    from labkit.exercises import answer_path
    path = answer_path("gc", "predict-dangling")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("orphan: kept\n")


def test_cli_runs_scenarios_and_reports_json():
    case = HERE / "scenarios" / "gc-owner-never-existed.yaml"
    # an owner that never existed is what exercise predict-dangling asks to predict: the scenario
    # is played only once a prediction is written (labkit.gc.withhold)
    from labkit.exercises import answer_path
    answer_path("gc", "predict-dangling").unlink(missing_ok=True)
    shown = labkit("gc", "run", "-f", str(case), check=0)
    withheld = shown.stderr + shown.stdout
    assert shown.stderr.startswith("withheld:") and not shown.stdout and "orphaned" not in withheld
    _prediction_written()
    result = labkit("gc", "run", "-f", str(case), "-o", "json", check=0)
    report = json.loads(result.stdout)
    assert report["passed"] and report["id"] == "gc-owner-never-existed"
    assert any(d["action"] == "delete" and d["item"]["name"] == "orphaned" for d in report["decisions"])
    text = labkit("gc", "run", "-f", str(case), check=0).stdout
    assert text.startswith("PASS gc-owner-never-existed")
    assert "configmap gc-ghost/orphaned: owner ReplicationController ghost is absent → delete with Background" in text


def test_cli_reports_a_malformed_scenario_in_one_line(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("id: broken\nsteps:\n  - op: wait\n    until: 'present(nothing'\n")
    result = labkit("gc", "run", "-f", str(bad), check=2)
    assert result.stderr.strip().startswith(f"labkit: {bad}: steps[0].until:")
    assert "Traceback" not in result.stderr
    bad.write_text("id: other\n")
    assert "id: expected the file's stem 'broken'" in labkit("gc", "run", "-f", str(bad), check=2).stderr


@pytest.mark.parametrize("api_version, kind", [("example.com/v1", "Widget"), ("v2", "ConfigMap")])
def test_cli_says_in_one_line_that_a_kind_is_not_served(tmp_path, api_version, kind):
    def unserved(data):
        data["objects"][0].update(apiVersion=api_version, kind=kind)
    path = _variant(tmp_path, HERE / "scenarios" / "gc-owner-never-existed.yaml", "variant-unserved", unserved)
    _prediction_written()       # (an owner that never existed: played only once predict-dangling is answered)
    result = labkit("gc", "run", "-f", str(path), check=2)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"not one line on stderr:\n{result.stderr}"
    (line,) = lines
    assert line.startswith(f'labkit: {path}: ref real: no matches for kind "{kind}" in version "{api_version}": '
                           "embedded API server https://127.0.0.1:")
    assert line.endswith("does not serve it (ensure CRDs are installed first)")


def test_kubeconfig_mode_plays_against_any_api_server(tmp_path):
    # what `--kubeconfig` does with a real cluster, here against a separately started server that
    # runs its own garbage collector: the runner starts and stops nothing there
    from labkit.apiserver.server import EmbeddedServer
    cluster = EmbeddedServer(tmp_path / "cluster", controllers=["garbagecollector"]).start()
    try:
        report = run_scenario(HERE / "scenarios" / "gc-owner-never-existed.yaml", kubeconfig=str(cluster.kubeconfig))
        assert report.passed, explain(report)
        assert report.target.startswith("cluster https://127.0.0.1:")
        assert any("controllers: settings are not applied" in n for n in report.notes)
    finally:
        cluster.stop()


def test_cli_refuses_unknown_and_duplicate_object_fields_in_kubectls_words(tmp_path):
    # kubectl v1.34 sends fieldValidation=Strict: a misspelt field is refused, not dropped
    def misspelt(data):
        data["objects"][0]["ownerRefrences"] = []
        data["objects"][0]["dat"] = {"a": "b"}
    path = _variant(tmp_path, HERE / "scenarios" / "gc-owner-never-existed.yaml", "variant-misspelt", misspelt)
    result = labkit("gc", "run", "-f", str(path), check=2)
    (line,) = result.stderr.strip().splitlines()
    assert line == (f'labkit: Error from server (BadRequest): error when creating "{path}": ConfigMap in version "v1" '
                    'cannot be handled as a ConfigMap: strict decoding error: unknown field "ownerRefrences", '
                    'unknown field "dat"'), line
    doubled = tmp_path / "variant-doubled.yaml"
    text = (HERE / "scenarios" / "gc-owner-never-existed.yaml").read_text().replace("id: gc-owner-never-existed",
                                                                                    "id: variant-doubled")
    doubled.write_text(text.replace("    name: orphaned\n", "    name: orphaned\n    name: orphaned\n", 1))
    result = labkit("gc", "run", "-f", str(doubled), check=2)
    assert 'strict decoding error: duplicate field "metadata.name"' in result.stderr, result.stderr


def test_scenarios_that_show_part_of_the_predict_experiment_are_withheld_before_a_prediction():
    """labkit.gc.withhold: the experiment of predict-dangling, and any scenario with an owner that
    never existed or lives in another namespace (each one subject of the experiment alone, renamed);
    a scenario whose owners all exist in the same namespace is played at once."""
    from labkit.gc.scenario import load
    from labkit.gc.withhold import shows_part_of_the_experiment
    cases = {p.stem: load(p) for p in OWN_CASES}
    assert shows_part_of_the_experiment(cases["gc-owner-never-existed"])
    assert shows_part_of_the_experiment(cases["gc-owner-in-another-namespace"])
    assert not shows_part_of_the_experiment(cases["gc-crd-deletion-cascades"])
    assert not shows_part_of_the_experiment(cases["runner-format-additions"])


SANS_OWNERS = """id: {id}
title: owners written by a step
category: gc
source: {{path: pkg/controller/garbagecollector/garbagecollector.go, test: attemptToDeleteItem, kind: code}}
fidelity: derived
controllers: {{garbagecollector: running}}
namespaces: [x-a, x-b]
objects:
  - {{ref: anchor, apiVersion: v1, kind: ConfigMap, namespace: x-b, name: anchor}}
  - {{ref: mine, apiVersion: v1, kind: ConfigMap, namespace: x-a, name: mine}}
  - {{ref: near, apiVersion: v1, kind: ConfigMap, namespace: x-a, name: near}}
steps:
{steps}
  - {{op: wait, for: settle, timeout_s: 30}}
"""
GHOST = '{"apiVersion": "v1", "kind": "ReplicationController", "name": "ghost", "uid": "12345678-0000-0000-0000-00000000beef"}'


@pytest.mark.parametrize("steps,shown", [
    # a newcomer's scenario: an object made without owners, then a patch gives it one that never
    # existed — `labkit gc run` played it before any prediction and showed orphan's fate
    (f"  - {{op: patch, target: mine, type: merge, patch: '{{\"metadata\": {{\"ownerReferences\": [{GHOST}]}}}}'}}", False),
    (f"  - {{op: patch, target: mine, type: json, patch: '[{{\"op\": \"add\", \"path\": "
     f"\"/metadata/ownerReferences\", \"value\": [{GHOST}]}}]'}}", False),
    ("  - {op: update, target: mine, set: {metadata.ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: anchor, "
     "uid: '${anchor.uid}'}]}}", False),
    ("  - op: create\n    object: {ref: late, apiVersion: v1, kind: ConfigMap, namespace: x-a, name: late, "
     "ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: anchor, uid: '${anchor.uid}'}]}", False),
    # an owner that exists in the same namespace shows nothing the prediction is about
    ("  - {op: update, target: mine, set: {metadata.ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: near, "
     "uid: '${near.uid}'}]}}", True)])
def test_owners_written_by_a_step_are_withheld_as_those_given_at_creation(tmp_path, steps, shown):
    from labkit.gc.scenario import load
    from labkit.gc.withhold import shows_part_of_the_experiment
    path = tmp_path / "written-owner.yaml"
    path.write_text(SANS_OWNERS.format(id="written-owner", steps=steps))
    assert shows_part_of_the_experiment(load(path)) is not shown


def test_a_skipping_clock_hands_out_a_delayed_item_when_moved_to_its_time():
    """What skip_idle_time rests on: a worker waiting on a queue whose item is due in 1000 s gets
    it as soon as the clock is moved ahead by that much (it would not within the 30 s it waits)."""
    import threading
    from labkit.controllers.clock import SkippingClock
    from labkit.controllers.workqueue import RateLimitingQueue
    clock = SkippingClock()
    queue = RateLimitingQueue("t", clock=clock)
    queue.add_after("ns", 1000)
    assert queue.get(timeout=0.01) is None and not queue.busy()
    assert 999 < queue.next_due() - clock() <= 1000 and clock.next_due() == queue.next_due()
    got = []
    worker = threading.Thread(target=lambda: got.append(queue.get(timeout=30)))
    worker.start()
    clock.advance(1000)
    worker.join()
    assert got == ["ns"] and clock.skipped == 1000 and queue.next_due() is None


def test_a_scenario_waits_on_the_controllers_clock_and_says_how_much_it_skipped(tmp_path):
    # a `wait: {for: 15s}` step: those 15 s pass on the clock of the garbage collector (and of
    # the namespace controller), moved ahead while they have nothing to do; the report says so
    def wait_15s(data):
        data["steps"].insert(0, {"op": "wait", "for": "15s"})
    path = _variant(tmp_path, HERE / "scenarios" / "gc-owner-never-existed.yaml", "variant-waits", wait_15s)
    report = run_scenario(path, skip_idle_time=True)
    assert report.passed, explain(report)
    assert any(n.startswith("skipped ") and "the controllers only waited" in n for n in report.notes), report.notes


@needs_fidelity
def test_the_gc_observes_a_scenarios_objects_before_its_steps(monkeypatch):
    """Upstream's e2e tests act on objects that have existed for a while (the RC manager made the
    Pods and the test waited for them); a replay creates them an instant before its first step.
    With Pods reaching the garbage collector's graph late (an informer lagging under load), a
    Foreground DELETE found the RC without dependents, the GC removed its finalizer at once, and
    gc-14's invariant broke: the runner waits until the GC has observed every object it created."""
    import time

    from labkit.controllers.garbagecollector import graph_builder

    put = graph_builder.GraphBuilder._put

    def late_pods(self, event):
        if event.kind == "Pod" and event.type == graph_builder.ADD:
            time.sleep(0.5)
        put(self, event)

    monkeypatch.setattr(graph_builder.GraphBuilder, "_put", late_pods)
    report = play(GC_DIR / "gc-14-foreground-owner-waits-for-blocking-pods.yaml")
    assert report.passed, explain(report)


def test_cli_says_when_a_dangling_owners_name_belongs_to_another_object():
    # predict-dangling's stranger names the ConfigMap anchor of predict-b by UID; predict-a has an
    # anchor too: the log said "owner ConfigMap anchor is absent" though `kubectl get cm anchor`
    # finds one (isDangling: same name, another UID)
    _prediction_written()
    case = Path(__file__).resolve().parent.parent / "labs" / "gc" / "scenarios" / "predict.yaml"
    text = labkit("gc", "run", "-f", str(case), check=0).stdout
    stranger = [line for line in text.splitlines() if "predict-a/stranger: owner ConfigMap anchor is absent" in line]
    assert stranger and "(the ConfigMap anchor the GC found has another UID than the reference)" in stranger[0], text
    orphan = [line for line in text.splitlines() if "predict-a/orphan: owner" in line]
    assert orphan and "another UID" not in orphan[0], text
