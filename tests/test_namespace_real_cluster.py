"""Real-cluster mode: `labkit ns explain --kubeconfig` and `labkit gc run --kubeconfig` on the
namespace scenarios talk to a cluster only through its kubeconfig (HTTPS, bearer token), with the
cluster's own controllers doing the work. An embedded API server started on its own, with its
controllers, stands in for the cluster here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from labkit.apiserver.server import EmbeddedServer
from support import REPO, host_lock, labkit

FIDELITY = next((Path(p) / "namespace" for p in (os.environ.get("LABKIT_FIDELITY_DIR"), REPO.parent / "shared" / "fidelity",
                                                 "/work/shared/fidelity") if p and (Path(p) / "namespace").is_dir()),
                Path("/nonexistent"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with host_lock(False):
        srv = EmbeddedServer(tmp_path_factory.mktemp("cluster")).start()
    yield srv
    with host_lock(False):
        srv.stop()


def test_explain_against_a_cluster_through_its_kubeconfig(cluster):
    c = cluster.http_client()
    c.create("v1", "namespaces", {"metadata": {"name": "held"}})
    c.create("v1", "configmaps", {"metadata": {"name": "keep", "finalizers": ["example.com/keep"]}}, "held")
    c.delete("v1", "namespaces", "held")
    out = labkit("ns", "explain", "held", "--kubeconfig", str(cluster.kubeconfig), "--json", check=0)
    found = json.loads(out.stdout)
    assert found["phase"] == "Terminating" and found["spec_finalizers"] == ["kubernetes"]
    assert [(x["kind"], x["message"]) for x in found["causes"]] == [
        ("finalizers", "finalizer example.com/keep holds 1 object(s): configmaps/keep")]
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
    out = labkit("gc", "run", *args, "--kubeconfig", str(cluster.kubeconfig), "--json", check=0, timeout=180)
    reports = json.loads(out.stdout)
    assert [r["passed"] for r in reports] == [True, True]
    assert all(r["target"].startswith("cluster https://127.0.0.1:") for r in reports)
