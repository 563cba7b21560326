"""labkit.apiserver.process, in-process: what the embedded server writes once it listens
(server.json) is what a check reads to reach it, and says nothing once the server has stopped."""

from __future__ import annotations

import os

import pytest

from labkit.apiserver import process
from labkit.apiserver.server import EmbeddedServer


def test_a_reader_finds_the_listening_server_from_its_server_json_and_nothing_once_it_stopped(tmp_path):
    state = tmp_path / "apiserver"
    assert process.read_server_info(state) is None and not process.server_alive(state)
    server = EmbeddedServer(state, controllers=[]).start()
    try:
        info = process.read_server_info(state)
        assert (info.url, info.port, info.pid, info.kubeconfig, info.state_dir) == \
            (server.url, server.port, os.getpid(), server.kubeconfig, state)
        assert info.token == server.token                          # the admin's, from the kubeconfig it wrote
        assert process.server_alive(state)
        assert info.client().get("v1", "namespaces", "default")["metadata"]["name"] == "default"
    finally:
        server.stop()
    assert process.read_server_info(state) is None and not process.server_alive(state)


EARLY_CONTROLLERS = ["serviceaccount", "garbagecollector", "replicaset", "nodelifecycle", "scheduler", "namespace"]


def _node(name: str) -> dict:
    from labkit.nodes import ready_node
    return ready_node(name, {"cpu": "4", "memory": "8Gi", "pods": "110"})


def test_the_server_says_where_it_listens_before_its_controllers_start_and_they_act_on_what_was_made_meanwhile(
        tmp_path):
    """server.json is there, and requests are served, before any controller runs; each controller's
    informers list what was made in between and it acts on it, as upstream's controllers started
    after the API server do (their informers' initial List)."""
    from support import wait_until

    state = tmp_path / "apiserver"
    server = EmbeddedServer(state, controllers=EARLY_CONTROLLERS).start(controllers="later")
    try:
        info = process.read_server_info(state)
        assert info is not None
        c = info.client()
        startup = c.check(*c.request("GET", "/labkit/v1/controllers/startup"))
        assert startup == {"done": False, "pending": EARLY_CONTROLLERS, "failed": {}, "running": []}
        assert not server.idle()            # nothing may count as settled before the controllers run
        # one object for each controller to act on, all made before any of them runs
        c.create("v1", "namespaces", {"metadata": {"name": "early"}})
        c.create("v1", "configmaps", {"metadata": {"name": "dangling", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "0000-gone"}]}}, "default")
        c.create("apps/v1", "replicasets", {"metadata": {"name": "web"}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}, "early")
        c.create("v1", "nodes", _node("node-1"))
        # (the Pod needs an account: the service-account controller has not made `default` yet)
        c.create("v1", "serviceaccounts", {"metadata": {"name": "builder"}}, "default")
        c.create("v1", "pods", {"metadata": {"name": "waiting"}, "spec": {
            "serviceAccountName": "builder", "containers": [{"name": "c", "image": "nginx"}]}}, "default")
        c.create("v1", "namespaces", {"metadata": {"name": "doomed"}})
        c.delete("v1", "namespaces", "doomed")
        assert c.get_or_none("v1", "serviceaccounts", "default", "early") is None
        assert not c.list("v1", "pods", "early")[0]
        assert c.get("v1", "namespaces", "doomed")["status"]["phase"] == "Terminating"
        assert any(t["key"] == "node.kubernetes.io/not-ready" for t in c.get("v1", "nodes", "node-1")["spec"]["taints"])

        server.start_controllers()
        startup = c.check(*c.request("GET", "/labkit/v1/controllers/startup"))
        assert startup == {"done": True, "pending": [], "failed": {}, "running": EARLY_CONTROLLERS}
        assert wait_until(lambda: c.get_or_none("v1", "serviceaccounts", "default", "early") is not None)
        assert wait_until(lambda: c.get_or_none("v1", "configmaps", "dangling", "default") is None)
        assert wait_until(lambda: len(c.list("v1", "pods", "early", label_selector="app=web")[0]) == 2)
        assert wait_until(lambda: not (c.get("v1", "nodes", "node-1").get("spec") or {}).get("taints"))
        assert wait_until(lambda: c.get("v1", "pods", "waiting", "default")["spec"].get("nodeName") == "node-1")
        assert wait_until(lambda: c.get_or_none("v1", "namespaces", "doomed") is None)
    finally:
        server.stop()


def test_a_request_that_starts_or_stops_a_controller_waits_for_the_initial_ones(tmp_path, monkeypatch):
    """A controller stopped by a request while the initial ones start would be started again by
    them: the request waits until they have (here it may not wait at all: 503), then acts."""
    from labkit.apiserver import server as server_module
    from labkit.apiserver.errors import ApiError

    monkeypatch.setattr(server_module, "STARTUP_WAIT", 0.0)
    server = EmbeddedServer(tmp_path / "apiserver", controllers=["garbagecollector"]).start(controllers="later")
    try:
        c = process.read_server_info(tmp_path / "apiserver").client()
        with pytest.raises(ApiError) as refused:
            c.check(*c.request("PUT", "/labkit/v1/controllers/garbagecollector", body={"running": False}))
        assert refused.value.code == 503 and "still starting" in refused.value.message
        server.start_controllers()
        assert c.check(*c.request("PUT", "/labkit/v1/controllers/garbagecollector",
                                  body={"running": False}))["garbagecollector"] is False
        assert not server.controllers.running("garbagecollector")
    finally:
        server.stop()


def test_spawn_returns_once_the_server_listens_and_waits_for_exactly_the_controllers_asked_for(tmp_path):
    from types import SimpleNamespace

    from labkit.errors import LabkitError
    from labkit.state import LabEnv, LabState

    state = LabState("startup", tmp_path / "state")
    state.ensure_dir()
    env = LabEnv(SimpleNamespace(id="startup"), state)
    try:
        info = process.spawn(env, controllers=["garbagecollector", "serviceaccount"], ready=["serviceaccount"])
        c = info.client()
        assert "serviceaccount" in c.check(*c.request("GET", "/labkit/v1/controllers/startup"))["running"]
        with pytest.raises(LabkitError, match="does not run the controller.* scheduler"):
            info.wait_controllers(["scheduler"], timeout=30)
    finally:
        problems = state.ledger.cleanup()
    assert not problems


def test_work_cut_off_by_the_server_stopping_is_not_reported(tmp_path, capfd):
    """A server stopped while it still registered its APIServices printed "storage is closed
    (retrying)" (the store closes right after the internal loops are told to stop), into the
    one-line error of a `labkit gc run` that ended at once. Work cut off by a stop is no error."""
    from labkit.apiserver.errors import internal
    srv = EmbeddedServer(tmp_path / "apiserver", controllers=[]).start()
    internals = srv.internals

    def cut_off():
        internals._stopping.set()
        raise internal("storage is closed")

    internals._register_apiservices = cut_off
    internals._enqueue(("apiservices", None))
    internals._thread.join(5)
    srv.stop()
    assert "storage is closed" not in capfd.readouterr().err
