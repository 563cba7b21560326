"""The resources lab end to end through the real CLI: every check fails on a fresh lab and passes
after its reference solution; what students commonly type is answered the way the API server and
kubelet answer it; kill -9 at every named step, then cleanup, leaves the host as it was."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from support import LABKIT, REPO, assert_clean_after, labkit

EXERCISES = ["qos", "throttled", "oom", "noisy-neighbour", "eviction-order", "weight"]
CRASH_POINTS = ("scenarios", "node", "recorded", "container-started")


def results(run) -> dict:
    return {r["exercise"]: r for r in json.loads(run.stdout)["results"]}


@pytest.fixture
def lab_cleanup():
    yield
    labkit("cleanup", "resources", check=0)


@pytest.mark.host_exclusive
def test_resources_lab_end_to_end(host_unchanged, lab_cleanup, tmp_path):
    run = labkit("run", "resources", check=0)
    assert "labkit resources top" in run.stdout
    lab_dir = Path(os.environ["LABKIT_STATE_DIR"]) / "resources"

    fresh = results(labkit("check", "resources", "--format", "json", check=1))
    assert {e: r["status"] for e, r in fresh.items()} == {e: "fail" for e in EXERCISES}
    assert "still throttled" in fresh["throttled"]["message"]
    assert "below its eviction threshold" in fresh["noisy-neighbour"]["message"]

    # what students type: a request above the limit, a changed spec over a running Pod
    pod = yaml.safe_load_all((lab_dir / "scenarios" / "node-1.yaml").read_text())
    frontend = next(p for p in pod if p and p["metadata"]["name"] == "frontend")
    frontend["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "200m"
    changed = tmp_path / "frontend.yaml"
    changed.write_text(yaml.safe_dump(frontend))
    refused = labkit("resources", "apply", "-f", str(changed), check=2)
    assert 'The Pod "frontend" is invalid: spec.containers[0].resources.requests: Invalid value: "200m": ' \
           "must be less than or equal to cpu limit of 100m" in refused.stderr
    del frontend["spec"]["containers"][0]["resources"]["limits"]["cpu"]
    changed.write_text(yaml.safe_dump(frontend))
    running = labkit("resources", "apply", "-f", str(changed), check=2)
    assert "pod updates may not change fields" in running.stderr and "labkit resources delete frontend" in running.stderr
    labkit("resources", "delete", "frontend", check=0)
    labkit("resources", "apply", "-f", str(changed), check=0)
    shown = {p["name"]: p for p in json.loads(labkit("resources", "get", "--node", "node-1", "--json", check=0).stdout)}
    server = shown["frontend"]["containers"][0]
    assert server["state"] == "running" and server["spec"] == "req cpu=200m,memory=32Mi / lim memory=64Mi"
    assert labkit("resources", "get", check=0).stdout.count("OOMKilled") == 1     # shop/indexer, killed at start

    for exercise in EXERCISES:
        labkit("solve", "resources", exercise, check=0, timeout=120)
    solved = results(labkit("check", "resources", "--format", "json", check=0))
    assert {e: r["status"] for e, r in solved.items()} == {e: "pass" for e in EXERCISES}

    evicted = labkit("resources", "get", "--node", "node-3", check=0).stdout
    assert evicted.count("Failed (Evicted)") == 3
    labkit("cleanup", "resources", check=0)
    assert not (lab_dir / "nodes").exists()


@pytest.mark.host_exclusive
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_kill_lab_build_at_each_step_then_clean_up(point, host_unchanged):
    crashed = subprocess.run(LABKIT + ["run", "resources"], cwd=REPO, capture_output=True,
                             env={**os.environ, "LABKIT_CRASH_AT": f"resources:{point}"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert_clean_after(host_unchanged, f"kill -9 of `labkit run resources` at {point}")
