"""Real pinning on this machine: `labkit numa run` puts containers where kubelet would, and the
kernel agrees. Every CPU set below is read from /proc/<pid>/status, never from labkit's output.

The live node reserves the lowest CPU (reservedSystemCPUs), so on an N-CPU machine one Guaranteed
container asking for cpu: 1 gets an exclusive CPU and the shared pool keeps the others.
"""

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from labkit.numa.cpuset import parse
from support import labkit

CPUS = sorted(os.sched_getaffinity(0))
RESERVED, EXCLUSIVE = CPUS[0], CPUS[1]


def pod(name, cpu=None, memory="64Mi", request_only=False, init=None):
    resources = {"requests": {"cpu": cpu}} if request_only else {"limits": {"cpu": cpu, "memory": memory}}
    spec = {"containers": [{"name": "app", "command": ["sleep", "infinity"], "resources": resources}]}
    if init:
        spec["initContainers"] = [init]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def run(tmp_path, *pods, code=0):
    path = tmp_path / f"{pods[0]['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump_all(pods))
    return json.loads(labkit("numa", "run", "-f", str(path), "-o", "json", check=code).stdout)


def answer_qos():
    """What the qos check does once it has seen an answer: from then on `labkit numa run` runs Pods
    whose class would answer exercise qos (labkit.numa.withhold.qos_run_refusal)."""
    from labkit import predictions
    predictions.record("numa", "qos")


def containers():
    return {c["pod"]: c for c in json.loads(labkit("numa", "show", "-o", "json", check=0).stdout)["containers"]}


def kernel_cpus(pid) -> set[int]:
    status = Path(f"/proc/{pid}/status").read_text()
    return set(parse(re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M).group(1)))


def kernel_mems(pid) -> set[int]:
    status = Path(f"/proc/{pid}/status").read_text()
    return set(parse(re.search(r"^Mems_allowed_list:\s*(\S+)", status, re.M).group(1)))


@pytest.fixture
def live_node():
    labkit("run", "numa", check=0)
    yield
    labkit("cleanup", "numa", check=0)


def test_exclusive_cpu_and_a_shared_pool_that_follows_it(live_node, tmp_path):
    agent = containers()["node-agent"]["pids"][0]
    assert kernel_cpus(agent) == set(CPUS)            # only shared containers: the pool is every CPU

    (burst,) = run(tmp_path, pod("burst", "100m", request_only=True))
    b_pid = burst["containers"][0]["pids"][0]
    assert kernel_cpus(b_pid) == set(CPUS)

    # its class is the class of a Pod of exercise qos (web): while that exercise has no answer, it
    # does not run, for its cgroup (kubepods/pod<uid>) and its exclusive CPU would show the class
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump(pod("pinned", "1")))
    refused = labkit("numa", "run", "-f", str(path), "-o", "json", check=2)
    assert "exercise qos" in refused.stderr and "/proc/<pid>/cgroup" in refused.stderr and not refused.stdout
    assert "pinned" not in containers()
    answer_qos()
    (pinned,) = run(tmp_path, pod("pinned", "1"))
    assert pinned["admitted"] and pinned["qos"] == "Guaranteed" and containers()["pinned"]["qos"] == "Guaranteed"
    assert {r["container"] for r in pinned["reconciled"]} == {"kube-system/node-agent/agent", "default/burst/app"}
    g_pid = pinned["containers"][0]["pids"][0]
    assert kernel_cpus(g_pid) == {EXCLUSIVE}
    # reconcile took the CPU away from every shared container; the reserved CPU stays shared
    assert kernel_cpus(b_pid) == kernel_cpus(agent) == set(CPUS) - {EXCLUSIVE}
    assert RESERVED in kernel_cpus(b_pid)
    # the Memory Manager put the Guaranteed container's memory on the NUMA node of its CPU
    node_links = list(Path(f"/sys/devices/system/cpu/cpu{EXCLUSIVE}").glob("node[0-9]*"))
    assert kernel_mems(g_pid) == {int(node_links[0].name[4:]) if node_links else 0}
    # the container sits in kubelet's cgroup layout for Guaranteed pods, with that cpuset
    cgroup = Path(pinned["containers"][0]["cgroup"])
    assert cgroup.parent.parent.name == "kubepods" and cgroup.parent.name == f"pod{pinned['uid']}"
    assert re.fullmatch(r"[0-9a-f]{64}", cgroup.name)       # named by container ID, as containerd does
    assert g_pid in [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]

    labkit("numa", "delete", "default/pinned", check=0)         # NAMESPACE/NAME, as `labkit numa show` lists it
    assert not cgroup.parent.exists()
    assert kernel_cpus(b_pid) == kernel_cpus(agent) == set(CPUS)   # the pool grew back
    assert "pinned" not in containers()


def test_a_pod_that_gets_no_cpu_is_rejected_and_nothing_starts(live_node, tmp_path):
    if len(CPUS) != 2:
        pytest.skip("needs exactly 2 CPUs, so that one Guaranteed container takes every exclusive CPU")
    answer_qos()
    run(tmp_path, pod("first", "1"))
    state = Path(os.environ["LABKIT_STATE_DIR"]) / "numa" / "kubelet" / "cpu_manager_state"
    before = state.read_text()
    (second,) = run(tmp_path, pod("second", "1"), code=1)
    assert not second["admitted"] and second["reason"] == "UnexpectedAdmissionError"
    assert "not enough cpus available" in second["message"]
    assert "second" not in containers()
    assert json.loads(state.read_text())["entries"] == json.loads(before)["entries"]


def test_init_container_cpus_are_reused_by_the_app_container(live_node, tmp_path):
    seen = tmp_path / "init-saw"
    init = {"name": "setup", "command": ["sh", "-c", f"grep Cpus_allowed_list /proc/self/status > {seen}"],
            "resources": {"limits": {"cpu": "1", "memory": "32Mi"}}}
    answer_qos()
    (result,) = run(tmp_path, pod("warm", "1", init=init))
    assert result["init_exit_codes"] == {"setup": 0}
    assert set(parse(seen.read_text().split()[-1])) == {EXCLUSIVE}       # the init container ran pinned
    app_pid = result["containers"][0]["pids"][0] if result["containers"][0]["container"] == "app" else \
        result["containers"][1]["pids"][0]
    assert kernel_cpus(app_pid) == {EXCLUSIVE}    # kubelet hands the init container's CPUs to the app
    # AddContainer of the app container released the finished init container's memory; the CPU
    # Manager keeps the init container's assignment (the app reuses those CPUs)
    kubelet = Path(os.environ["LABKIT_STATE_DIR"]) / "numa" / "kubelet"
    memory = json.loads((kubelet / "memory_manager_state").read_text())
    assert set(memory["entries"][result["uid"]]) == {"app"}
    reserved = sum(node["memoryMap"]["memory"]["reserved"] for node in memory["machineState"].values())
    assert reserved == 64 * 2**20
    assert set(json.loads((kubelet / "cpu_manager_state").read_text())["entries"][result["uid"]]) == {"setup", "app"}


def test_run_refuses_a_pod_already_on_the_node_and_commands_that_do_not_exist(live_node, tmp_path):
    run(tmp_path, pod("once", "100m", request_only=True))
    again = labkit("numa", "run", "-f", str(tmp_path / "once.yaml"), check=2)
    assert "already on the node" in again.stderr
    bad = pod("bad", "100m", request_only=True)
    bad["spec"]["containers"][0]["command"] = ["no-such-binary-here"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    refused = labkit("numa", "run", "-f", str(path), check=2)
    assert "spec.containers[0].command" in refused.stderr and "no-such-binary-here" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_live_commands_need_the_lab():
    out = labkit("numa", "show", check=2)
    assert "labkit run numa" in out.stderr and "Traceback" not in out.stderr
