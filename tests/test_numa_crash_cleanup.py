"""kill -9 of `labkit run numa` and of `labkit numa run` at every step, then `labkit cleanup --all`:
no cgroup, process or file of the lab remains and the host is exactly as before. After a crashed
`labkit numa run` the live node also recovers the way kubelet does (stale state is dropped).
"""

import json
import os
import random
import signal
import subprocess
import time

import pytest
import yaml

from support import LABKIT, REPO, diff_snapshots, host_snapshot, labkit

CPUS = sorted(os.sched_getaffinity(0))
# The build's own steps (labs/numa/lab.py up). The build also starts the node-agent Pod through
# LiveNode._run_one, whose points (RUN_POINTS) are killed in `labkit numa run` below, each followed
# by the same `cleanup --all`: killing them inside the build as well took the same cleanup path.
BUILD_POINTS = ("discovered", "node-created", "scenarios", "node-b", "node-agent")
RUN_POINTS = ("admitted", "recorded", "container-started", "reconciled")


def assert_clean(before, what):
    result = labkit("cleanup", "--all")
    assert result.returncode == 0, f"{what}: cleanup failed: {result.stderr}"
    problems = diff_snapshots(before, host_snapshot())
    assert not problems, f"after {what} and cleanup --all:\n" + "\n".join(problems)


def guaranteed(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "command": ["sleep", "infinity"],
                                     "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}}]}}


@pytest.mark.host_compared
@pytest.mark.parametrize("point", BUILD_POINTS)
def test_kill_lab_build_at_each_step(point, host_unchanged):
    crashed = subprocess.run(LABKIT + ["run", "numa"], cwd=REPO, capture_output=True,
                             env={**os.environ, "LABKIT_CRASH_AT": f"numa:{point}"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert_clean(host_unchanged, f"kill -9 of `labkit run numa` at {point}")


@pytest.mark.host_compared
def test_kill_lab_build_at_random_moments(host_unchanged):
    rng = random.Random(int(os.environ.get("LABKIT_CRASH_SEED", "7")))
    for i in range(5):
        proc = subprocess.Popen(LABKIT + ["run", "numa"], cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.1, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert_clean(host_unchanged, f"kill -9 of `labkit run numa` #{i}")


@pytest.mark.host_compared
@pytest.mark.parametrize("point", RUN_POINTS)
def test_kill_numa_run_at_each_step_then_recover_and_clean_up(point, host_unchanged, tmp_path):
    from labkit import predictions
    labkit("run", "numa", check=0)
    predictions.record("numa", "qos")   # what the qos check does: `numa run` then runs Guaranteed Pods
    victim = tmp_path / "victim.yaml"
    victim.write_text(yaml.safe_dump(guaranteed("victim")))
    crashed = subprocess.run(LABKIT + ["numa", "run", "-f", str(victim)], cwd=REPO, capture_output=True,
                             env={**os.environ, "LABKIT_CRASH_AT": f"numa:{point}"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr

    # the node still works: a Pod left half-started is listed and can be deleted; a Pod that was
    # only admitted is forgotten (removeStaleState) when the next Pod arrives
    shown = {c["pod"]: c for c in json.loads(labkit("numa", "show", "-o", "json", check=0).stdout)["containers"]}
    if point != "admitted":
        assert "victim" in shown
        labkit("numa", "delete", "victim", check=0)
    else:
        assert "victim" not in shown
    after = tmp_path / "after.yaml"
    after.write_text(yaml.safe_dump(guaranteed("after")))
    (result,) = json.loads(labkit("numa", "run", "-f", str(after), "-o", "json", check=0).stdout)
    assert result["containers"][0]["cpus_allowed_list"] == str(CPUS[1])
    agent = next(c for c in json.loads(labkit("numa", "show", "-o", "json", check=0).stdout)["containers"]
                 if c["pod"] == "node-agent")
    assert str(CPUS[1]) not in agent["cpus_allowed_list"].split(",")

    crashed_again = subprocess.Popen(LABKIT + ["numa", "delete", "after"], cwd=REPO,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.2)
    crashed_again.send_signal(signal.SIGKILL)
    crashed_again.wait()
    assert_clean(host_unchanged, f"kill -9 of `labkit numa run` at {point}")
