"""The device-plugins lab end to end through the real CLI: a fresh lab fails every check (the
starter plugin registers nothing) quickly, `labkit devices try` shows a plugin against a fresh
kubelet, the reference plugin passes, a reset puts the starter back and keeps the student's file,
and cleanup — also after kill -9 in the middle of a check — leaves the host as it was."""

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from support import LABKIT, REPO, labkit

EXERCISES = ["register", "health", "allocate", "preferred", "restart", "share"]


# labkit's reference plugin answering Allocate with a DeviceSpec for the lab's stand-in node of the widget
DEVICE_NODE_PLUGIN = """\
import os
from pathlib import Path

from labkit.devices.plugin import ReferencePlugin

lab = Path(__file__).resolve().parent.parent
spec = {"resource": "example.com/widget", "socket": "widget.sock",
        "devices": [{"id": f"widget-{i}", "numa": i // 2} for i in range(4)],
        "allocate": {"devices": [{"container_path": "/dev/{ids}", "host_path": str(lab / "devices") + "/{ids}"}]}}
plugin = ReferencePlugin(spec, Path(os.environ["DEVICE_PLUGIN_DIR"]))
plugin.start()
plugin.run()
"""


def results(run) -> dict:
    return {r["exercise"]: r for r in json.loads(run.stdout)["results"]}


@pytest.fixture
def lab_cleanup():
    yield
    labkit("cleanup", "device-plugins", check=0)


@pytest.mark.host_compared
def test_device_plugins_lab_end_to_end(host_unchanged, lab_cleanup):
    run = labkit("run", "device-plugins", check=0)
    assert "labkit devices try plugins/register.py" in run.stdout
    lab_dir = Path(os.environ["LABKIT_STATE_DIR"]) / "device-plugins"

    fresh = results(labkit("check", "device-plugins", "-o", "json", check=1))
    assert {e: r["status"] for e, r in fresh.items()} == {e: "fail" for e in EXERCISES + ["checkpoint"]}
    assert all("your plugin exited (code 1) without a Register call" in fresh[e]["message"] for e in EXERCISES)
    assert "checkpoint.yaml" in fresh["checkpoint"]["message"]           # the prediction's answer file

    labkit("solve", "device-plugins", "allocate", check=0)
    shown = labkit("devices", "try", str(lab_dir / "plugins" / "allocate.py"), "--pod", "2", "-o", "json", check=0)
    steps = json.loads(shown.stdout)
    assert steps[0]["node"] == {"capacity": {"example.com/widget": 4}, "allocatable": {"example.com/widget": 4}}
    container = steps[1]["container"]
    assert sorted(container["envs"]["WIDGET_VISIBLE_DEVICES"].split(",")) == steps[1]["admitted"]["devices"]
    assert list(container["envs"]) == ["WIDGET_VISIBLE_DEVICES"]
    assert container["mounts"]["/var/lib/widget"]["read_only"]
    passed = results(labkit("check", "device-plugins", "allocate", "-o", "json", check=0))["allocate"]
    assert passed["status"] == "pass"

    # the stand-in device nodes: a DeviceSpec naming one puts it into the container's mount namespace
    assert all(stat.S_ISCHR(os.lstat(lab_dir / "devices" / f"widget-{i}").st_mode) for i in range(4))
    nodes = lab_dir / "plugins" / "nodes.py"
    nodes.write_text(DEVICE_NODE_PLUGIN)
    shown = json.loads(labkit("devices", "try", str(nodes), "--pod", "1", "-o", "json", check=0).stdout)
    container = shown[1]["container"]
    (widget,) = shown[1]["admitted"]["devices"]
    assert container["devices"] == {f"/dev/{widget}": {"kind": "char", "device": "1:3"}}

    # a reset puts the starter back; the student's plugin is kept in the answers directory
    mine = (lab_dir / "plugins" / "allocate.py").read_text()
    reset = labkit("reset", "device-plugins", "allocate", "--yes", check=0)
    kept = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "device-plugins" / "kept" / "allocate-1.py"
    assert str(kept) in reset.stdout + reset.stderr and kept.read_text() == mine
    assert (lab_dir / "plugins" / "allocate.py").read_text() == (REPO / "labs" / "device-plugins" / "starter" /
                                                                 "plugin.py").read_text()


def test_cleanup_keeps_the_plugins_the_student_wrote(lab_cleanup):
    # plugins/ lives in the lab directory, which cleanup removes: the student's plugins go to kept/ first
    labkit("run", "device-plugins", check=0)
    plugin = Path(os.environ["LABKIT_STATE_DIR"]) / "device-plugins" / "plugins" / "health.py"
    plugin.write_text("# my health plugin\n")
    done = labkit("cleanup", "device-plugins", check=0)
    kept = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "device-plugins" / "kept" / "health-1.py"
    assert kept.read_text() == "# my health plugin\n" and str(kept) in done.stdout + done.stderr
    assert not plugin.exists()
    assert not list(kept.parent.glob("register-*.py"))        # a starter left as it was is no work


@pytest.mark.host_compared
def test_kill_during_a_check_then_cleanup_leaves_nothing(host_unchanged, lab_cleanup):
    labkit("run", "device-plugins", check=0)
    labkit("solve", "device-plugins", "restart", check=0)
    check = subprocess.Popen(LABKIT + ["check", "device-plugins", "restart"], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lab_dir = Path(os.environ["LABKIT_STATE_DIR"]) / "device-plugins"
    nodes = Path("/run/labkit") / f"{os.environ['LABKIT_PREFIX']}-device-plugins"
    deadline = time.monotonic() + 20
    while not (served := (nodes / "restart" / "widget.sock").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    check.send_signal(signal.SIGKILL)
    check.wait()
    # the plugin was serving when the check was killed (its socket may be gone since: a kubelet
    # restart of the check removes it, and the plugin serves it anew a moment later)
    assert served
    labkit("cleanup", "device-plugins", check=0)
    assert not nodes.exists() and not (lab_dir / "plugins").exists()


@pytest.mark.host_compared
@pytest.mark.parametrize("step", ["plugins", "devices", "node", "server"])
def test_kill_run_after_each_build_step_then_cleanup(step, host_unchanged, lab_cleanup):
    run = subprocess.run(LABKIT + ["run", "device-plugins"], cwd=REPO, capture_output=True,
                         env={**os.environ, "LABKIT_CRASH_AT": f"device-plugins:{step}"})
    assert run.returncode == -signal.SIGKILL
    labkit("cleanup", "device-plugins", check=0)
    assert not (Path("/run/labkit") / f"{os.environ['LABKIT_PREFIX']}-device-plugins").exists()


def test_a_plugin_registering_again_on_its_removed_socket_gets_one_verdict_however_late_kubelet_answers(lab_cleanup):
    """The restart mistake `registers_on_the_old_socket`, its Register call made at once after the
    restart or 1.5 s later: kubelet answers it only when its dial of the removed socket gives up
    (the lab's 2 s), within the check's 3 s or after them. The verdict waits for that answer: the
    same words every run, naming kubelet's refusal."""
    labkit("run", "device-plugins", check=0)
    plugin = Path(os.environ["LABKIT_STATE_DIR"]) / "device-plugins" / "plugins" / "restart.py"
    labkit("solve", "device-plugins", "restart", "--mistake", "registers_on_the_old_socket", check=0)
    source = plugin.read_text()
    call = "            try:\n                api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, OPTIONS)"
    assert call in source
    messages = []
    for delay in (0, 1.5, 0, 1.5):
        plugin.write_text(source.replace(call, f"            time.sleep({delay})\n{call}"))
        failed = results(labkit("check", "device-plugins", "restart", "-o", "json", check=1))["restart"]
        messages.append(failed["message"])
    assert len(set(messages)) == 1, messages
    assert messages[0].startswith(
        "after kubelet's first restart (kubelet.sock made anew, your socket removed) your plugin called Register, "
        "and kubelet refused it: failed to dial device plugin: context deadline exceeded — so it did not register "
        "again: kubelet dials the socket the endpoint names, in its device-plugins directory, before it answers "
        "(plugin/v1beta1/server.go Register); when kubelet gave up, no socket was at "), messages[0]
