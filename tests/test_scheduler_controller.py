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


def create_nodes(c, *bodies):
    """Create Nodes and wait until node lifecycle has taken off the not-ready taint that
    TaintNodesByCondition admission gives every new Node (they report Ready): a Pod created
    sooner meets that taint too, as it would on a cluster."""
    for body in bodies:
        c.create("v1", "nodes", body)
    names = [b["metadata"]["name"] for b in bodies]
    assert wait_until(lambda: not any(t.get("key") == "node.kubernetes.io/not-ready"
                                      for n in names for t in c.get("v1", "nodes", n)["spec"].get("taints") or []),
                      timeout=30)


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
    create_nodes(c, node("node-a", "4", [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
                 node("node-b", "1"), node("node-c", "1"))
    c.create("v1", "pods", pod("web", "2"), "default")
    # the scheduler's informer may not have seen a Node's not-ready taint go yet (it was, once, on a
    # loaded machine: its first message named that taint too); the taint's removal requeues the
    # Pod, and the message settles on the one of these three Nodes
    assert wait_until(lambda: (condition(c, "web") or {}).get("message") == SCHED_07, timeout=30), condition(c, "web")
    got = condition(c, "web")
    assert (got["status"], got["reason"], got["message"]) == ("False", "Unschedulable", SCHED_07)
    assert wait_until(lambda: [e for e in events(c, "web", "FailedScheduling") if e["message"] == SCHED_07], timeout=10)
    assert all(e["type"] == "Warning" for e in events(c, "web", "FailedScheduling"))
    tainted = c.get("v1", "nodes", "node-a")
    tainted["spec"]["taints"] = []
    c.update("v1", "nodes", tainted)
    assert wait_until(lambda: c.get("v1", "pods", "web", "default")["spec"].get("nodeName") == "node-a", timeout=30)
    assert wait_until(lambda: events(c, "web", "Scheduled"), timeout=10)
    assert events(c, "web", "Scheduled")[0]["message"] == "Successfully assigned default/web to node-a"


def test_a_higher_priority_pod_preempts_the_lowest_and_is_nominated(server):
    c = server.client()
    create_nodes(c, node("node-1", "3"))
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
    # the victims are deleted before the preemptor's status names the node (preemption.go
    # prepareCandidate, then schedule_one.go handleSchedulingFailure): two writes, in that order
    assert wait_until(lambda: c.get("v1", "pods", "high", "default")["status"].get("nominatedNodeName"), timeout=10)
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


class _Listed:
    """An informer's store that never hears of a binding (as one that lags behind the server)."""

    def __init__(self, objects):
        self.objects = {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}".lstrip("/"): o for o in objects}

    def list(self):
        return list(self.objects.values())

    def get(self, key):
        return self.objects.get(key)


class _Bindings:
    def __init__(self):
        self.bound = []

    def create(self, api_version, resource, body, namespace=None, subresource=None, name=None):
        self.bound.append((name, body["target"]["name"]))
        return body


def test_a_pod_bound_a_moment_ago_counts_on_its_node_before_the_informer_sees_the_binding():
    """schedule_one.go assume: the next cycle sees the Pod on the node it was just bound to, so a
    batch created together spreads over the zones as the constraint asks, one replica per cycle."""
    from labkit.controllers.decisions import DecisionLog
    from labkit.controllers.scheduler import SchedulerController

    zones = {"z1": "4", "z2": "4", "z3": "1"}
    nodes = [{"metadata": {"name": f"n-{z}", "labels": {"topology.kubernetes.io/zone": z, "kubernetes.io/hostname": f"n-{z}"}},
              "spec": {}, "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}
             for z, cpu in zones.items()]
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "shop"}}}]
    pods = [{"metadata": {"name": f"shop-{i}", "namespace": "default", "uid": f"u{i}", "labels": {"app": "shop"}},
             "spec": {"topologySpreadConstraints": spread,
                      "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}} for i in range(6)]
    bindings = _Bindings()
    controller = SchedulerController(bindings, DecisionLog(), seed=1)
    controller.informers = {"nodes": _Listed(nodes), "pods": _Listed(pods)}
    controller.event = lambda *args: None
    controller._mark_unschedulable = lambda obj, cycle, scheduler_name: None

    class Queue:
        def add_after(self, key, seconds):
            pass
    controller.queue = Queue()
    for i in range(6):
        controller.sync(f"default/shop-{i}")
    per_zone = {z: sum(1 for _pod, node in bindings.bound if node == f"n-{z}") for z in zones}
    assert per_zone == {"z1": 2, "z2": 2, "z3": 1}
    assert [name for name, _node in bindings.bound] == [f"shop-{i}" for i in range(5)]
    # shop-5 fits nowhere: its cycle's record says why, node by node
    record = controller.cycles["default/shop-5"]
    assert record.chosen is None
    assert {n: s.reasons for n, s in record.statuses.items()} == {
        "n-z1": ["node(s) didn't match pod topology spread constraints"],
        "n-z2": ["node(s) didn't match pod topology spread constraints"],
        "n-z3": ["Insufficient cpu"]}


def test_a_replicaset_pod_is_spread_by_the_system_defaults_and_each_decision_is_recorded_for_explain(tmp_path):
    """A Pod of a ReplicaSet without constraints of its own is scored by PodTopologySpread's system
    default constraints with the ReplicaSet's selector (the controller's informers of ReplicaSets,
    Services, ReplicationControllers, StatefulSets feed helper.DefaultSelector): with two replicas
    on n-z1 already, the third goes to the empty zone although LeastAllocated alone would tie.
    Each cycle's record is written beside the decision log for `labkit scheduler explain POD`."""
    import json

    from labkit.controllers.decisions import DecisionLog
    from labkit.controllers.scheduler import SchedulerController

    nodes = [{"metadata": {"name": f"n-{z}", "labels": {"topology.kubernetes.io/zone": z,
                                                         "kubernetes.io/hostname": f"n-{z}"}},
              "spec": {}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}} for z in ("z1", "z2")]
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs", "controller": True}]

    def pod(i, node=None):
        spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
        return {"metadata": {"name": f"web-{i}", "namespace": "default", "uid": f"u{i}", "labels": {"app": "web"},
                             "ownerReferences": owner}, "spec": dict(spec, **({"nodeName": node} if node else {}))}
    other = {"metadata": {"name": "other", "namespace": "default", "uid": "o", "labels": {"app": "other"}},
             "spec": {"nodeName": "n-z2", "containers": [{"name": "c", "resources": {"requests": {"cpu": "200m",
                                                                                                  "memory": "128Mi"}}}]}}
    rs = {"metadata": {"name": "web-1", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    bindings = _Bindings()
    controller = SchedulerController(bindings, DecisionLog(tmp_path / "decisions.log"), seed=1)
    controller.informers = {"nodes": _Listed(nodes), "pods": _Listed([pod(1, "n-z1"), pod(2, "n-z1"), other, pod(3)]),
                            "replicasets": _Listed([rs]), "services": _Listed([]),
                            "replicationcontrollers": _Listed([]), "statefulsets": _Listed([])}
    controller.event = lambda *args: None
    controller.sync("default/web-3")
    assert bindings.bound == [("web-3", "n-z2")]
    scores = controller.cycles["default/web-3"].scores["PodTopologySpread"]
    assert scores["n-z2"][1] == 100 and scores["n-z1"][1] < 100
    record = json.loads((tmp_path / "scheduler" / "default" / "web-3.json").read_text())
    assert record["uid"] == "u3" and record["chosen"] == "n-z2" and record["rejected_by"] == {}
    assert "PodTopologySpread: n-z1 " in record["explain"] and record["explain"].endswith("Bound to n-z2: the highest "
                                                                                          f"total ({controller.cycles['default/web-3'].totals['n-z2']}).")
    assert sorted(p["name"] for p in record["situation"]["pods"]) == ["other", "web-1", "web-2"]
    assert record["situation"]["incoming"]["containers"] == [{"name": "c", "requests": {"cpu": "100m",
                                                                                         "memory": "64Mi"}}]


BIN_PACKER = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packer
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
"""


def test_a_second_profile_from_the_configuration_configmap_packs_its_pods(server):
    """kube-system/kube-scheduler-config holds a KubeSchedulerConfiguration: a Pod whose
    schedulerName is its second profile's is scored by that profile (NodeResourcesFit
    MostAllocated: the fullest node that fits); a configuration kube-scheduler would refuse
    changes nothing and says why in an event on the ConfigMap."""
    c = server.client()
    create_nodes(c, *(node(name, "4") for name in ("node-1", "node-2", "node-3")))
    c.create("v1", "configmaps", {"metadata": {"name": "kube-scheduler-config", "namespace": "kube-system"},
                                  "data": {"config.yaml": BIN_PACKER}}, "kube-system")
    placed = []
    for i in range(3):
        p = pod(f"batch-{i}", "1")
        p["spec"]["schedulerName"] = "bin-packer"
        c.create("v1", "pods", p, "default")
        assert wait_until(lambda: c.get("v1", "pods", f"batch-{i}", "default")["spec"].get("nodeName"), timeout=30)
        placed.append(c.get("v1", "pods", f"batch-{i}", "default")["spec"]["nodeName"])
    assert len(set(placed)) == 1, placed            # LeastAllocated would have spread them over three
    assert wait_until(lambda: events(c, "batch-2", "Scheduled"), timeout=10)
    assert events(c, "batch-2", "Scheduled")[0]["source"]["component"] == "bin-packer"   # the profile records it
    cm = c.get("v1", "configmaps", "kube-scheduler-config", "kube-system")
    cm["data"]["config.yaml"] = BIN_PACKER + "  plugins:\n    score:\n      enabled:\n      - name: MostPacked\n"
    c.update("v1", "configmaps", cm, "kube-system")

    def refused():
        return [e for e in c.list("v1", "events", "kube-system")[0] if e["reason"] == "FailedToLoadConfiguration"]
    assert wait_until(refused, timeout=30)
    assert refused()[0]["message"] == ('initializing profiles: creating profile for scheduler name bin-packer: '
                                       'ScorePlugin "MostPacked" does not exist')
    p = pod("batch-3", "1")
    p["spec"]["schedulerName"] = "bin-packer"          # the profile it had still decides
    c.create("v1", "pods", p, "default")
    assert wait_until(lambda: c.get("v1", "pods", "batch-3", "default")["spec"].get("nodeName") == placed[0], timeout=30)


def test_the_queue_pops_the_highest_priority_first_then_the_earliest_queued():
    """queuesort/priority_sort.go Less: priority, then the time a Pod was queued."""
    from labkit.controllers.scheduler import SchedulerController
    from labkit.controllers.decisions import DecisionLog
    from labkit.scheduler.queue import ActiveQueue, less

    assert less(10, 5.0, 0, 1.0) and not less(0, 1.0, 10, 5.0)
    assert less(10, 1.0, 10, 2.0) and not less(10, 2.0, 10, 1.0)
    priorities = {"ns/low": 0, "ns/high": 1000, "ns/mid": 10, "ns/high-later": 1000, "ns/low-later": 0}
    queue = ActiveQueue("scheduler", priorities.__getitem__)
    for key in priorities:
        queue.add(key)
    popped = [queue.get(timeout=0) for _ in priorities]
    assert popped == ["ns/high", "ns/high-later", "ns/mid", "ns/low", "ns/low-later"]
    # the scheduler controller's queue is one, reading each Pod's spec.priority from its informer
    controller = SchedulerController(None, DecisionLog())
    controller.informers = {"pods": _Listed([
        {"metadata": {"name": "a", "namespace": "ns"}, "spec": {}},
        {"metadata": {"name": "b", "namespace": "ns"}, "spec": {"priority": 2000000000}}])}
    made = controller.make_queue()
    made.add("ns/a")
    made.add("ns/b")
    assert [made.get(timeout=0), made.get(timeout=0)] == ["ns/b", "ns/a"]


def test_preemption_weighs_the_pod_disruption_budgets_the_server_holds(server):
    """DefaultPreemption picks the node whose victims violate the fewest PodDisruptionBudgets
    before the one with the lowest-priority victims (default_preemption.go
    getPodDisruptionBudgets, filterPodsWithPDBViolation; preemption.go pickOneNodeForPreemption):
    node-1's victims (priority 1) are all guarded by a PDB that allows no disruption, node-2's
    (priority 2) by none, so node-2 is nominated. Without the PDBs it would be node-1."""
    c = server.client()
    c.create("policy/v1", "poddisruptionbudgets", {"metadata": {"name": "guarded", "namespace": "default"},
                                                   "spec": {"maxUnavailable": 0,
                                                            "selector": {"matchLabels": {"app": "guarded"}}}},
             "default")
    for value in (1, 2, 10):
        c.create("scheduling.k8s.io/v1", "priorityclasses", {"metadata": {"name": f"prio-{value}"}, "value": value})
    create_nodes(c, node("node-1", "2"), node("node-2", "2"))
    for name, priority, on in (("a1", 1, "node-1"), ("a2", 1, "node-1"), ("b1", 2, "node-2"), ("b2", 2, "node-2")):
        body = pod(name, "1", priority, node_name=on)
        if on == "node-1":
            body["metadata"]["labels"] = {"app": "guarded"}
        c.create("v1", "pods", body, "default")
    c.create("v1", "pods", pod("high", "2", 10), "default")
    assert wait_until(lambda: c.get("v1", "pods", "high", "default")["status"].get("nominatedNodeName"), timeout=30)
    assert c.get("v1", "pods", "high", "default")["status"]["nominatedNodeName"] == "node-2"
    deleting = {name for name in ("a1", "a2", "b1", "b2")
                if c.get("v1", "pods", name, "default")["metadata"].get("deletionTimestamp")}
    assert deleting == {"b1", "b2"}
