"""The namespace lab through the real CLI and real kubectl: `labkit ns explain` names the cause of
every stuck namespace; every check fails on a fresh lab and passes after its reference solution;
the wrong fixes (force-finalizing, patching spec.finalizers) are seen for what they are."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from conftest import fresh_environment
from support import host_lock, labkit, wait_until

EXERCISES = ["conditions", "terminating-create", "release-finalizer", "broken-apiservice", "force-finalize",
             "own-finalizer", "volume-in-use"]


@contextmanager
def namespace_lab(base):
    env = {**os.environ, **fresh_environment(base)}
    with host_lock(False):
        labkit("run", "namespace", env=env, check=0)
    env["KUBECONFIG"] = str(Path(env["LABKIT_STATE_DIR"]) / "namespace" / "apiserver" / "kubeconfig")
    env["HOME"] = str(base)
    try:
        yield env
    finally:
        with host_lock(False):
            labkit("cleanup", "namespace", env=env, check=0)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with namespace_lab(tmp_path_factory.mktemp("namespace-lab")) as env:
        yield env


def kubectl(env, *args, check=True, input=None):
    out = subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=60, input=input)
    if check and out.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {out.stderr}")
    return out


def results(env, *exercise, code=None):
    out = labkit("check", "namespace", *exercise, "-o", "json", env=env, check=code)
    return {r["exercise"]: r for r in json.loads(out.stdout)["results"]}


def explain(env, name) -> dict:
    return json.loads(labkit("ns", "explain", name, "-o", "json", env=env, check=0).stdout)


def answer(env, exercise, data):
    path = Path(env["LABKIT_ANSWERS_DIR"]) / "namespace" / f"{exercise}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))




def test_explain_names_the_cause_of_every_stuck_namespace(lab):
    assert kubectl(lab, "get", "ns", "attic", "-o", "jsonpath={.status.phase}").stdout == "Terminating"
    # right after the DELETE, reports' pod is still terminating: pods go first
    first = explain(lab, "reports")
    if "pods." in first["remaining"]:
        assert first["causes"][0]["kind"] == "pods"
    assert wait_until(lambda: "pods." not in explain(lab, "reports")["remaining"], timeout=40, interval=0.2)
    causes = {name: explain(lab, name)["causes"] for name in ("attic", "reports", "legacy", "billing")}
    assert [(c["kind"], c["message"]) for c in causes["attic"]] == [
        ("finalizers", "finalizer attic.example.com/keep holds 1 object(s): configmaps/keepsake")]
    assert [(c["kind"], c["message"]) for c in causes["reports"]] == [
        ("finalizers", "finalizer backup.example.com/upload holds 1 object(s): backups.example.com/nightly")]
    assert sorted(c["message"] for c in causes["legacy"]) == [
        "finalizer backup.example.com/upload holds 1 object(s): backups.example.com/weekly",
        "finalizer legacy.example.com/keep holds 1 object(s): configmaps/app-config"]
    assert causes["billing"] == []          # Active: nothing to explain
    # the fix of an exercise's own namespace is its answer: withheld until the exercise is passed,
    # also when the lab's API server is asked through --state
    assert {c["fix"] for c in causes["reports"]} == {
        "withheld while exercise release-finalizer of lab namespace is not passed: the cause above says where to look "
        "(`labkit hint namespace release-finalizer` gives hints one at a time)"}
    state = str(Path(lab["LABKIT_STATE_DIR"]) / "namespace" / "apiserver")
    asked = json.loads(labkit("ns", "explain", "reports", "--state", state, "-o", "json", env=lab, check=0).stdout)
    assert [c["fix"] for c in asked["causes"]] == [c["fix"] for c in causes["reports"]]
    # kubectl shows the phase and the controller's conditions as on a cluster
    assert wait_until(lambda: "finalizers remaining: backup" in kubectl(lab, "describe", "ns", "reports").stdout,
                      timeout=60, interval=0.2)
    described = kubectl(lab, "describe", "ns", "reports").stdout
    assert "\nStatus:       Terminating\n" in described
    assert ("NamespaceFinalizersRemaining                 True" in described
            and "Some content in the namespace has finalizers remaining: backup.example.com/upload in 1 resource "
                "instances" in described), described
    text = labkit("ns", "explain", "reports", env=lab, check=0).stdout
    assert text.startswith("namespace reports: Terminating since ")
    assert "backups.example.com/nightly: backup.example.com/upload (deleting)" in text


def test_each_check_fails_on_a_fresh_lab_and_passes_after_its_solution(lab):
    fresh = results(lab, code=1)
    assert {e: r["status"] for e, r in fresh.items()} == {e: "fail" for e in EXERCISES}, fresh

    # (b) a wrong prediction fails; the check's truth is what kubectl gets from the server
    answer(lab, "terminating-create", {"error": 'namespaces "attic" not found'})
    assert results(lab, "terminating-create", code=1)["terminating-create"]["status"] == "fail"
    out = kubectl(lab, "create", "configmap", "late", "-n", "attic", check=False)
    assert out.returncode == 1
    # written after trying it: not a prediction, no points; after a reset of the exercise neither
    # (the reset keeps the try: labkit.predictions' reset rule), until --forget-prediction forgets it,
    # which the grade details then carry
    answer(lab, "terminating-create", {"error": out.stderr.strip()})
    tried = results(lab, "terminating-create", code=1)["terminating-create"]
    assert "trying first earns no points" in tried["message"], tried
    labkit("reset", "namespace", "terminating-create", "--yes", env=lab, check=0, timeout=300)
    answer(lab, "terminating-create", {"error": out.stderr.strip()})
    again = results(lab, "terminating-create", code=1)["terminating-create"]
    # (the audit log keeps a create's object name only where its level records the request body)
    assert "trying first earns no points" in again["message"] and "a reset since then" in again["message"] \
        and "create configmaps" in again["message"], again
    labkit("reset", "namespace", "terminating-create", "--yes", "--forget-prediction", env=lab, check=0, timeout=300)
    answer(lab, "terminating-create", {"error": out.stderr.strip()})
    passed = results(lab, "terminating-create", code=0)["terminating-create"]
    assert passed["status"] == "pass" and passed["details"]["predictions_forgotten"][0]["tried"]["what"] \
        .startswith("create configmaps"), passed

    for exercise in EXERCISES:
        if exercise == "broken-apiservice":
            break_the_apiservice_by_hand(lab)
        labkit("solve", "namespace", exercise, env=lab, check=0)
        result = results(lab, exercise)[exercise]
        assert result["status"] == "pass", result
    final = json.loads(labkit("check", "namespace", "-o", "json", env=lab, check=0).stdout)
    assert final["passed"] == len(EXERCISES)
    decisions = labkit("ns", "log", env=lab, check=0).stdout
    assert "namespace reports: no content left → remove the kubernetes finalizer (PUT …/finalize); the API server " \
           "removes the namespace" in decisions
    assert "namespace monitoring: discovery failed for metrics.k8s.io/v1beta1 → delete what can be seen" in decisions
    # what force-finalizing left behind is named by explain too
    # (with the namespace's own default ServiceAccount and kube-root-ca.crt, old or made anew)
    assert explain(lab, "legacy")["remaining"] == {"backups.example.com": 1, "configmaps.": 2, "serviceaccounts.": 1}
    # once its exercise is passed, explain gives the fix for an exercise's namespace (attic stays
    # Terminating: terminating-create asks only for a prediction)
    causes = explain(lab, "attic")["causes"]
    assert [c["fix"] for c in causes] == [
        "let the controller that owns attic.example.com/keep finish its cleanup; if it is gone for good and the cleanup "
        "is not needed, remove attic.example.com/keep from these objects (kubectl patch … --type=json -p "
        "'[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/<index>\"}]')"], causes


def break_the_apiservice_by_hand(lab):
    """(d) as the prompt says; explain names the APIService and the failing group. (While it is
    broken, every namespace deletion in the lab waits, so this comes after the other fixes.)"""
    kubectl(lab, "-n", "kube-system", "delete", "service", "metrics-server")
    kubectl(lab, "delete", "namespace", "monitoring", "--wait=false")
    assert wait_until(lambda: any(c["kind"] == "discovery" for c in explain(lab, "monitoring")["causes"]),
                      timeout=60, interval=0.2)
    cause = next(c for c in explain(lab, "monitoring")["causes"] if c["kind"] == "discovery")
    assert "metrics.k8s.io/v1beta1" in cause["message"]
    assert ('APIService v1beta1.metrics.k8s.io (service kube-system/metrics-server) is not Available: '
            'ServiceNotFound') in cause["message"]
    assert wait_until(lambda: "DiscoveryFailed" in kubectl(
        lab, "get", "ns", "monitoring", "-o",
        "jsonpath={.status.conditions[?(@.type=='NamespaceDeletionDiscoveryFailure')].reason}").stdout,
        timeout=60, interval=0.2)
    message = results(lab, "broken-apiservice", code=1)["broken-apiservice"]["message"]
    assert message.startswith("APIService v1beta1.metrics.k8s.io is not Available (ServiceNotFound): its Service is "
                              "missing")


def test_wrong_fixes_are_not_accepted(tmp_path):
    with namespace_lab(tmp_path / "wrong") as env:
        # patching spec.finalizers away is silently ignored by the normal update path
        kubectl(env, "patch", "ns", "reports", "--type=merge", "-p", '{"spec":{"finalizers":[]}}')
        assert kubectl(env, "get", "ns", "reports", "-o", "jsonpath={.spec.finalizers}").stdout == '["kubernetes"]'
        # force-finalizing makes the namespace disappear, but the check sees it in the audit log
        ns = json.loads(kubectl(env, "get", "ns", "reports", "-o", "json").stdout)
        ns["spec"]["finalizers"] = []
        kubectl(env, "replace", "--raw", "/api/v1/namespaces/reports/finalize", "-f", "-", input=json.dumps(ns))
        assert kubectl(env, "get", "ns", "reports", check=False).returncode == 1
        message = results(env, "release-finalizer", code=1)["release-finalizer"]["message"]
        assert message.startswith("namespace reports was force-finalized by labkit-admin")
        # and the Backup it protected is still stored, held by its finalizer
        left = explain(env, "reports")
        assert not left["exists"] and left["remaining"]["backups.example.com"] == 1
        assert left["causes"][0]["kind"] == "left-behind"
        # (wrong answers to force-finalize, and the other wrong fixes: labs/namespace/mistakes/)
