"""The namespace lab's cluster marks a running node out of service as a v1.34 cluster does: its
controllers (labs/namespace/lab.py CONTROLLERS) include the taint-eviction controller, so the Pods
on labkit-node that do not tolerate node.kubernetes.io/out-of-service:NoExecute are deleted (as
volume-in-use's feedback says), and the node stand-in leaves their replacements Pending while the
taint stays, as the scheduler's TaintToleration filter would, and binds them once it is off."""

from __future__ import annotations

import pytest

from labkit.controllers.node import NODE_NAME
from labkit.labs import load_lab
from support import REPO, embedded_server, wait_until as _wait_until
from test_namespace_dead_node import _Target

OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}


def wait_until(predicate) -> bool:
    return _wait_until(predicate, timeout=60, interval=0.1)


@pytest.fixture
def billing(tmp_path):
    module = load_lab(REPO / "labs" / "namespace").environment_module()
    with embedded_server(tmp_path / "state", tmp_path, controllers=list(module.CONTROLLERS)) as server:
        module._build_namespace(None, _Target(server), "billing")
        yield server.client()


def _pods(c) -> list[dict]:
    return c.list("v1", "pods", "billing")[0]


def _set_taints(c, taints) -> None:
    c.patch("v1", "nodes", NODE_NAME, {"spec": {"taints": taints}}, "merge")


def test_a_node_marked_out_of_service_loses_its_pods_and_gets_no_new_ones_until_the_mark_is_off(billing):
    c = billing
    assert wait_until(lambda: _pods(c) and all((p.get("status") or {}).get("phase") == "Running" for p in _pods(c)))
    first = {p["metadata"]["uid"] for p in _pods(c)}
    _set_taints(c, [OUT_OF_SERVICE])
    # the taint-eviction controller deletes them (DisruptionTarget: DeletionByTaintManager), the
    # node stand-in ends them, and the ReplicaSet makes new ones, which stay unbound
    assert wait_until(lambda: not first & {p["metadata"]["uid"] for p in _pods(c)})
    assert wait_until(lambda: _pods(c))
    # a Pod that tolerates the taint is still bound: the stand-in looked at the queue in order
    tolerant = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tolerant"},
                "spec": {"tolerations": [{"key": OUT_OF_SERVICE["key"], "operator": "Exists"}],
                         "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
    c.create("v1", "pods", tolerant, "billing")
    assert wait_until(lambda: (c.get("v1", "pods", "tolerant", "billing").get("spec") or {}).get("nodeName"))
    waiting = [p for p in _pods(c) if p["metadata"]["name"] != "tolerant"]
    assert waiting and not any((p.get("spec") or {}).get("nodeName") for p in waiting)
    _set_taints(c, None)
    assert wait_until(lambda: all((p.get("spec") or {}).get("nodeName") == NODE_NAME
                                  and (p.get("status") or {}).get("phase") == "Running"
                                  for p in _pods(c) if p["metadata"]["name"] != "tolerant"))
