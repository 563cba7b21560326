"""kubelet's side of the device plugin API over real gRPC (labkit/devices/kubelet.py) against
labkit's reference plugin (labkit/devices/plugin.py), both on real unix sockets in a temporary
directory: the schema, registration and its refusals, ListAndWatch and health, preferred
allocation and Allocate, PreStartContainer, plugin death, kubelet restart with its checkpoint,
the `plugin serve` command, and a container process that receives what Allocate returned."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from labkit.devices import api, checkpoint, container
from labkit.devices.kubelet import Kubelet, is_socket
from labkit.devices.plugin import ReferencePlugin
from support import REPO

WIDGET = "example.com/widget"


def wait_for(condition, what: str, seconds: float = 10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = condition()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"not reached: {what}")


@pytest.fixture
def node(tmp_path):
    kubelet = Kubelet(tmp_path / "device-plugins", numa_nodes=[0, 1])     # upstream's 10 s dial timeout
    kubelet.start()
    plugins = []

    def plugin(spec):
        p = ReferencePlugin(spec, kubelet.directory)
        plugins.append(p)
        p.start()
        return p

    yield kubelet, plugin
    for p in plugins:
        p.stop()
    kubelet.stop()


def spec(**extra):
    return {"resource": WIDGET, "socket": "widget.sock",
            "devices": [{"id": "w0", "numa": 0}, {"id": "w1", "numa": 1}, {"id": "w2", "numa": 1}],
            "allocate": {"envs": {"WIDGETS": "{ids}"},
                         "mounts": [{"container_path": "/run/widget", "host_path": "/srv/{ids}", "read_only": True}]},
            **extra}


# -- the schema ------------------------------------------------------------------------------------

def test_messages_carry_api_proto_field_numbers():
    # api.proto (staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1), message by message
    want = {"RegisterRequest": {"version": 1, "endpoint": 2, "resource_name": 3, "options": 4},
            "DevicePluginOptions": {"pre_start_required": 1, "get_preferred_allocation_available": 2},
            "Device": {"ID": 1, "health": 2, "topology": 3}, "NUMANode": {"ID": 1},
            "ContainerPreferredAllocationRequest": {"available_deviceIDs": 1, "must_include_deviceIDs": 2,
                                                    "allocation_size": 3},
            "ContainerAllocateResponse": {"envs": 1, "mounts": 2, "devices": 3, "annotations": 4, "cdi_devices": 5},
            "Mount": {"container_path": 1, "host_path": 2, "read_only": 3},
            "DeviceSpec": {"container_path": 1, "host_path": 2, "permissions": 3}}
    for name, fields in want.items():
        got = {f.name: f.number for f in api.message(name).DESCRIPTOR.fields}
        assert got == fields, name
    assert api.message("ContainerAllocateResponse").DESCRIPTOR.fields_by_name["envs"].message_type.GetOptions().map_entry
    assert [m.name for m in api._FILE.services_by_name["DevicePlugin"].methods] == \
        ["GetDevicePluginOptions", "ListAndWatch", "GetPreferredAllocation", "Allocate", "PreStartContainer"]
    assert api._FILE.services_by_name["DevicePlugin"].methods_by_name["ListAndWatch"].server_streaming


def test_the_checkpoint_encoder_and_the_schema_write_the_same_bytes():
    response = {"envs": {"B": "2", "A": "1"}, "mounts": [{"container_path": "/c", "host_path": "/h", "read_only": True}],
                "devices": [{"container_path": "/dev/w", "host_path": "/dev/null", "permissions": "rw"}],
                "annotations": {"k": "v"}, "cdi_devices": [{"name": "example.com/widget=w0"}]}
    message = api.ContainerAllocateResponse(
        envs={"A": "1", "B": "2"}, mounts=[api.Mount(container_path="/c", host_path="/h", read_only=True)],
        devices=[api.DeviceSpec(container_path="/dev/w", host_path="/dev/null", permissions="rw")],
        annotations={"k": "v"}, cdi_devices=[api.CDIDevice(name="example.com/widget=w0")])
    assert api.ContainerAllocateResponse.FromString(checkpoint.encode_response(response)) == message


# -- registration ----------------------------------------------------------------------------------

def test_a_registered_plugin_puts_its_devices_on_the_node(node):
    kubelet, plugin = node
    assert is_socket(kubelet.socket)
    plugin(spec())
    assert wait_for(lambda: kubelet.node_status() == ({WIDGET: 3}, {WIDGET: 3}), "3 widgets")
    calls = [c["call"] for c in kubelet.manager.calls]
    assert calls[:2] == ["GetDevicePluginOptions", "ListAndWatch"]
    assert kubelet.manager.all_devices[WIDGET]["w1"].numa == (1,)
    saved = json.loads(kubelet.checkpoint_path.read_text())
    assert saved["Data"]["RegisteredDevices"] == {WIDGET: ["w0", "w1", "w2"]}


@pytest.mark.parametrize("version, resource, message", [
    ("v1alpha", WIDGET, 'requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]'),
    ("v1beta1", "widget", 'the ResourceName "widget" is invalid'),
    ("v1beta1", "kubernetes.io/widget", 'the ResourceName "kubernetes.io/widget" is invalid'),
    ("v1beta1", WIDGET, "failed to dial device plugin: context deadline exceeded"),
])
def test_registration_refusals_carry_kubelets_words(node, version, resource, message):
    kubelet, _ = node
    kubelet.dial_timeout = 0.5      # nobody listens: the refusal comes when the dial gives up
    with pytest.raises(grpc.RpcError) as refused:
        api.register(str(kubelet.socket), "nobody-listens.sock", resource, version=version)
    assert refused.value.code() == grpc.StatusCode.UNKNOWN
    assert refused.value.details() == message
    assert kubelet.node_status() == ({}, {})


def test_an_endpoint_is_joined_to_kubelets_directory_as_go_joins_it(node):
    """server.go Register dials filepath.Join(socketDir, endpoint): an endpoint that is the
    plugin socket's full path names <dir>/<dir>/widget.sock, where nobody listens."""
    from labkit.devices.kubelet import endpoint_path
    kubelet, _ = node
    here = str(kubelet.directory)
    assert endpoint_path(kubelet.directory, "widget.sock") == f"{here}/widget.sock"
    assert endpoint_path(kubelet.directory, f"{here}/widget.sock") == f"{here}{here}/widget.sock"
    assert endpoint_path(kubelet.directory, "../widget.sock") == f"{kubelet.directory.parent}/widget.sock"
    server = api.serve_plugin(_Listed(), str(kubelet.directory / "widget.sock"))
    try:
        kubelet.dial_timeout = 0.5
        with pytest.raises(grpc.RpcError) as refused:
            api.register(str(kubelet.socket), f"{here}/widget.sock", WIDGET)
        assert refused.value.details() == "failed to dial device plugin: context deadline exceeded"
        assert kubelet.node_status() == ({}, {})
    finally:
        server.stop(0)


class _Listed:
    """A plugin servicer that lists one widget (for the endpoint test: it is never dialled)."""

    def GetDevicePluginOptions(self, request, context):
        return api.DevicePluginOptions()

    def ListAndWatch(self, request, context):
        yield api.ListAndWatchResponse(devices=[api.Device(ID="w0", health=api.HEALTHY)])


def test_kubelet_records_each_registration_and_what_became_of_its_stream(node):
    # the record the device-plugins checks judge over their whole window: a registration again
    # with the same kubelet, a stream the plugin ended, a kubelet restart, each says so
    kubelet, plugin = node
    p = plugin(spec())
    wait_for(lambda: kubelet.node_status()[1] == {WIDGET: 3}, "registered")
    fate = lambda: [(r["kubelet"], r["stream"]) for r in kubelet.registrations]   # noqa: E731
    assert fate() == [(1, "open")]
    # answered after the dial-back (a timer the plugin starts on the answer runs from then on)
    first = kubelet.registrations[0]
    assert first["answered"] and first["at"] <= first["answered_at"] <= kubelet.clock()
    api.register(str(kubelet.socket), "widget.sock", WIDGET)            # the same plugin registers again
    assert wait_for(lambda: fate() == [(1, "replaced"), (1, "open")], "the first stream replaced")
    kubelet.restart()
    assert fate() == [(1, "replaced"), (1, "closed")]
    # it sees kubelet.sock made anew, turn by turn as its watch loop (run) would, until registered;
    # a Register that failed (kubelet could not dial the plugin's socket served anew, or the
    # plugin's call timed out while kubelet still dialled back) is made again: kubelet records the
    # refused one without a stream, and the stream a later one replaced

    def registered_again():
        p.step()
        got = fate()
        return got[:2] == [(1, "replaced"), (1, "closed")] and got[-1] == (2, "open") \
            and all(f in ((2, "replaced"), (2, None)) for f in got[2:-1])
    try:
        wait_for(registered_again, "registered again", seconds=30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: the registrations are {fate()}, the plugin's last error {p.last_error!r}")
    # the restarted kubelet's stream is set up: the plugin's first list reached it. gRPC Python can
    # leave a stream still being set up as the plugin's server goes away waiting for ever (a
    # channel with no connection left), about one stop in 500 to 1,300 with both in this process
    wait_for(lambda: any(c["call"] == "ListAndWatch" for c in kubelet.manager.calls), "the new stream's first list")
    p.stop()
    # the stream open when the plugin stopped ends with it; a Register the plugin gave up on (its
    # call timed out) that kubelet accepts only now, and so is last accepted though not last made,
    # replaces that stream and has its own end as the plugin's server is gone
    second = lambda: [r for r in kubelet.registrations if r["kubelet"] == 2]    # noqa: E731
    try:
        wait_for(lambda: any(r["stream"] == "ended" for r in second())
                 and not any(r["stream"] == "open" for r in second()), "the stream ended with the plugin")
    except AssertionError as exc:
        watching = [t.name for t in threading.enumerate() if t.name.startswith("listandwatch")]
        raise AssertionError(f"{exc}: the registrations are {fate()}, the plugin's last error {p.last_error!r}; "
                             f"kubelet's events {kubelet.events[-6:]}; its ListAndWatch threads alive {watching}")
    end = [r for r in second() if r["stream"] == "ended"][-1]["end"]   # its handler returned, or its server went first
    assert end == "the plugin finished the stream" or end.startswith("rpc error: code = "), end
    assert kubelet.registrations[0]["at"] <= kubelet.registrations[-1]["at"]


# -- ListAndWatch, health, plugin death -------------------------------------------------------------

def test_an_unhealthy_device_leaves_allocatable_not_capacity(node):
    kubelet, plugin = node
    p = plugin(spec())
    wait_for(lambda: kubelet.node_status()[1] == {WIDGET: 3}, "3 allocatable")
    p._apply({**p.spec, "devices": [{"id": "w0", "numa": 0, "health": "Unhealthy"}, {"id": "w1", "numa": 1},
                                    {"id": "w2", "numa": 1}]})
    assert wait_for(lambda: kubelet.node_status() == ({WIDGET: 3}, {WIDGET: 2}), "3 capacity, 2 allocatable")
    p.stop()
    # PluginDisconnected: every device unhealthy, capacity kept for the grace period
    assert wait_for(lambda: kubelet.node_status() == ({WIDGET: 3}, {WIDGET: 0}), "plugin gone")
    kubelet.clock = lambda: time.time() + 5 * 60 + 10
    assert kubelet.node_status() == ({WIDGET: 0}, {WIDGET: 0})


# -- allocation ------------------------------------------------------------------------------------

def pod(uid, count):
    return {"name": uid, "uid": uid, "containers": [{"name": "c", "limits": {WIDGET: count}}]}


def test_preferred_allocation_and_allocate_over_the_wire(node):
    kubelet, plugin = node
    plugin(spec(preferred=True))
    wait_for(lambda: kubelet.node_status()[1] == {WIDGET: 3}, "registered")
    assert kubelet.admit(pod("p1", 2)) is None
    preferred = [c for c in kubelet.manager.calls if c["call"] == "GetPreferredAllocation"]
    assert len(preferred) == 1 and sorted(preferred[0]["available"]) == ["w0", "w1", "w2"]
    assert {k: sorted(v) if isinstance(v, list) else v for k, v in preferred[0].items()} == \
        {"call": "GetPreferredAllocation", "resource": WIDGET, "available": ["w0", "w1", "w2"],
         "must_include": [], "size": 2, "answer": ["w1", "w2"]}
    options = kubelet.run_options("p1", "c")
    sent = ",".join(next(c["devices"] for c in kubelet.manager.calls if c["call"] == "Allocate"))   # in no order
    assert sorted(sent.split(",")) == ["w1", "w2"]
    assert options["envs"] == {"WIDGETS": sent}
    assert options["mounts"] == [{"container_path": "/run/widget", "host_path": f"/srv/{sent}", "read_only": True}]
    rejected = kubelet.admit(pod("p2", 2))
    assert rejected["message"] == (f"Allocate failed due to requested number of devices unavailable for {WIDGET}. "
                                   "Requested: 2, Available: 1, which is unexpected")


def test_device_ids_reach_the_plugin_as_a_go_sets_unsorted_list(node):
    # manager.go hands Allocate, GetPreferredAllocation and PreStartContainer `UnsortedList()` of a
    # set: what the plugin receives is the manager's unsorted order, not labkit's sorted bookkeeping
    kubelet, plugin = node
    p = plugin(spec(preferred=True, pre_start=True))
    wait_for(lambda: kubelet.node_status()[1] == {WIDGET: 3}, "registered")
    kubelet.manager.unsorted = lambda ids: sorted(ids, reverse=True)
    seen = {}
    answer_preferred, answer_allocate = p.GetPreferredAllocation, p.Allocate
    p.GetPreferredAllocation = lambda request, context: seen.setdefault(
        "preferred", list(request.container_requests[0].available_deviceIDs)) and answer_preferred(request, context)
    p.Allocate = lambda request, context: seen.setdefault(
        "allocate", list(request.container_requests[0].devices_ids)) and answer_allocate(request, context)
    p.PreStartContainer = lambda request, context: seen.setdefault(
        "pre_start", list(request.devices_ids)) and api.PreStartContainerResponse()
    assert kubelet.admit(pod("p1", 2)) is None
    kubelet.run_options("p1", "c")
    assert seen == {"preferred": ["w2", "w1", "w0"], "allocate": ["w2", "w1"], "pre_start": ["w2", "w1"]}
    assert kubelet.manager.pod_devices["p1"]["c"][WIDGET].devices == ["w1", "w2"]     # the bookkeeping is a set


def test_unsorted_list_is_a_permutation_in_no_fixed_order():
    import random

    from labkit.devices.manager import unsorted_list
    rng = random.Random(7)
    orders = {tuple(unsorted_list(["a", "b", "c"], rng)) for _ in range(200)}
    assert all(sorted(o) == ["a", "b", "c"] for o in orders) and len(orders) == 6


def test_a_plugin_error_on_allocate_rejects_the_pod(node):
    kubelet, plugin = node
    p = plugin(spec())
    wait_for(lambda: kubelet.node_status()[1] == {WIDGET: 3}, "registered")

    def broken(request, context):
        context.abort(grpc.StatusCode.UNKNOWN, "widget firmware busy")
    p.Allocate = broken
    got = kubelet.admit(pod("p1", 1))
    assert got["reason"] == "UnexpectedAdmissionError"
    assert got["message"] == ("Allocate failed due to rpc error: code = Unknown desc = widget firmware busy, "
                              "which is unexpected")
    assert kubelet.manager.pod_devices == {}


def test_pre_start_container_only_when_the_plugin_asks(node):
    kubelet, plugin = node
    p = plugin(spec(pre_start=True))
    wait_for(lambda: kubelet.node_status()[1] == {WIDGET: 3}, "registered")
    seen = []
    p.PreStartContainer = lambda request, context: seen.append(list(request.devices_ids)) or api.PreStartContainerResponse()
    kubelet.admit(pod("p1", 1))
    kubelet.run_options("p1", "c")
    assert len(seen) == 1 and len(seen[0]) == 1


# -- kubelet restart -------------------------------------------------------------------------------

def test_a_restarted_kubelet_keeps_allocations_and_waits_for_re_registration(node):
    kubelet, plugin = node
    p = plugin(spec())
    wait_for(lambda: kubelet.node_status()[1] == {WIDGET: 3}, "registered")
    kubelet.admit(pod("p1", 2))
    held = kubelet.manager.pod_devices["p1"]["c"][WIDGET].devices
    kubelet.restart()
    # CleanupPluginDirectory removed the plugin's socket; the checkpoint stays
    assert not (kubelet.directory / "widget.sock").exists() and kubelet.checkpoint_path.exists()
    assert kubelet.node_status() == ({WIDGET: 0}, {WIDGET: 0})
    restored = kubelet.manager.pod_devices["p1"]["c"][WIDGET]
    assert restored.devices == held and sorted(restored.response["envs"]["WIDGETS"].split(",")) == held
    # the plugin sees a new kubelet.sock and registers again, turn by turn as its watch loop (run)
    # would: one turn alone failed once on a loaded machine (its registration call did not get
    # through, and a watch loop tries again on its next turn)
    # one Register kubelet could not dial back takes its 10 s dial timeout: the bound lets the
    # plugin's watch loop make it again, and a failure names what kubelet and the plugin saw
    try:
        wait_for(lambda: p.step() or kubelet.node_status() == ({WIDGET: 3}, {WIDGET: 3}), "re-registered", seconds=30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: registrations {[(r['kubelet'], r['stream'], r['error']) for r in kubelet.registrations]}"
                             f", the plugin's last error {p.last_error!r}")
    assert kubelet.admit(pod("p2", 2))["message"].startswith(
        f"Allocate failed due to requested number of devices unavailable for {WIDGET}. Requested: 2, Available: 1")


def test_the_checkpoint_command_decodes_the_file_and_verifies_its_checksum(node, tmp_path):
    from typer.testing import CliRunner

    from labkit.devices.cli import app
    from labkit.errors import LabkitError
    kubelet, plugin = node
    plugin(spec())
    wait_for(lambda: kubelet.node_status()[1] == {WIDGET: 3}, "registered")
    kubelet.admit(pod("p1", 2))
    held = kubelet.manager.pod_devices["p1"]["c"][WIDGET]
    run = CliRunner().invoke(app, ["checkpoint", "-f", str(kubelet.checkpoint_path), "-o", "json"])
    assert run.exit_code == 0, run.output
    shown = json.loads(run.output)
    assert shown["checksum"]["verdict"] == "ok" and shown["checksum"]["stored"] == shown["checksum"]["computed"]
    assert shown["registered"] == {WIDGET: ["w0", "w1", "w2"]}
    [entry] = shown["entries"]
    assert (entry["pod"], entry["container"], entry["resource"]) == ("p1", "c", WIDGET)
    assert entry["devices"] == {str(n): ids for n, ids in held.numa.items()}
    assert entry["allocate_response"] == held.response       # AllocResp decoded from its protobuf bytes
    # a changed device ID: kubelet would log `checkpoint is corrupted` and start empty; exit code 1
    blob = json.loads(kubelet.checkpoint_path.read_text())
    blob["Data"]["RegisteredDevices"][WIDGET] = ["w0", "w1", "w9"]
    changed = tmp_path / "changed"
    changed.write_text(json.dumps(blob))
    run = CliRunner().invoke(app, ["checkpoint", "-f", str(changed)])
    assert run.exit_code == 1 and "checkpoint is corrupted" in run.output
    garbage = tmp_path / "garbage"
    garbage.write_text('{"Data": 3}')
    run = CliRunner().invoke(app, ["checkpoint", "-f", str(garbage)])
    assert isinstance(run.exception, LabkitError) and "not a device manager checkpoint" in str(run.exception)


def test_a_corrupted_checkpoint_is_logged_and_the_state_starts_empty(node):
    kubelet, plugin = node
    plugin(spec())
    wait_for(lambda: kubelet.node_status()[1] == {WIDGET: 3}, "registered")
    kubelet.admit(pod("p1", 1))
    blob = json.loads(kubelet.checkpoint_path.read_text())
    blob["Checksum"] += 1
    kubelet.checkpoint_path.write_text(json.dumps(blob))
    kubelet.restart()
    assert kubelet.manager.pod_devices == {}
    assert kubelet.events[-1].startswith("Continue after failing to read checkpoint file. Device allocation info "
                                         "may NOT be up-to-date: checkpoint is corrupted")


# -- the command -----------------------------------------------------------------------------------

def test_plugin_serve_registers_and_leaves_no_socket(tmp_path):
    kubelet = Kubelet(tmp_path / "dp")
    kubelet.start()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "labkit", "devices", "plugin", "serve", "--resource", WIDGET,
                                 "--device", "w0@0", "--device", "w1", "--dir", str(kubelet.directory)],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert wait_for(lambda: kubelet.node_status() == ({WIDGET: 2}, {WIDGET: 2}), "served plugin", 20)
            assert is_socket(kubelet.directory / "widget.sock")
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert out.startswith(f"device plugin {WIDGET}: 2 devices, socket {kubelet.directory}/widget.sock")
        assert not (kubelet.directory / "widget.sock").exists()
        assert wait_for(lambda: kubelet.node_status() == ({WIDGET: 2}, {WIDGET: 0}), "plugin gone")
    finally:
        kubelet.stop()


# -- the container ---------------------------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
def test_the_container_process_receives_envs_and_mounts(tmp_path):
    host = tmp_path / "widget-lib"
    host.mkdir()
    (host / "libwidget.so").write_text("widget\n")
    root = tmp_path / "rootfs"
    options = {"envs": {"WIDGETS": "w1,w2"},
               "mounts": [{"container_path": "/usr/local/widget", "host_path": str(host), "read_only": True}]}
    spec_file = container.write_spec(tmp_path / "spec.json", root, options, ["sleep", "30"])
    proc = subprocess.Popen(container.argv(spec_file), cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        target = f"{root}/usr/local/widget"
        mounted = wait_for(lambda: proc.poll() is None and Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"sleep")
                           and container.mounts(proc.pid).get(target), "container started")
        assert "ro" in mounted["options"]
        env = container.environ(proc.pid)
        assert env["WIDGETS"] == "w1,w2" and "PYTHONPATH" not in env
        assert Path(f"/proc/{proc.pid}/root{target}/libwidget.so").read_text() == "widget\n"
        assert Path(f"/proc/{proc.pid}/cwd").resolve() == root
        assert str(tmp_path) not in Path("/proc/self/mountinfo").read_text()
    finally:
        proc.kill()
        proc.wait()
    # the bind mount was made in the container's own mount namespace: the host's never had it
    assert str(tmp_path) not in Path("/proc/self/mountinfo").read_text()
    assert not (root / "usr/local/widget/libwidget.so").exists()


def test_the_container_process_receives_a_device_node_in_its_mount_namespace(tmp_path):
    # a stand-in character device (/dev/null's numbers) named by a DeviceSpec: the process finds it
    # at its container path, a character device it can write to; the host never had the mount
    host = tmp_path / "devices" / "widget-0"
    host.parent.mkdir()
    os.mknod(host, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    root = tmp_path / "rootfs"
    options = {"envs": {}, "mounts": [],
               "devices": [{"container_path": "/dev/widget-0", "host_path": str(host), "permissions": "rw"}]}
    spec_file = container.write_spec(tmp_path / "spec.json", root, options, ["sleep", "30"])
    proc = subprocess.Popen(container.argv(spec_file), cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        target = f"{root}/dev/widget-0"
        wait_for(lambda: proc.poll() is None and Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"sleep")
                 and container.mounts(proc.pid).get(target), "container started")
        inside = os.stat(f"/proc/{proc.pid}/root{target}")
        assert stat.S_ISCHR(inside.st_mode) and (os.major(inside.st_rdev), os.minor(inside.st_rdev)) == (1, 3)
        with open(f"/proc/{proc.pid}/root{target}", "w") as device:
            device.write("discarded\n")
        assert str(tmp_path) not in Path("/proc/self/mountinfo").read_text()
    finally:
        proc.kill()
        proc.wait()
    assert (root / "dev" / "widget-0").stat().st_size == 0 and not stat.S_ISCHR((root / "dev" / "widget-0").stat().st_mode)


def test_a_plugin_that_never_answers_its_options_is_refused_with_kubelets_words(node):
    kubelet, plugin = node
    kubelet.dial_timeout = 0.5      # the options call's deadline: the plugin answers after 5 s
    p = ReferencePlugin(spec(), kubelet.directory)

    def hangs(request, context):
        time.sleep(5)
        return api.DevicePluginOptions()
    p.GetDevicePluginOptions = hangs
    p.server = api.serve_plugin(p, str(p.socket_path))
    try:
        with pytest.raises(grpc.RpcError) as refused:
            api.register(str(kubelet.socket), "widget.sock", WIDGET)
        assert refused.value.details() == ("failed to get device plugin options: rpc error: code = DeadlineExceeded "
                                           "desc = Deadline Exceeded")
        assert kubelet.registrations[-1]["answered"] and kubelet.node_status() == ({}, {})
    finally:
        p.stop()


def test_plugin_serve_refuses_the_device_plugins_labs_nodes(tmp_path):
    # there the plugin is the student's exercise: labkit's own would pass for theirs
    from labkit.devices.cli import refuse_lab_node
    from labkit.errors import LabkitError

    for node in ("/run/labkit/na-device-plugins/try", "/run/labkit/x-device-plugins/register/"):
        with pytest.raises(LabkitError, match="yours to write"):
            refuse_lab_node(Path(node))
    refuse_lab_node(tmp_path / "dp")
    refuse_lab_node(Path("/var/lib/kubelet/device-plugins"))


def test_a_spec_device_without_an_id_is_a_clear_error():
    from labkit.devices.plugin import ReferencePlugin

    with pytest.raises(ValueError, match="needs an `id`"):
        ReferencePlugin({"resource": WIDGET, "devices": [{"ID": "w0", "numa": [0]}]}, Path("/nonexistent"))
    with pytest.raises(ValueError, match="`numa` is a NUMA node number"):
        ReferencePlugin({"resource": WIDGET, "devices": [{"id": "w0", "numa": "x"}]}, Path("/nonexistent"))


def test_a_dial_that_gives_up_says_whether_a_socket_was_there(tmp_path):
    """kubelet's words are the same either way; labkit also notes whether anything was at the
    path when the dial gave up (the device-plugins checks tell a student whose socket went away)."""
    import socket as sockets

    from labkit.devices.kubelet import GrpcPlugin
    from labkit.devices.manager import DeviceError

    absent = GrpcPlugin("example.com/widget", str(tmp_path / "gone.sock"), dial_timeout=0.3)
    with pytest.raises(DeviceError, match="^failed to dial device plugin: context deadline exceeded$"):
        absent.dial()
    assert absent.socket_missing
    bound = sockets.socket(sockets.AF_UNIX)        # there, but no server accepts on it
    bound.bind(str(tmp_path / "mute.sock"))
    try:
        mute = GrpcPlugin("example.com/widget", str(tmp_path / "mute.sock"), dial_timeout=0.3)
        with pytest.raises(DeviceError):
            mute.dial()
        assert not mute.socket_missing
    finally:
        bound.close()
