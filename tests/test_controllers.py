"""The workload controllers, the node stand-in and the GC working together on the embedded server;
controllers stopped and started; the server as a lab process."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from labkit import procs
from labkit.apiserver.errors import ApiError
from labkit.apiserver.process import spawn
from labkit.apiserver.server import EmbeddedServer
from labkit.controllers import decisions
from labkit.state import LabEnv, LabState
from support import labkit, labkit_processes, wait_until

TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "nginx"}]}}




@pytest.fixture
def server(tmp_path):
    srv = EmbeddedServer(tmp_path / "apiserver").start()
    srv.client().create("v1", "namespaces", {"metadata": {"name": "t"}})
    yield srv
    srv.stop()


def pods(c, selector="app=web"):
    return c.list("v1", "pods", "t", label_selector=selector)[0]


def running(c, n, selector="app=web"):
    items = pods(c, selector)
    return len(items) == n and all(p.get("status", {}).get("phase") == "Running" and not
                                   p["metadata"].get("deletionTimestamp") for p in items)


def test_idle_controller_workers_block_until_work_comes_or_they_are_stopped(tmp_path, monkeypatch):
    """Workers wait in Get without a timeout (upstream's queue.Get blocks; wait.Until starts the
    worker again): an idle lab's dozens of workers woke twice a second each for nothing. stop()
    shuts the queues down, which ends every wait."""
    from labkit.controllers.workqueue import RateLimitingQueue
    timeouts = []
    original = RateLimitingQueue.get

    def get(self, timeout=None):
        timeouts.append(timeout)
        return original(self, timeout)

    monkeypatch.setattr(RateLimitingQueue, "get", get)
    srv = EmbeddedServer(tmp_path / "apiserver").start()
    try:
        srv.client().create("v1", "namespaces", {"metadata": {"name": "t"}})
        assert wait_until(lambda: len(timeouts) > 10)
    finally:
        srv.stop()
    assert set(timeouts) == {None}, sorted(set(timeouts), key=str)


def test_deployment_builds_a_real_owner_chain_and_background_deletion_removes_it(server):
    c = server.client()
    d = c.create("apps/v1", "deployments", {"metadata": {"name": "web"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE}}, "t")
    assert wait_until(lambda: running(c, 2))
    (rs,) = c.list("apps/v1", "replicasets", "t")[0]
    assert rs["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                                  "uid": d["metadata"]["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]
    assert rs["metadata"]["name"] == f"web-{rs['metadata']['labels']['pod-template-hash']}"
    for p in pods(c):
        assert p["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                     "name": rs["metadata"]["name"], "uid": rs["metadata"]["uid"],
                                                     "controller": True, "blockOwnerDeletion": True}]
        assert p["spec"]["nodeName"] == "labkit-node" and p["status"]["podIP"].startswith("10.244.")
    assert wait_until(lambda: c.get("apps/v1", "deployments", "web", "t").get("status", {}).get("readyReplicas") == 2)
    c.delete("apps/v1", "deployments", "web", "t", options={"propagationPolicy": "Background"})
    assert wait_until(lambda: not c.list("apps/v1", "replicasets", "t")[0] and not pods(c))
    messages = [e["message"] for e in server.decisions.recent("info")]
    assert f"replicaset t/{rs['metadata']['name']}: owner Deployment web is absent → delete with Background " \
           "(the default)" in messages


def test_orphaned_pods_are_adopted_by_a_new_replicaset_and_released_when_they_stop_matching(server):
    c = server.client()
    spec = {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE}
    c.create("apps/v1", "replicasets", {"metadata": {"name": "first"}, "spec": spec}, "t")
    assert wait_until(lambda: running(c, 2))
    names = sorted(p["metadata"]["name"] for p in pods(c))
    c.delete("apps/v1", "replicasets", "first", "t", options={"propagationPolicy": "Orphan"})
    assert wait_until(lambda: all("ownerReferences" not in p["metadata"] for p in pods(c)))
    assert sorted(p["metadata"]["name"] for p in pods(c)) == names
    second = c.create("apps/v1", "replicasets", {"metadata": {"name": "second"}, "spec": spec}, "t")
    owned_by_second = lambda: all((p["metadata"].get("ownerReferences") or [{}])[0].get("uid")  # noqa: E731
                                  == second["metadata"]["uid"] for p in pods(c))
    assert wait_until(owned_by_second)
    assert sorted(p["metadata"]["name"] for p in pods(c)) == names        # adopted, none created
    # a pod whose labels stop matching is released, and replaced
    c.patch("v1", "pods", names[0], {"metadata": {"labels": {"app": "other"}}}, "merge", "t")
    assert wait_until(lambda: "ownerReferences" not in c.get("v1", "pods", names[0], "t")["metadata"])
    assert wait_until(lambda: running(c, 2))
    # which Pods were adopted and released: a sync that reads a Pod from a cache the adoption has not
    # reached yet patches it again (a merge by uid, harmless), as upstream's ClaimPods would
    log = [(e["action"], e["item"]["name"]) for e in server.decisions.recent("info") if e["controller"] == "replicaset"]
    assert {n for a, n in log if a == "adopt"} == set(names) and [n for a, n in log if a == "release"] == [names[0]], log


def test_graceful_pod_deletion_is_finished_by_the_node(server):
    """A container whose PID 1 ignores SIGTERM (sleep) is killed when the grace period is over; the
    pod ends Failed (exit 137) before the node deletes it."""
    c = server.client()
    c.create("v1", "pods", {"metadata": {"name": "slow"}, "spec": {"terminationGracePeriodSeconds": 1, "containers": [
        {"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}}, "t")
    assert wait_until(lambda: c.get("v1", "pods", "slow", "t").get("status", {}).get("phase") == "Running")
    last = {}
    server.store.add_listener(lambda e: last.update(pod=e.obj) if (e.key, e.name, e.type) == ("/pods", "slow",
                                                                                              "DELETED") else None)
    started = time.monotonic()
    _, kept = c.delete("v1", "pods", "slow", "t")
    assert kept["metadata"]["deletionGracePeriodSeconds"] == 1
    assert wait_until(lambda: not c.list("v1", "pods", "t", field_selector="metadata.name=slow")[0])
    assert time.monotonic() - started >= 0.9
    # listeners hear of a write when the store has made it durable, a moment after reads see it
    assert wait_until(lambda: "pod" in last)
    status = last["pod"]["status"]
    assert status["phase"] == "Failed"
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


def test_a_pod_whose_process_exits_on_sigterm_ends_at_once(server):
    c = server.client()
    c.create("v1", "pods", {"metadata": {"name": "pause"}, "spec": {"terminationGracePeriodSeconds": 30, "containers": [
        {"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}, "t")
    assert wait_until(lambda: c.get("v1", "pods", "pause", "t").get("status", {}).get("phase") == "Running")
    last = {}
    server.store.add_listener(lambda e: last.update(pod=e.obj) if (e.key, e.name, e.type) == ("/pods", "pause",
                                                                                              "DELETED") else None)
    c.delete("v1", "pods", "pause", "t")
    assert wait_until(lambda: "pod" in last, timeout=5)      # not the 30 s grace period
    assert last["pod"]["status"]["phase"] == "Succeeded"
    terminated = last["pod"]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")


def test_gc_can_be_stopped_and_started_through_the_admin_api(server):
    c = server.http_client()
    c.create("v1", "configmaps", {"metadata": {"name": "owner"}}, "t")
    owner = c.get("v1", "configmaps", "owner", "t")
    c.create("v1", "configmaps", {"metadata": {"name": "dependent", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}]}}, "t")
    status = c.check(*c.request("PUT", "/labkit/v1/controllers/garbagecollector", body={"running": False}))
    assert status["garbagecollector"] is False
    c.delete("v1", "configmaps", "owner", "t")
    time.sleep(1)
    assert c.get("v1", "configmaps", "dependent", "t")       # nobody collects it
    c.check(*c.request("PUT", "/labkit/v1/controllers/garbagecollector", body={"running": True}))
    assert wait_until(lambda: not c.list("v1", "configmaps", "t", field_selector="metadata.name=dependent")[0])
    graph = c.check(*c.request("GET", "/labkit/v1/garbagecollector/graph"))
    assert graph["running"] and graph["nodes"]
    with pytest.raises(ApiError) as err:
        server.client("someone", ["system:authenticated"]).check(
            *server.client("someone", ["system:authenticated"]).request("GET", "/labkit/v1/controllers"))
    assert err.value.code == 403


def test_server_as_a_lab_process_keeps_objects_across_restarts_and_is_cleaned_up(tmp_path):
    lab = SimpleNamespace(id="gcproc")
    state = LabState("gcproc", tmp_path / "state")
    state.ensure_dir()
    env = LabEnv(lab, state)
    info = spawn(env, controllers=["garbagecollector"])
    try:
        client = info.client()
        client.create("v1", "configmaps", {"metadata": {"name": "kept"}, "data": {"a": "b"}}, "default")
        client.create("v1", "configmaps", {"metadata": {"name": "gone", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "0000-dead"}]}}, "default")
        assert wait_until(lambda: not client.list("v1", "configmaps", "default",
                                                  field_selector="metadata.name=gone")[0])
        log = labkit("gc", "log", "--state", str(info.state_dir), check=0).stdout
        assert "configmap default/gone: owner ConfigMap ghost is absent → delete with Background" in log
        procs.kill(procs.find(procs.owner_token(env, "apiserver")))
        again = spawn(env, controllers=[])
        assert again.port != 0 and again.client().get("v1", "configmaps", "kept", "default")["data"] == {"a": "b"}
        assert decisions.read(info.state_dir / "decisions.log")
    finally:
        problems = state.ledger.cleanup()
    assert not problems
    assert not [p for p in labkit_processes() if env.token in p]


def test_labkit_apiserver_runs_in_the_foreground(tmp_path):
    import signal
    import subprocess
    from labkit.apiserver.client import HttpClient
    from labkit.apiserver.process import read_server_info
    from support import LABKIT, REPO

    state = tmp_path / "server"
    proc = subprocess.Popen([*LABKIT, "apiserver", "--state", str(state), "--controllers", "none"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: read_server_info(state) is not None, timeout=30), proc.stderr.read()
        info = read_server_info(state)
        assert HttpClient.from_kubeconfig(info.kubeconfig).get("v1", "namespaces", "default")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert f"export KUBECONFIG={state / 'kubeconfig'}" in out and "controllers: none" in out
