"""The numa lab end to end through the real CLI: every check fails on a fresh lab, passes after its
reference solution, and rejects typical wrong answers; cleanup leaves the host as it was."""

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from support import labkit

EXERCISES = ["qos", "cpu-hints", "merge", "single-numa", "static-cpus", "memory", "checkpoint", "pin"]


def results(run) -> dict:
    return {r["exercise"]: r for r in json.loads(run.stdout)["results"]}


def answer(exercise: str, data) -> None:
    path = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "numa" / f"{exercise}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))


def check(exercise: str, code: int) -> dict:
    return results(labkit("check", "numa", exercise, "-o", "json", check=code))[exercise]


@pytest.fixture
def lab_cleanup():
    yield
    labkit("cleanup", "numa", check=0)


@pytest.mark.host_compared
def test_numa_lab_end_to_end(host_unchanged, lab_cleanup, tmp_path):
    run = labkit("run", "numa", check=0)
    assert "reservedSystemCPUs" in run.stdout and "labkit numa run -f pod.yaml" in run.stdout
    lab_dir = Path(os.environ["LABKIT_STATE_DIR"]) / "numa"
    assert (lab_dir / "diagrams" / "lab-two-node.svg").read_text().startswith("<svg")

    fresh = results(labkit("check", "numa", "-o", "json", check=1))
    assert {e: r["status"] for e, r in fresh.items()} == {e: "fail" for e in EXERCISES}
    assert "checkpoint is corrupted" in fresh["checkpoint"]["message"]
    assert 'checkpoint file "node-b/kubelet/cpu_manager_state"' in fresh["checkpoint"]["message"]

    # wrong answers fail and say what is wrong without the right answer
    answer("qos", {"qos": {"web": "Burstable", "batch": "BestEffort", "cache": "Burstable", "api": "Burstable",
                           "migrate": "Burstable", "scratch": "BestEffort"}})
    wrong = check("qos", 1)     # not right, with where to look; neither counted nor named
    assert "your prediction is not right" in wrong["message"] and "2 of" not in wrong["message"]
    assert "a limit without a request" in wrong["message"] and "Guaranteed" not in wrong["message"]
    assert "web" not in wrong["message"] and "cache" not in wrong["message"]
    answer("single-numa", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "small"},
                           "spec": {"containers": [{"name": "c", "image": "app",
                                                           "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}})
    assert "single-numa-node admits Pod small" in check("single-numa", 1)["message"]
    # deleting the checkpoint without draining the node first is not the documented repair
    (lab_dir / "node-b" / "kubelet" / "cpu_manager_state").unlink()
    assert "lost their exclusive CPUs" in check("checkpoint", 1)["message"]
    # a Guaranteed Pod with a fractional CPU is not pinned
    pods = tmp_path / "fractional.yaml"
    pods.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "half"},
         "spec": {"containers": [{"name": "app", "command": ["sleep", "infinity"],
                                  "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "burst"},
         "spec": {"containers": [{"name": "app", "command": ["sleep", "infinity"],
                                  "resources": {"requests": {"cpu": "100m"}}}]}}]))
    labkit("numa", "run", "-f", str(pods), check=0)
    live = {c["pod"]: c for c in json.loads(labkit("numa", "show", "-o", "json", check=0).stdout)["containers"]}
    answer("pin", {role: {"pod": name, "pid": live[name]["pids"][0], "cpus_allowed_list": live[name]["cpus_allowed_list"]}
                   for role, name in (("guaranteed", "half"), ("burstable", "burst"))})
    assert "has no exclusive CPUs" in check("pin", 1)["message"]
    answer("pin", {"guaranteed": {"pod": "half", "pid": 1, "cpus_allowed_list": "0"},
                   "burstable": {"pod": "burst", "pid": live["burst"]["pids"][0], "cpus_allowed_list": "0"}})
    assert "process 1 is not a container process of Pod half" in check("pin", 1)["message"]
    labkit("numa", "delete", "half", check=0)
    labkit("numa", "delete", "burst", check=0)
    # `numa run` showed half's class (Guaranteed, as the qos exercise's web) after the wrong qos answer
    # was checked: that answer is the one graded, whatever the file says later
    labkit("solve", "numa", "qos", check=0)
    kept = check("qos", 1)
    assert "your prediction is not right" in kept["message"] and "as it was when `labkit numa run`" in kept["message"]
    labkit("reset", "numa", "qos", "--yes", check=0)        # a reset keeps the kept answer (labkit.predictions)
    assert "as it was when `labkit numa run`" in check("qos", 1)["message"]
    labkit("reset", "numa", "qos", "--forget-prediction", "--yes", check=0)        # answering afresh

    for exercise in EXERCISES:
        labkit("solve", "numa", exercise, check=0)
    solved = results(labkit("check", "numa", "-o", "json", check=0))
    assert {e: r["status"] for e, r in solved.items()} == {e: "pass" for e in EXERCISES}
    assert "read from /proc" in solved["pin"]["message"]

    # output into a pipe is not cut at 80 columns: names, CPU lists and cgroup paths stay whole
    shown = labkit("numa", "show", "--machine", "lab-two-node", "-f", str(lab_dir / "scenarios" / "memory-pods.yaml"),
                   "--config", str(lab_dir / "scenarios" / "kubelet-memory.yaml"), check=0).stdout
    assert "(no container in the shared pool)  shared pool" in shown
    assert "memory: allocatable 5Gi, taken 5Gi, free 0" in shown
    cleanup = labkit("cleanup", "numa", check=0).stderr.splitlines()
    removed = [line for line in cleanup if line.startswith("removed cgroup")]
    assert removed and all(re.fullmatch(r"removed cgroup /sys/fs/cgroup/\S+", line) for line in removed), cleanup
    assert not (lab_dir / "pods").exists() and not (lab_dir / "kubelet").exists()


@pytest.mark.host_compared
def test_resetting_one_exercise_keeps_the_students_work(host_unchanged, lab_cleanup, tmp_path):
    """`labkit reset numa EXERCISE` lists what it would revert and asks first; with --yes it restores
    only that exercise's part and keeps a copy of every file the student changed under saved/."""
    labkit("run", "numa", check=0)
    lab_dir = Path(os.environ["LABKIT_STATE_DIR"]) / "numa"
    (lab_dir / "scenarios" / "qos-pods.yaml").write_text("# my notes\n")
    (lab_dir / "node-b" / "pods.yaml").write_text("# drained\n")
    (lab_dir / "node-b" / "kubelet" / "cpu_manager_state").unlink()
    config = lab_dir / "kubelet-config.yaml"
    built_config = config.read_text()
    config.write_text(built_config.replace("topologyManagerPolicy: best-effort", "topologyManagerPolicy: restricted"))
    pod = tmp_path / "mine.yaml"
    # a cpu request alone: no Pod of exercise qos has that shape, so it runs before qos is answered
    pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mine"},
                                   "spec": {"containers": [{"name": "app", "command": ["sleep", "infinity"],
                                                            "resources": {"requests": {"cpu": "100m"}}}]}}))
    labkit("numa", "run", "-f", str(pod), check=0)

    asked = labkit("reset", "numa", "qos", input="")
    assert asked.returncode != 0 and "scenarios/qos-pods.yaml you edited (a copy is kept under saved/)" in asked.stderr
    assert (lab_dir / "scenarios" / "qos-pods.yaml").read_text() == "# my notes\n"      # nothing reverted yet
    labkit("reset", "numa", "qos", "--yes", check=0)
    assert (lab_dir / "saved" / "qos-1" / "scenarios" / "qos-pods.yaml").read_text() == "# my notes\n"
    assert (lab_dir / "scenarios" / "qos-pods.yaml").read_text().startswith("# Exercise qos")
    assert (lab_dir / "node-b" / "pods.yaml").read_text() == "# drained\n"      # the other exercises keep theirs

    listed = labkit("reset", "numa", "checkpoint", input="").stderr
    assert "node-b/pods.yaml you changed" in listed and "node-b/kubelet/cpu_manager_state you changed" in listed
    labkit("reset", "numa", "checkpoint", "--yes", check=0)
    assert (lab_dir / "saved" / "checkpoint-1" / "node-b" / "pods.yaml").read_text() == "# drained\n"
    assert "checkpoint is corrupted" in check("checkpoint", 1)["message"]

    listed = labkit("reset", "numa", "pin", input="").stderr
    assert "the Pod(s) you run on the live node (default/mine)" in listed and "kubelet-config.yaml" in listed
    labkit("reset", "numa", "pin", "--yes", check=0)
    assert "topologyManagerPolicy: restricted" in (lab_dir / "saved" / "pin-1" / "kubelet-config.yaml").read_text()
    assert config.read_text() == built_config
    live = json.loads(labkit("numa", "show", "-o", "json", check=0).stdout)["containers"]
    assert [c["pod"] for c in live] == ["node-agent"]
    assert "would revert" not in labkit("reset", "numa", "pin", input="").stderr

    # the whole lab's rebuild: a file the student added and the copies earlier resets kept survive it
    (lab_dir / "scenarios" / "mine.yaml").write_text("# mine\n")
    asked = labkit("reset", "numa", input="")
    assert asked.returncode != 0 and "scenarios/mine.yaml you added (a copy is kept under kept/)" in asked.stderr
    assert "saved/, the copies earlier resets kept" in asked.stderr
    labkit("reset", "numa", "--yes", check=0)
    [kept] = (lab_dir / "kept").iterdir()
    assert (kept / "scenarios" / "mine.yaml").read_text() == "# mine\n"
    assert (kept / "saved" / "qos-1" / "scenarios" / "qos-pods.yaml").read_text() == "# my notes\n"
    assert not (lab_dir / "scenarios" / "mine.yaml").exists()
