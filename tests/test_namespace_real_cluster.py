"""Real-cluster mode: `labkit run namespace --kubeconfig`, `labkit ns explain --kubeconfig` and
`labkit gc run --kubeconfig` on the namespace scenarios talk to a cluster only through its
kubeconfig (HTTPS, bearer token), with the cluster's own controllers doing the work. An embedded
API server started on its own, with its controllers, stands in for the cluster here."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest

from labkit import runner
from labkit.controllers import podgc
from labkit.apiserver.server import EmbeddedServer
from labkit.exercises import wait_for
from labkit.labs import get_lab
from labkit.state import LabState
from support import host_lock, labkit, shared_fidelity, skipping_idle_time

FIDELITY = shared_fidelity("namespace") or Path("/nonexistent")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A stand-in cluster; its controllers skip the time they only wait in (see UPSTREAM_PODGC)."""
    srv = EmbeddedServer(tmp_path_factory.mktemp("cluster"))
    with contextlib.ExitStack() as stack:
        if not UPSTREAM_PODGC:
            stack.enter_context(skipping_idle_time(srv))
        with host_lock(False):
            srv.start()
        yield srv
        with host_lock(False):
            srv.stop()


def test_explain_against_a_cluster_through_its_kubeconfig(cluster):
    c = cluster.http_client()
    c.create("v1", "namespaces", {"metadata": {"name": "held"}})
    c.create("v1", "configmaps", {"metadata": {"name": "keep", "finalizers": ["example.com/keep"]}}, "held")
    c.delete("v1", "namespaces", "held")
    out = labkit("ns", "explain", "held", "--kubeconfig", str(cluster.kubeconfig), "-o", "json", check=0)
    found = json.loads(out.stdout)
    assert found["phase"] == "Terminating" and found["spec_finalizers"] == ["kubernetes"]
    causes = [(x["kind"], x["message"]) for x in found["causes"]]
    assert causes[0] == ("finalizers", "finalizer example.com/keep holds 1 object(s): configmaps/keep")
    # until the namespace controller's first pass (5 s after the DELETE) the namespace's own default
    # ServiceAccount and root CA ConfigMap are still stored too; during that pass, which deletes
    # one resource at a time, either may already be gone
    still = "without finalizers still stored: the namespace controller deletes them on its next pass (it waits for " \
            "pods first)"
    assert causes[1:] in ([], *([("content", f"{what} {still}")] for what in (
        "1 configmaps., 1 serviceaccounts.", "1 configmaps.", "1 serviceaccounts.")))
    assert found["decisions"] == []          # a cluster has no decision log to read
    c.patch("v1", "configmaps", "keep", {"metadata": {"finalizers": None}}, "merge", "held")


def test_explain_errors_are_one_line():
    out = labkit("ns", "explain", "x", "--kubeconfig", "/nonexistent/kubeconfig", check=2)
    assert out.stderr.strip().splitlines() == ["labkit: --kubeconfig /nonexistent/kubeconfig: no such file"]
    out = labkit("ns", "explain", "x", "--state", "/nonexistent/state", check=2)
    assert "is the lab running?" in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not FIDELITY.is_dir(), reason="the shared fidelity scenarios are not on this machine")
def test_namespace_scenarios_replay_against_a_cluster(cluster):
    files = [FIDELITY / "ns-07-finalize-subresource-add-remove.yaml", FIDELITY / "ns-04-create-in-terminating-forbidden.yaml"]
    args = [a for f in files for a in ("-f", str(f))]
    # a create into a terminating namespace is what exercise terminating-create asks to predict:
    # that scenario is played only once a prediction is written (labkit.namespaces.withhold)
    out = labkit("gc", "run", "-f", str(files[1]), "--kubeconfig", str(cluster.kubeconfig), "-o", "json", check=0)
    assert out.stderr.startswith(f"withheld: {files[1]}") and not out.stdout, out.stderr
    from labkit.exercises import answer_path
    path = answer_path("namespace", "terminating-create")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("error: a prediction\n")
    out = labkit("gc", "run", *args, "--kubeconfig", str(cluster.kubeconfig), "-o", "json", check=0, timeout=180)
    reports = json.loads(out.stdout)
    assert [r["passed"] for r in reports] == [True, True]
    assert all(r["target"].startswith("cluster https://127.0.0.1:") for r in reports)


EXERCISES = ["conditions", "terminating-create", "release-finalizer", "broken-apiservice", "force-finalize",
             "own-finalizer", "volume-in-use"]
LAB_NAMESPACES = {"billing", "attic", "reports", "monitoring", "legacy", "sandbox", "archive"}
# How long cleanup's deletions may take to finish on the cluster (a bound, not a wait): each
# namespace's first pass comes namespaceDeletionGracePeriod (5 s) after the DELETE, its Pods get
# their 2 s grace period, and each later pass comes estimate/2+1 s after the one before; the Pod of
# archive, stranded on node-b, goes only once node-b is removed, through the pod garbage collector
# (a 40 s quarantine of the node name, checked every 20 s).
NAMESPACE_GONE = 150
# The stand-in cluster's pod garbage collector: upstream's periods (every 20 s, a 40 s quarantine)
# with LABKIT_SLOW_SCENARIOS=1, otherwise the same passes every second with a 2 s quarantine: what
# the test proves of the lab on a cluster does not depend on how long that cluster's PodGC waits;
# PodGC's own rules and upstream timings are tested in test_cluster_controllers.py (short periods)
# and test_gc_scenarios.py (real time, LABKIT_SLOW_SCENARIOS=1). Likewise the stand-in cluster's
# garbage collector, namespace controller and kubelet stand-in run on a clock that skips the time
# they only wait in (support.skipping_idle_time: the namespace controller's 5 s grace period and
# 8 s passes), in real time with LABKIT_SLOW_SCENARIOS=1; their schedules are proven in
# test_namespace_requeue.py and test_gc_scenarios.py.
UPSTREAM_PODGC = os.environ.get("LABKIT_SLOW_SCENARIOS") == "1"


class _QuickPodGC(podgc.PodGCController):
    def __init__(self, client, log, period: float = 1.0, quarantine: float = 2.0,
                 threshold: int = podgc.TERMINATED_POD_THRESHOLD):
        super().__init__(client, log, period, quarantine, threshold)


def test_the_lab_runs_on_a_cluster_through_its_kubeconfig(tmp_path, monkeypatch):
    # the lab starts no server of its own, reads no audit or decision log of the cluster, and
    # cleanup deletes everything it created there, releasing its own example finalizers
    if not UPSTREAM_PODGC:
        monkeypatch.setattr(podgc, "PodGCController", _QuickPodGC)
    cluster = EmbeddedServer(tmp_path / "cluster")
    with contextlib.ExitStack() as stack:
        if not UPSTREAM_PODGC:
            clock = stack.enter_context(skipping_idle_time(cluster))
        cluster.start()
        stack.callback(cluster.stop)
        running = cluster.controllers.get("podgc")
        assert (running.period, running.quarantine) == \
            ((podgc.GC_CHECK_PERIOD, podgc.QUARANTINE_TIME) if UPSTREAM_PODGC else (1.0, 2.0)), \
            "the stand-in cluster's PodGC does not run with the periods this test chose"
        c = cluster.http_client()
        out = labkit("run", "namespace", "--kubeconfig", str(cluster.kubeconfig), check=0).stdout
        assert f"export KUBECONFIG={cluster.kubeconfig}" in out and "no audit log" in out
        assert not (LabState("namespace").dir / "apiserver").exists()
        assert c.get("apiregistration.k8s.io/v1", "apiservices", "v1beta1.metrics.k8s.io")["spec"]["service"] == \
            {"namespace": "kube-system", "name": "metrics-server", "port": 443}
        lab = get_lab("namespace")
        fresh = {r.exercise: r for r in runner.check(lab)}
        assert {e: r.status for e, r in fresh.items()} == {e: "fail" for e in EXERCISES}, \
            {e: r.message for e, r in fresh.items()}
        explained = json.loads(labkit("ns", "explain", "attic", "-o", "json", check=0).stdout)
        # the cluster's aggregator finds no endpoints behind the lab's APIService: discovery fails first
        causes = [(x["kind"], x["message"]) for x in explained["causes"]]
        assert causes[0][0] == "discovery" and "is not Available: MissingEndpoints" in causes[0][1]
        assert ("finalizers", "finalizer attic.example.com/keep holds 1 object(s): configmaps/keepsake") in causes
        assert "labkit has no decision log of its namespace controller" in labkit("ns", "log", check=2).stderr
        # broken-apiservice first, as the lab tells students on a cluster (a real aggregator finds no
        # endpoints behind the lab's APIService, and every namespace deletion waits on it)
        assert "work exercise broken-apiservice first" in out
        for exercise in ["broken-apiservice"] + [e for e in EXERCISES if e != "broken-apiservice"]:
            runner.solve(lab, exercise)
        results = {r.exercise: r for r in runner.check(lab)}
        assert {e: r.status for e, r in results.items()} == {e: "pass" for e in EXERCISES}, \
            {e: r.message for e, r in results.items()}
        for exercise in ("release-finalizer", "broken-apiservice", "own-finalizer"):
            assert "judged by the live state only" in results[exercise].message, results[exercise].message
        # reset rebuilds on the cluster once the lab's own objects from before are gone (answer
        # files stay: the prediction of terminating-create is still right on the new attic)
        labkit("reset", "namespace", "--yes", check=0, timeout=300)
        again = {r.exercise: r.status for r in runner.check(lab)}
        assert again == {**{e: "fail" for e in EXERCISES}, "terminating-create": "pass"}, again
        labkit("cleanup", "namespace", check=0)
        assert wait_for(lambda: not labkit_objects(c), timeout=NAMESPACE_GONE), labkit_objects(c)
        # an object that was there before is never taken over, nor deleted when the build fails
        c.create("v1", "services", {"metadata": {"name": "metrics-server"},
                                    "spec": {"ports": [{"port": 443}]}}, "kube-system")
        refused = labkit("run", "namespace", "--kubeconfig", str(cluster.kubeconfig), check=2).stderr
        assert "services kube-system/metrics-server already exists on the cluster of" in refused
        theirs = "/api/v1/namespaces/kube-system/services/metrics-server"
        assert wait_for(lambda: labkit_objects(c) == [theirs], timeout=NAMESPACE_GONE), labkit_objects(c)
        assert c.get("v1", "services", "metrics-server", "kube-system")["metadata"].get("deletionTimestamp") is None
        if not UPSTREAM_PODGC:
            assert clock.skipped > 0, "the stand-in cluster's controllers never skipped a wait"


def labkit_objects(c) -> list[str]:
    """What is left on the cluster of the namespace lab: its namespaces, the objects stored under
    their names, the Backup CRD, the PersistentVolume, the APIService and its Service."""
    found = [f"namespace {n['metadata']['name']}" for n in c.list("v1", "namespaces")[0]
             if n["metadata"]["name"] in LAB_NAMESPACES]
    for api_version, resource in (("v1", "configmaps"), ("v1", "secrets"), ("apps/v1", "deployments"),
                                  ("v1", "pods")):
        found += [f"{resource} {o['metadata']['namespace']}/{o['metadata']['name']}"
                  for o in c.list(api_version, resource)[0] if o["metadata"]["namespace"] in LAB_NAMESPACES]
    for path in ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backups.example.com",
                 "/api/v1/persistentvolumes/archive-data",
                 "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io",
                 "/api/v1/namespaces/kube-system/services/metrics-server"):
        if c.request("GET", path)[0] != 404:
            found.append(path)
    return found


def test_cleanup_releases_only_the_labs_own_finalizers(cluster):
    from labkit.apiserver.client import remove_recorded
    c = cluster.http_client()
    c.create("v1", "namespaces", {"metadata": {"name": "release"}})
    c.create("v1", "configmaps",
             {"metadata": {"name": "both", "finalizers": ["lab.example.com/x", "other.example.com/y"]}}, "release")
    entry = {"kubeconfig": str(cluster.kubeconfig), "context": None, "apiVersion": "v1", "resource": "configmaps",
             "namespace": "release", "name": "both", "finalizers": ["lab.example.com/x"]}
    assert remove_recorded(entry) is True
    left = c.get("v1", "configmaps", "both", "release")["metadata"]
    assert left["finalizers"] == ["other.example.com/y"] and left.get("deletionTimestamp")
    c.patch("v1", "configmaps", "both", {"metadata": {"finalizers": None}}, "merge", "release")
    assert remove_recorded(entry) is False          # already gone
    c.delete("v1", "namespaces", "release")
