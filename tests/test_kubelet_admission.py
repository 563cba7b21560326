"""kubelet's admission re-check (labkit.controllers.kubeletadmit, after v1.34.1's
lifecycle/predicate.go Admit and kubelet_pods.go rejectPod) for Nodes that run no kubelet of
labkit's: a Pod given a node by spec.nodeName alone, where it does not fit, is rejected with
OutOfcpu and InsufficientResourceError's text; one that fits is left alone."""

from __future__ import annotations

import pytest

from labkit.apiserver.server import EmbeddedServer
from support import host_lock, wait_until


@pytest.fixture
def server(tmp_path):
    with host_lock(False):
        srv = EmbeddedServer(tmp_path / "apiserver", controllers=["serviceaccount", "kubeletadmit"]).start()
    yield srv
    with host_lock(False):
        srv.stop()


def pod(name, cpu):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": "small", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                          "resources": {"requests": {"cpu": cpu}}}]}}


def test_a_pod_bound_by_node_name_alone_where_it_does_not_fit_is_rejected_out_of_cpu(server):
    c = server.client()
    c.create("v1", "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "small"},
                             "status": {"allocatable": {"cpu": "1", "memory": "4Gi", "pods": "110"},
                                        "capacity": {"cpu": "1", "memory": "4Gi", "pods": "110"}}})
    assert wait_until(lambda: c.get_or_none("v1", "serviceaccounts", "default", "default"), timeout=30)
    c.create("v1", "pods", pod("first", "600m"), "default")
    assert server.controllers.wait_idle(timeout=30)
    c.create("v1", "pods", pod("second", "500m"), "default")

    def status(name):
        return c.get("v1", "pods", name, "default").get("status") or {}
    assert wait_until(lambda: status("second").get("phase") == "Failed", timeout=30)
    text = "Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000"
    assert (status("second")["reason"], status("second")["message"]) == ("OutOfcpu", f"Pod was rejected: {text}")
    assert status("first").get("phase") != "Failed"

    def events():
        return [e for e in c.list("v1", "events", "default")[0] if e["involvedObject"]["name"] == "second"]
    assert wait_until(events, timeout=10)
    event = events()[0]
    assert (event["type"], event["reason"], event["message"], event["source"]) == (
        "Warning", "OutOfcpu", text, {"component": "kubelet", "host": "small"})
