"""The lab's container runtime on real cgroups: the kernel applies the cpuset to the process.

Everything is read back from /proc/<pid>/status, never from what labkit wrote.
"""

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from labkit import cgroups
from labkit.exercises import wait_for
from labkit.numa import runtime
from labkit.state import LabEnv, LabState

CPUS = sorted(os.sched_getaffinity(0))


@pytest.fixture
def env(tmp_path):
    lab = SimpleNamespace(id="numa-rt")
    env = LabEnv(lab, LabState("numa-rt", tmp_path / "state"))
    env.dir.mkdir(parents=True, exist_ok=True)
    yield env
    assert env.ledger.cleanup() == []


def test_container_runs_in_kubelets_cgroup_layout_with_its_cpuset(env):
    container_id = runtime.new_container_id()
    group, proc = runtime.start(env, "Burstable", "uid-1", "app", container_id, ["sleep", "60"], cpus=CPUS[-1:], mems=[0])
    # the cgroupfs layout: kubelet's pod cgroup, the runtime's container cgroup named by container ID
    assert group.parts[-4:] == ("kubepods", "burstable", "poduid-1", container_id)
    assert len(container_id) == 64 and int(container_id, 16) >= 0
    assert group.parent.parent.parent.parent.name == cgroups.lab_root_name(env)
    assert runtime.wait_joined(group, proc.pid)
    seen = runtime.proc_affinity(proc.pid)
    assert seen.cpus == CPUS[-1:] and seen.mems == [0]
    # the wrapper joins the cgroup, then executes the command: wait for the exec
    assert wait_for(lambda: Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"60"],
                    timeout=5, interval=0.01)
    # the cpuset can change under a running process (UpdateContainerResources)
    runtime.set_cpuset(group, CPUS)
    assert runtime.proc_affinity(proc.pid).cpus == CPUS
    assert runtime.running_pids(env, "uid-1", "app") == [proc.pid]
    runtime.stop(env, "uid-1", "app")
    assert runtime.proc_affinity(proc.pid) is None or proc.poll() is not None


def test_guaranteed_pods_sit_directly_under_kubepods(env):
    assert runtime.container_cgroup_relpath("Guaranteed", "u", "c0ffee") == "kubepods/podu/c0ffee"
    assert runtime.container_cgroup_relpath("BestEffort", "u", "c0ffee") == "kubepods/besteffort/podu/c0ffee"


def test_init_container_runs_to_completion_in_its_cpuset(env, tmp_path):
    out = tmp_path / "seen"
    container_id = runtime.new_container_id()
    code = runtime.run_to_completion(env, "Guaranteed", "uid-2", "init", container_id, [
        "sh", "-c", f"grep Cpus_allowed_list /proc/self/status > {out}; exit 3"], cpus=CPUS[:1])
    assert code == 3
    assert out.read_text().split()[-1] == str(CPUS[0])
    assert not (cgroups.cpuset_hierarchy()[1] / cgroups.lab_root_name(env) / "kubepods/poduid-2" / container_id).exists()


def test_the_cpuset_controller_reaches_every_level_of_the_lab_subtree(env):
    # v1: every cgroup of the cpuset hierarchy has cpuset.cpus; v2: cpuset is enabled in the
    # subtree_control of each parent down to the container, which reports cpuset.cpus.effective
    version, base = cgroups.cpuset_hierarchy()
    group, proc = runtime.start(env, "Guaranteed", "uid-3", "app", runtime.new_container_id(), ["sleep", "60"],
                                cpus=CPUS[-1:])
    assert runtime.wait_joined(group, proc.pid)
    root = base / cgroups.lab_root_name(env)
    levels = [root, root / "kubepods", root / "kubepods" / "poduid-3", group]
    if version == "v2":
        for parent in [base] + levels[:-1]:
            assert "cpuset" in (parent / "cgroup.subtree_control").read_text().split(), parent
        assert (group / "cpuset.cpus.effective").read_text().split() == [str(CPUS[-1])]
        assert (levels[0] / "cgroup.procs").read_text() == ""     # processes only in leaves
    else:
        assert all((level / "cpuset.cpus").exists() for level in levels)
    assert runtime.cgroup_cpuset(group).cpus == CPUS[-1:]
    assert runtime.proc_affinity(proc.pid).cpus == CPUS[-1:]
    runtime.stop(env, "uid-3", "app")
