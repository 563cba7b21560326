"""The device-manager reconstruction (labkit/devices) against every device-plugin case: the shared
ones (shared/fidelity/device-plugins) and labkit's own (tests/fidelity/device-plugins), played by
`labkit devices play`'s code; the command on all of them; the checkpoint's round trip."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from labkit.devices import checkpoint
from labkit.devices.manager import Device, DeviceManager
from labkit.devices.play import ScriptedPlugin, load_case, play
from support import REPO, shared_fidelity

SHARED = shared_fidelity("device-plugins")
OWN = REPO / "tests" / "fidelity" / "device-plugins"
CASES = sorted(OWN.glob("*.yaml")) + (sorted(SHARED.glob("*.yaml")) if SHARED else [])


def test_the_shared_cases_are_there():
    assert SHARED is not None and len(list(SHARED.glob("*.yaml"))) >= 8


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_every_case_holds(path):
    case = load_case(path)
    assert case["id"] == path.stem
    played = play(case)
    failed = [f"{c.what}: expected {c.want!r}, got {c.got!r}" for c in played.checks if not c.ok]
    assert played.checks and not failed, "\n".join(failed)


def test_the_command_plays_every_case(tmp_path):
    out = subprocess.run([sys.executable, "-m", "labkit", "devices", "play", "-o", "json",
                          *sum((["-f", str(p)] for p in CASES), [])], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert [r["id"] for r in json.loads(out.stdout)] == [p.stem for p in CASES]
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text((OWN / "labkit-dp-03-hints-request-two.yaml").read_text().replace("preferred: true", "preferred: false"))
    assert subprocess.run([sys.executable, "-m", "labkit", "devices", "play", "-f", str(wrong)],
                          capture_output=True, text=True, cwd=REPO).returncode == 1


def test_a_checkpoint_reads_back_what_was_written_and_a_changed_one_is_corrupted(tmp_path):
    dm = DeviceManager([0, 1])
    dm.connect("example.com/gpu", ScriptedPlugin())
    dm.list_and_watch("example.com/gpu", [Device("g0", numa=(0,)), Device("g1", numa=(1,)), Device("g2")])
    dm.admit_pod({"uid": "u1", "containers": [{"name": "c", "limits": {"example.com/gpu": 2}}]})
    path = checkpoint.write(dm, tmp_path / "kubelet_internal_checkpoint")
    blob = json.loads(path.read_text())
    assert set(blob) == {"Data", "Checksum"} and blob["Data"]["RegisteredDevices"] == {"example.com/gpu": ["g0", "g1", "g2"]}
    back = DeviceManager([0, 1])
    checkpoint.read(back, path, now=0)
    assert back.allocated_devices("example.com/gpu") == dm.allocated_devices("example.com/gpu")
    assert back.get_capacity(0) == ({"example.com/gpu": 0}, {"example.com/gpu": 0}, [])
    blob["Data"]["RegisteredDevices"]["example.com/gpu"].append("g9")
    path.write_text(json.dumps(blob))
    with pytest.raises(ValueError, match="checkpoint is corrupted"):
        checkpoint.read(DeviceManager([0]), path, now=0)


def test_kubelet_takes_a_containers_devices_in_a_go_sets_order():
    """devicesToAllocate fills a container's devices by ranging over Go sets (allocateRemainingFrom:
    `for device := range devices.Difference(allocated)`), in map order, which Go randomises: the
    reconstruction takes them in its `unsorted` order (here reversed), not sorted by ID."""
    widgets = [Device(f"widget-{i}", numa=(i // 2,)) for i in range(4)]
    for hint in (None, [0, 1]):      # no-affinity ones; aligned ones (both nodes in the hint)
        dm = DeviceManager([0, 1], unsorted=lambda ids: sorted(ids, reverse=True))
        dm.connect("example.com/widget", ScriptedPlugin())
        dm.list_and_watch("example.com/widget", widgets)
        assert dm.devices_to_allocate("pod", "c", "example.com/widget", 2, set(), hint) == ["widget-3", "widget-2"]
