"""Nothing of the kube-proxy lab stays behind: after a normal run and cleanup, and after `labkit run
kube-proxy` is killed (SIGKILL) in each phase of its build followed by `labkit cleanup --all`, the
host's mount table, root iptables (legacy and nft), namespaces, links and labkit processes are
exactly as before."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support import LABKIT, REPO, diff_snapshots, host_snapshot, labkit


@pytest.mark.host_compared
def test_a_lab_run_and_cleanup_leave_the_host_unchanged(host_unchanged, tmp_path):
    labkit("run", "kube-proxy", check=0)
    out = json.loads(labkit("kube-proxy", "curl", "--from", "client", "--to", "192.168.50.12:30090", "-n", "5",
                            "-o", "json", check=0).stdout)
    assert out["ok"] == 5
    path = tmp_path / "web.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
                    "spec: {type: NodePort, selector: {app: web}, ports: [{name: http, port: 80, targetPort: http}]}\n")
    labkit("kube-proxy", "apply", "-f", str(path), check=0)
    labkit("shell", "kube-proxy", "node1", "--", "iptables", "-t", "nat", "-N", "STUDENT-CHAIN", check=0)
    labkit("cleanup", "kube-proxy", check=0)
    # host_unchanged compares the host with its state before the test


def ledger_entries(state: Path) -> list[dict]:
    try:
        lines = (state / "ledger.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.endswith("}")]


def log_text(state: Path) -> str:
    try:
        return (state / "lab.log").read_text()
    except FileNotFoundError:
        return ""


# Kill points, judged from what the build has written so far: its ledger and its log.
KILL_POINTS = {
    "creating namespaces": lambda state: sum(e["kind"] == "netns" for e in ledger_entries(state)) >= 6,
    "starting pods": lambda state: any(e["kind"] == "process" for e in ledger_entries(state)),
    "syncing nodes": lambda state: "pod servers listening" in log_text(state),
    "editing node2's rules": lambda state: "nodes synced" in log_text(state),
}


@pytest.mark.host_compared
@pytest.mark.parametrize("point", KILL_POINTS)
def test_kill_during_run_then_cleanup_all_leaves_nothing(point, host_unchanged):
    state = Path(os.environ["LABKIT_STATE_DIR"]) / "kube-proxy"
    proc = subprocess.Popen(LABKIT + ["run", "kube-proxy"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    reached = False
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        if KILL_POINTS[point](state):
            proc.send_signal(signal.SIGKILL)
            reached = True
            break
        time.sleep(0.001)
    proc.wait()
    assert reached, f"the build finished before reaching '{point}'"
    assert proc.returncode == -signal.SIGKILL
    assert "half-built" in labkit("list", check=0).stdout
    result = labkit("cleanup", "--all")
    assert result.returncode == 0, result.stderr
    problems = diff_snapshots(host_unchanged, host_snapshot())
    assert not problems, f"after a kill while {point} and cleanup --all:\n" + "\n".join(problems)
