"""kill -9 in the middle of a mount scenario or of `labkit run mount-propagation`, then `labkit cleanup
--all`: no process, namespace or directory of the lab remains, and the host's mount table is
byte-identical (host_unchanged compares /proc/self/mountinfo, among others)."""

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from labkit.mounts.scenario import CRASH_AFTER_VAR
from support import LABKIT, REPO, diff_snapshots, host_snapshot, labkit

SCENARIOS = REPO / "labs" / "mount-propagation" / "scenarios"


@pytest.fixture(autouse=True)
def cleanup_even_on_failure():
    yield
    labkit("cleanup", "--all")


def assert_clean(before, what):
    result = labkit("cleanup", "--all")
    assert result.returncode == 0, f"{what}: cleanup failed: {result.stderr}"
    problems = diff_snapshots(before, host_snapshot())
    assert not problems, f"after {what} and cleanup --all:\n" + "\n".join(problems)
    state = os.environ["LABKIT_STATE_DIR"]
    leftovers = [p for p in os.listdir(state) if p.startswith("mounts-play")] if os.path.isdir(state) else []
    assert leftovers == [], f"after {what}: scenario state left: {leftovers}"


@pytest.mark.host_compared
@pytest.mark.parametrize("name, step", [("e2e", 0), ("e2e", 1), ("e2e", 4), ("busy-mount", 3), ("exiting-container", 3)])
def test_kill_play_after_a_step(name, step, host_unchanged):
    if name in ("e2e", "busy-mount", "exiting-container"):   # these show part of the predicted experiment:
        answer = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "mount-propagation" / "predict-e2e-matrix.yaml"
        answer.parent.mkdir(parents=True, exist_ok=True)
        answer.write_text("{host: [], master: [], slave: [], private: [], default: []}\n")
    play = subprocess.run(LABKIT + ["mounts", "play", "-f", str(SCENARIOS / f"{name}.yaml")], cwd=REPO,
                          capture_output=True, env={**os.environ, CRASH_AFTER_VAR: str(step)})
    assert play.returncode == -signal.SIGKILL, play.stderr
    assert_clean(host_unchanged, f"kill -9 of play {name} after step {step}")


@pytest.mark.host_compared
def test_kill_run_and_check_at_random_moments(host_unchanged):
    rng = random.Random(int(os.environ.get("LABKIT_CRASH_SEED", "4321")))
    for i in range(3):
        proc = subprocess.Popen(LABKIT + ["run", "mount-propagation"], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.35, 0.8))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert_clean(host_unchanged, f"kill -9 of run #{i}")
    labkit("run", "mount-propagation", check=0)
    labkit("solve", "mount-propagation", "leaked-mount", check=0)
    labkit("mounts", "exec", "master", "--", "mount", "-t", "tmpfs", "x", "/mnt/test", check=0)
    running = host_snapshot()
    added = diff_snapshots({key: host_unchanged[key] for key in ("mountinfo", "_others")}, running)
    assert not added, "the running lab added mounts to the host's table:\n" + "\n".join(added)
    proc = subprocess.Popen(LABKIT + ["check", "mount-propagation"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(rng.uniform(0.4, 0.7))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert_clean(host_unchanged, "kill -9 of check")
