"""The namespace lab's dead node node-b as `kubectl describe node` shows it on a cluster whose
kubelet stopped posting: the capacity and allocatable it posted last (describe's percentages come
from allocatable) and heartbeats no older than the Node (labs/namespace/lab.py _dead_node)."""

from __future__ import annotations

import datetime

from labkit.labs import load_lab
from support import REPO, embedded_server, kubectl


class _Target:
    """What _dead_node uses of labkit.apiserver.target.Target, on the embedded server."""

    def __init__(self, server):
        self.server = server

    def client(self):
        return self.server.client()

    def create(self, env, api_version, resource, obj, namespace=None):
        return self.server.client().create(api_version, resource, obj, namespace)


def _when(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def test_describe_node_b_shows_capacity_and_a_heartbeat_no_older_than_the_node(tmp_path):
    lab = load_lab(REPO / "labs" / "namespace")
    module = lab.environment_module()
    with embedded_server(tmp_path / "state", tmp_path, controllers=[]) as server:
        module._dead_node(None, _Target(server))
        node = server.client().get("v1", "nodes", "node-b")
        created = _when(node["metadata"]["creationTimestamp"])
        for condition in node["status"]["conditions"]:
            assert condition["status"] == "Unknown" and condition["reason"] == "NodeStatusUnknown"
            assert created <= _when(condition["lastHeartbeatTime"]) <= _when(condition["lastTransitionTime"])
        described = kubectl(server, "describe", "node", "node-b", check=True).stdout
        assert "-9223372036854775808" not in described
        assert "Capacity:" in described and "Allocatable:" in described
        assert "Kubelet Version:            v1.34.1" in described
        assert "Kubelet stopped posting node status." in described
