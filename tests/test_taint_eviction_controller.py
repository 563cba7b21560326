"""The taint-eviction controller (labkit.controllers.tainteviction, after v1.34.1's
taint_eviction.go) in the embedded server, on a clock the test drives: a NoExecute taint on a
Ready node deletes the Pods that do not tolerate it at once, the others after the smallest
tolerationSeconds of the tolerations that matched, never those that tolerate it without
tolerationSeconds; with the DisruptionTarget condition and the TaintManagerEviction events."""

from __future__ import annotations

import pytest

from labkit.apiserver.server import EmbeddedServer
from support import host_lock, wait_until

OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}
DRAIN = {"key": "drain", "value": "now", "effect": "NoExecute"}


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cluster(tmp_path):
    clock = FakeClock()
    with host_lock(False):
        srv = EmbeddedServer(tmp_path / "apiserver", controllers=["serviceaccount"]).start()
        srv.controllers.settings["clock"] = clock
        controller = srv.controllers.start("tainteviction")
    yield srv, controller, clock
    with host_lock(False):
        srv.stop()


def node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def pod(name, tolerations=()):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": "node-1", "tolerations": list(tolerations),
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def tol(taint, seconds=None, **more):
    out = {"key": taint["key"], "operator": "Exists", "effect": "NoExecute", **more}
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    return out


def deleting(c, name):
    got = c.get_or_none("v1", "pods", name, "default")
    return got is None or bool(got["metadata"].get("deletionTimestamp"))


def settle(srv):
    assert srv.controllers.wait_idle(timeout=30)


def events(c, name):
    return sorted(e["message"] for e in c.list("v1", "events", "default")[0]
                  if e["involvedObject"]["name"] == name and e["reason"] == "TaintManagerEviction")


def test_noexecute_taint_evicts_at_once_after_the_smallest_seconds_or_never(cluster):
    srv, controller, clock = cluster
    c = srv.client()
    c.create("v1", "nodes", node("node-1"))
    assert wait_until(lambda: c.get_or_none("v1", "serviceaccounts", "default", "default"), timeout=30)
    c.create("v1", "pods", pod("plain"), "default")
    c.create("v1", "pods", pod("patient", [tol(OUT_OF_SERVICE, 120), tol(DRAIN, 300)]), "default")
    c.create("v1", "pods", pod("stubborn", [tol(OUT_OF_SERVICE), tol(DRAIN)]), "default")
    # both taints tolerated: the smaller of the two matched tolerationSeconds (getMinTolerationTime)
    c.create("v1", "pods", pod("earliest", [tol(OUT_OF_SERVICE, 60), tol(DRAIN, 30)]), "default")
    # a toleration of another effect does not match a NoExecute taint
    c.create("v1", "pods", pod("wrong-effect", [dict(tol(OUT_OF_SERVICE), effect="NoSchedule"), tol(DRAIN)]),
             "default")
    settle(srv)
    tainted = c.get("v1", "nodes", "node-1")
    tainted["spec"] = {"taints": [OUT_OF_SERVICE, DRAIN]}
    c.update("v1", "nodes", tainted)
    assert wait_until(lambda: deleting(c, "plain") and deleting(c, "wrong-effect"), timeout=30)
    settle(srv)
    assert controller.pending() == {"default/patient": 1120.0, "default/earliest": 1030.0}
    for name in ("patient", "stubborn", "earliest"):
        assert not deleting(c, name), name
    evicted = c.get("v1", "pods", "plain", "default")
    marked = [x for x in evicted["status"]["conditions"] if x["type"] == "DisruptionTarget"]
    assert [(m["status"], m["reason"], m["message"]) for m in marked] == [
        ("True", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")]
    assert wait_until(lambda: events(c, "plain"), timeout=10)
    assert events(c, "plain") == ["Marking for deletion Pod default/plain"]
    event = next(e for e in c.list("v1", "events", "default")[0] if e["involvedObject"]["name"] == "plain")
    assert (event["type"], event["source"]["component"]) == ("Normal", "taint-eviction-controller")

    clock.now = 1029.0
    settle(srv)
    assert not deleting(c, "earliest")
    clock.now = 1030.0
    assert wait_until(lambda: deleting(c, "earliest"), timeout=30)
    clock.now = 1119.0
    settle(srv)
    assert not deleting(c, "patient")
    clock.now = 1120.0
    assert wait_until(lambda: deleting(c, "patient"), timeout=30)
    clock.now = 100000.0
    settle(srv)
    assert not deleting(c, "stubborn")
    assert controller.pending() == {}
    assert events(c, "stubborn") == []


def test_a_pod_update_keeps_the_eviction_pending_since_earlier_and_removing_the_taint_cancels_it(cluster):
    srv, controller, clock = cluster
    c = srv.client()
    c.create("v1", "nodes", node("node-1"))
    assert wait_until(lambda: c.get_or_none("v1", "serviceaccounts", "default", "default"), timeout=30)
    c.create("v1", "pods", pod("patient", [tol(DRAIN, 100)]), "default")
    c.create("v1", "pods", pod("longer", [tol(DRAIN, 50)]), "default")
    settle(srv)
    tainted = c.get("v1", "nodes", "node-1")
    tainted["spec"] = {"taints": [DRAIN]}
    c.update("v1", "nodes", tainted)
    assert wait_until(lambda: len(controller.pending()) == 2, timeout=30)
    clock.now = 1010.0
    longer = c.get("v1", "pods", "longer", "default")
    longer["spec"]["tolerations"].append(tol(DRAIN, 500, value="now", operator="Equal"))   # additions only
    c.update("v1", "pods", longer, "default")
    settle(srv)
    # processPodOnNode at 1010: due at 1060 now, but the eviction pending since 1000 is kept (1050)
    assert controller.pending()["default/longer"] == 1050.0
    untainted = c.get("v1", "nodes", "node-1")
    untainted["spec"]["taints"] = []
    c.update("v1", "nodes", untainted)
    assert wait_until(lambda: controller.pending() == {}, timeout=30)
    assert wait_until(lambda: events(c, "patient") and events(c, "longer"), timeout=10)
    assert events(c, "patient") == ["Cancelling deletion of Pod default/patient"]
    clock.now = 5000.0
    settle(srv)
    assert not deleting(c, "patient") and not deleting(c, "longer")


def test_a_node_turning_not_ready_gets_the_lifecycle_taints_and_its_pods_leave_after_the_default_300_s(cluster):
    srv, controller, clock = cluster
    srv.controllers.start("nodelifecycle")
    c = srv.client()
    c.create("v1", "nodes", node("node-1"))
    assert wait_until(lambda: c.get_or_none("v1", "serviceaccounts", "default", "default"), timeout=30)
    c.create("v1", "pods", pod("web"), "default")       # DefaultTolerationSeconds: 300 s of not-ready
    settle(srv)
    assert not (c.get("v1", "nodes", "node-1").get("spec") or {}).get("taints")
    sick = c.get("v1", "nodes", "node-1")
    sick["status"]["conditions"] = [{"type": "Ready", "status": "False"}, {"type": "MemoryPressure", "status": "True"}]
    c.update("v1", "nodes", sick, None, "status")

    def taints():
        return sorted((t["key"], t["effect"], bool(t.get("timeAdded")))
                      for t in (c.get("v1", "nodes", "node-1").get("spec") or {}).get("taints") or [])
    assert wait_until(lambda: len(taints()) == 3, timeout=30)
    assert taints() == [("node.kubernetes.io/memory-pressure", "NoSchedule", True),
                        ("node.kubernetes.io/not-ready", "NoExecute", True),
                        ("node.kubernetes.io/not-ready", "NoSchedule", True)]
    assert wait_until(lambda: controller.pending() == {"default/web": 1300.0}, timeout=30)
    clock.now = 1299.0
    settle(srv)
    assert not deleting(c, "web")
    well = c.get("v1", "nodes", "node-1")
    well["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    c.update("v1", "nodes", well, None, "status")
    assert wait_until(lambda: taints() == [], timeout=30)
    assert wait_until(lambda: controller.pending() == {}, timeout=30)
    clock.now = 5000.0
    settle(srv)
    assert not deleting(c, "web")
    assert wait_until(lambda: events(c, "web") == ["Cancelling deletion of Pod default/web"], timeout=10)
