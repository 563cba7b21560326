"""kill -9 of `labkit run`, `labkit check` and `labkit cleanup` at many points, then `labkit cleanup --all`:
nothing the lab made remains, and the host's mount table and root iptables are byte-identical.
"""

import os
import random
import signal
import subprocess
import time

import pytest

from support import LABKIT, REPO, diff_snapshots, host_snapshot, labkit

# One kill after each kind of step of the demo build (tests/labs/demo/lab.py): its second network
# namespace stands for both (a kill after the first leaves one netns for the same cleanup path).
DEMO_STEPS = ("netns-b", "veth", "www", "server", "cgroup", "container")


def start(*args, env=None):
    return subprocess.Popen(LABKIT + list(args), cwd=REPO, env=env or os.environ.copy(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def assert_clean(before, what):
    result = labkit("cleanup", "--all")
    assert result.returncode == 0, f"{what}: cleanup failed: {result.stderr}"
    problems = diff_snapshots(before, host_snapshot())
    assert not problems, f"after {what} and cleanup --all:\n" + "\n".join(problems)


@pytest.mark.host_compared
@pytest.mark.parametrize("step", DEMO_STEPS)
def test_kill_run_after_each_build_step(step, host_unchanged):
    run = subprocess.run(LABKIT + ["run", "demo"], cwd=REPO, capture_output=True,
                         env={**os.environ, "LABKIT_CRASH_AT": f"demo:{step}"})
    assert run.returncode == -signal.SIGKILL
    assert_clean(host_unchanged, f"kill -9 after {step}")


@pytest.mark.host_compared
def test_run_on_top_of_a_crashed_build_rebuilds(host_unchanged):
    crashed = subprocess.run(LABKIT + ["run", "demo"], cwd=REPO, capture_output=True,
                             env={**os.environ, "LABKIT_CRASH_AT": "demo:server"})
    assert crashed.returncode == -signal.SIGKILL
    assert "half-built" in labkit("list", check=0).stdout
    rebuilt = labkit("run", "demo", check=0)
    assert "previous, unfinished" in rebuilt.stderr
    labkit("solve", "demo", "serve-greeting", check=0)
    labkit("check", "demo", "serve-greeting", check=0)
    assert_clean(host_unchanged, "rebuild after a crash")


@pytest.mark.host_compared
def test_kill_run_at_random_moments(host_unchanged):
    rng = random.Random(int(os.environ.get("LABKIT_CRASH_SEED", "1234")))
    for i in range(8):
        proc = start("run", "demo")
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert_clean(host_unchanged, f"kill -9 of run #{i}")


@pytest.mark.host_compared
def test_kill_check_and_cleanup_midway(host_unchanged):
    rng = random.Random(99)
    for i in range(3):
        labkit("run", "demo", check=0)
        labkit("solve", "demo", "container-mount", check=0)
        proc = start("check", "demo")
        time.sleep(rng.uniform(0.05, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert_clean(host_unchanged, f"kill -9 of check #{i}")
    for i in range(3):
        labkit("run", "demo", check=0)
        proc = start("cleanup", "--all")
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert_clean(host_unchanged, f"kill -9 of cleanup #{i}")
