"""The scheduler reconstruction as a controller of the embedded server: a Pod that fits nowhere
gets PodScheduled=False with the FailedScheduling text v1.34.1 writes, and is bound as soon as a
Node changes so that it fits; a higher-priority Pod preempts."""

from __future__ import annotations

import pytest

from labkit.apiserver.server import EmbeddedServer
from support import host_lock, wait_until

SCHED_07 = ("0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. "
            "no new claims to deallocate, preemption: 0/3 nodes are available: 1 Preemption is not helpful for "
            "scheduling, 2 No preemption victims found for incoming pod.")


@pytest.fixture
def server(tmp_path):
    with host_lock(False):
        # the node lifecycle controller takes off the not-ready taint admission puts on each new Node
        srv = EmbeddedServer(tmp_path / "apiserver", controllers=["scheduler", "serviceaccount",
                                                                  "nodelifecycle"]).start()
    yield srv
    with host_lock(False):
        srv.stop()


def node(name, cpu, taints=()):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": list(taints)},
            "status": {"capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def pod(name, cpu, priority=None, node_name=None):
    """A Pod; its priority comes from the PriorityClass `prio-<priority>` (the Priority admission
    plugin refuses a spec.priority set directly)."""
    spec = {"containers": [{"name": "c", "image": "nginx:1.27", "resources": {"requests": {"cpu": cpu}}}]}
    if priority is not None:
        spec["priorityClassName"] = f"prio-{priority}"
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def condition(c, name):
    got = c.get("v1", "pods", name, "default")
    return next((x for x in (got.get("status") or {}).get("conditions") or [] if x["type"] == "PodScheduled"), None)


def events(c, name, reason):
    return [e for e in c.list("v1", "events", "default")[0]
            if e["involvedObject"]["name"] == name and e["reason"] == reason]


def test_an_unschedulable_pod_is_told_why_and_bound_when_a_node_changes(server):
    c = server.client()
    c.create("v1", "nodes", node("node-a", "4", [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]))
    c.create("v1", "nodes", node("node-b", "1"))
    c.create("v1", "nodes", node("node-c", "1"))
    c.create("v1", "pods", pod("web", "2"), "default")
    assert wait_until(lambda: condition(c, "web") is not None, timeout=30)
    got = condition(c, "web")
    assert (got["status"], got["reason"], got["message"]) == ("False", "Unschedulable", SCHED_07)
    assert wait_until(lambda: events(c, "web", "FailedScheduling"), timeout=10)
    assert events(c, "web", "FailedScheduling")[0]["message"] == SCHED_07
    assert events(c, "web", "FailedScheduling")[0]["type"] == "Warning"
    tainted = c.get("v1", "nodes", "node-a")
    tainted["spec"]["taints"] = []
    c.update("v1", "nodes", tainted)
    assert wait_until(lambda: c.get("v1", "pods", "web", "default")["spec"].get("nodeName") == "node-a", timeout=30)
    assert wait_until(lambda: events(c, "web", "Scheduled"), timeout=10)
    assert events(c, "web", "Scheduled")[0]["message"] == "Successfully assigned default/web to node-a"


def test_a_higher_priority_pod_preempts_the_lowest_and_is_nominated(server):
    c = server.client()
    c.create("v1", "nodes", node("node-1", "3"))
    for value in (1, 2, 3, 10):
        c.create("scheduling.k8s.io/v1", "priorityclasses", {"metadata": {"name": f"prio-{value}"}, "value": value})
    for i, priority in enumerate((1, 2, 3), start=1):
        c.create("v1", "pods", pod(f"p{i}", "1", priority, node_name="node-1"), "default")
    c.create("v1", "pods", pod("high", "1", 10), "default")

    def victim():
        got = c.get("v1", "pods", "p1", "default")
        marked = [x for x in (got.get("status") or {}).get("conditions") or [] if x["type"] == "DisruptionTarget"]
        return got if got["metadata"].get("deletionTimestamp") and marked else None
    assert wait_until(victim, timeout=30), "the lowest-priority pod was not preempted"
    marked = next(x for x in victim()["status"]["conditions"] if x["type"] == "DisruptionTarget")
    assert (marked["reason"], marked["message"]) == ("PreemptionByScheduler",
                                                    "default-scheduler: preempting to accommodate a higher priority pod")
    high = c.get("v1", "pods", "high", "default")
    assert high["status"].get("nominatedNodeName") == "node-1"
    assert wait_until(lambda: [e for e in events(c, "high", "FailedScheduling")
                               if e["message"] == "0/1 nodes are available: 1 Insufficient cpu."], timeout=10)
    for other in ("p2", "p3"):
        assert not c.get("v1", "pods", other, "default")["metadata"].get("deletionTimestamp")
    assert wait_until(lambda: events(c, "p1", "Preempted"), timeout=10)
    high_uid = high["metadata"]["uid"]
    assert events(c, "p1", "Preempted")[0]["message"] == f"Preempted by pod {high_uid} on node node-1"
    # while the victim terminates, the pod waits for it instead of preempting again
    assert wait_until(lambda: "not eligible due to a terminating pod on the nominated node." in
                      (condition(c, "high") or {}).get("message", ""), timeout=30)
    assert len(events(c, "p1", "Preempted")) == 1
    # no kubelet runs here: finish the victim's termination as node-1's kubelet would
    c.delete("v1", "pods", "p1", "default", options={"gracePeriodSeconds": 0})
    assert wait_until(lambda: c.get("v1", "pods", "high", "default")["spec"].get("nodeName") == "node-1", timeout=30)
