"""The Node a device manager's kubelet writes (labkit/devices/nodestatus.py, after kubelet v1.34.1
nodestatus/setters.go MachineInfo and kubelet_node_status.go): capacity and allocatable of the
plugins' extended resources on an API server, from labkit's kubelet over real gRPC with the
reference plugin; registration of a recreated node; the scheduler's `Insufficient` against it."""

from __future__ import annotations

import time

import pytest

from labkit.apiserver.client import LocalClient
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store
from labkit.devices.kubelet import Kubelet
from labkit.devices.nodestatus import MACHINE, NodeStatus, extended, initial_node, machine_info, reset_extended
from labkit.devices.plugin import ReferencePlugin
from labkit.devices.session import Session
from support import wait_until

WIDGET = "example.com/widget"


@pytest.fixture
def client(tmp_path):
    return LocalClient(Api(Registry(Store(tmp_path / "objects.db"))), "admin", ["system:masters"])


# -- setters.go MachineInfo, reconcileExtendedResource ---------------------------------------------

def test_capacity_counts_every_device_allocatable_the_healthy_ones():
    status = machine_info({}, {WIDGET: 4}, {WIDGET: 3}, [])
    assert status["capacity"] == {**MACHINE, WIDGET: "4"} and status["allocatable"] == {**MACHINE, WIDGET: "3"}


def test_a_removed_resource_stays_with_capacity_zero():
    before = machine_info({}, {WIDGET: 4}, {WIDGET: 0}, [])
    after = machine_info(before, {}, {}, [WIDGET])
    assert after["capacity"][WIDGET] == "0" and after["allocatable"][WIDGET] == "0"


def test_an_extended_resource_gone_from_capacity_leaves_allocatable():
    status = {"capacity": dict(MACHINE), "allocatable": {**MACHINE, WIDGET: "2"}}
    assert WIDGET not in machine_info(status, {}, {}, [])["allocatable"]


def test_a_recreated_node_zeroes_its_extended_resources_only():
    status = machine_info({}, {WIDGET: 4, "example.com/gadget": 2}, {WIDGET: 4, "example.com/gadget": 1}, [])
    zeroed = reset_extended(status)
    assert extended(zeroed) == {"capacity": {WIDGET: 0, "example.com/gadget": 0},
                                "allocatable": {WIDGET: 0, "example.com/gadget": 0}}
    assert {k: zeroed["capacity"][k] for k in MACHINE} == MACHINE


# -- on an API server -------------------------------------------------------------------------------

def test_register_creates_the_node_and_reconciles_an_existing_one(client):
    node = NodeStatus(client, "widget-node")
    node.register(node_recreated=True)
    assert client.get("v1", "nodes", "widget-node")["status"]["capacity"] == MACHINE
    node.update({WIDGET: 4}, {WIDGET: 4}, [])
    assert node.read() == {"capacity": {WIDGET: 4}, "allocatable": {WIDGET: 4}}
    node.register(node_recreated=False)            # a checkpoint exists: kubelet restarted, nothing zeroed
    assert node.read() == {"capacity": {WIDGET: 4}, "allocatable": {WIDGET: 4}}
    node.register(node_recreated=True)
    assert node.read() == {"capacity": {WIDGET: 0}, "allocatable": {WIDGET: 0}}


def test_an_unchanged_status_is_not_written_again(client):
    node = NodeStatus(client, "widget-node")
    node.register(node_recreated=True)
    first = node.update({WIDGET: 4}, {WIDGET: 3}, [])
    again = node.update({WIDGET: 4}, {WIDGET: 3}, [])
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    changed = node.update({WIDGET: 4}, {WIDGET: 4}, [])
    assert changed["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]


def test_the_node_follows_health_plugin_death_and_the_grace_period(tmp_path, client):
    node = NodeStatus(client, "widget-node")
    node.register(node_recreated=True)
    kubelet = Kubelet(tmp_path / "device-plugins", numa_nodes=[0, 1])

    def sync():
        node.update(*kubelet.device_capacity())
    kubelet.on_change = sync
    kubelet.start()
    plugin = ReferencePlugin({"resource": WIDGET, "socket": "widget.sock",
                              "devices": [{"id": f"w{i}", "numa": i // 2} for i in range(4)]}, kubelet.directory)
    try:
        plugin.start()
        assert wait_until(lambda: node.read() == {"capacity": {WIDGET: 4}, "allocatable": {WIDGET: 4}}, 10), "4/4 not reached: " + repr(node.read())
        plugin._apply({**plugin.spec, "devices": [{"id": f"w{i}", "numa": i // 2, **(
            {"health": "Unhealthy"} if i == 2 else {})} for i in range(4)]})
        assert wait_until(lambda: node.read() == {"capacity": {WIDGET: 4}, "allocatable": {WIDGET: 3}}, 10), "4/3 not reached: " + repr(node.read())
        plugin.stop()
        # PluginDisconnected: every device unhealthy at once; capacity kept for the grace period
        assert wait_until(lambda: node.read() == {"capacity": {WIDGET: 4}, "allocatable": {WIDGET: 0}}, 10), "4/0 not reached: " + repr(node.read())
        kubelet.clock = lambda: time.time() + 5 * 60 + 10
        sync()
        assert node.read() == {"capacity": {WIDGET: 0}, "allocatable": {WIDGET: 0}}
        assert WIDGET in client.get("v1", "nodes", "widget-node")["status"]["capacity"]    # kept, at 0
    finally:
        plugin.stop()
        kubelet.stop()


def test_a_session_registers_a_fresh_node_and_reads_it_back(tmp_path, client):
    # an earlier run left the resource on the Node: the new run's kubelet has no checkpoint, so it
    # zeroes it (reconcileExtendedResource) before any plugin registered
    node = NodeStatus(client, "widget-node")
    node.register(node_recreated=True)
    node.update({WIDGET: 4}, {WIDGET: 4}, [])
    plugin_file = tmp_path / "never.py"
    plugin_file.write_text("import time\ntime.sleep(30)\n")
    import subprocess
    import sys

    started = []

    def spawn(tag, argv, extra_env):
        proc = subprocess.Popen(argv, env={"PATH": "/usr/bin:/bin", **extra_env})
        started.append(proc)
        return proc
    session = Session(tmp_path / "node", plugin_file, spawn, lambda tag: tmp_path / f"{tag}.log", node_status=node)
    try:
        with session as s:
            assert s.node() == {"capacity": {WIDGET: 0}, "allocatable": {WIDGET: 0}}
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    assert [p.args[0] for p in started] == [sys.executable]        # the plugin, and nothing else


def test_a_plugin_listed_before_the_node_is_registered_reaches_the_node_after_its_registration(tmp_path, client):
    # the session starts the plugin before it registers the Node (the plugin's Python and grpc take
    # longer): a plugin that registers and lists first is written to the Node only once the Node is
    # registered, and then at once, in kubelet's order (register, then status)
    written = []

    class Recording(NodeStatus):
        def register(self, node_recreated):
            written.append("register")
            return super().register(node_recreated)

        def update(self, capacity, allocatable, removed):
            written.append(("update", dict(capacity)))
            return super().update(capacity, allocatable, removed)

    node = Recording(client, "widget-node")
    plugins = []

    def spawn(tag, argv, extra_env):      # the plugin, in this process, registered and listed at once
        plugin = ReferencePlugin({"resource": WIDGET, "socket": "widget.sock",
                                  "devices": [{"id": f"w{i}", "numa": i // 2} for i in range(4)]},
                                 session.kubelet.directory)
        plugins.append(plugin)
        plugin.start()
        assert wait_until(lambda: session.kubelet.healthy_count(WIDGET) == 4, 10)
        return None
    session = Session(tmp_path / "node", tmp_path / "unused.py", spawn, lambda tag: tmp_path / f"{tag}.log",
                      node_status=node)
    try:
        with session as s:
            assert written[0] == "register" and ("update", {WIDGET: 4}) in written, written
            assert s.node() == {"capacity": {WIDGET: 4}, "allocatable": {WIDGET: 4}}
    finally:
        for plugin in plugins:
            plugin.stop()


# -- the scheduler against the Node ------------------------------------------------------------------

def test_the_scheduler_finds_the_widgets_insufficient(client):
    # noderesources/fit.go fitsRequest against the Node as the kubelet wrote it: 4 asked, 3 allocatable
    from labkit.scheduler.objects import Node, NodeInfo, Pod
    from labkit.scheduler.plugins import NodeResourcesFit
    node = NodeStatus(client, "widget-node")
    node.register(node_recreated=True)
    node.update({WIDGET: 4}, {WIDGET: 3}, [])
    stored = NodeInfo(Node(client.get("v1", "nodes", "widget-node")))

    def asking(n):
        return Pod({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [
            {"name": "c", "image": "x", "resources": {"limits": {WIDGET: str(n)}, "requests": {WIDGET: str(n)}}}]}})
    assert NodeResourcesFit().insufficient(asking(4).requests(), stored) == [f"Insufficient {WIDGET}"]
    assert NodeResourcesFit().insufficient(asking(3).requests(), stored) == []
    assert initial_node("widget-node")["status"]["nodeInfo"]["kubeletVersion"] == "v1.34.1"
