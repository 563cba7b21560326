"""The lab's container runtime on real cgroups: the kernel applies the cpuset to the process.

Everything is read back from /proc/<pid>/status, never from what labkit wrote.
"""

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from labkit import cgroups
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
    group, proc = runtime.start(env, "Burstable", "uid-1", "app", ["sleep", "60"], cpus=CPUS[-1:], mems=[0])
    assert group.parts[-4:] == ("kubepods", "burstable", "poduid-1", "app")
    assert group.parent.parent.parent.parent.name == cgroups.lab_root_name(env)
    assert runtime.wait_joined(group, proc.pid)
    seen = runtime.proc_affinity(proc.pid)
    assert seen.cpus == CPUS[-1:] and seen.mems == [0]
    assert Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"60"]
    # the cpuset can change under a running process (UpdateContainerResources)
    runtime.set_cpuset(group, CPUS)
    assert runtime.proc_affinity(proc.pid).cpus == CPUS
    assert runtime.running_pids(env, "uid-1", "app") == [proc.pid]
    runtime.stop(env, "uid-1", "app")
    assert runtime.proc_affinity(proc.pid) is None or proc.poll() is not None


def test_guaranteed_pods_sit_directly_under_kubepods(env):
    assert runtime.container_cgroup_relpath("Guaranteed", "u", "c") == "kubepods/podu/c"
    assert runtime.container_cgroup_relpath("BestEffort", "u", "c") == "kubepods/besteffort/podu/c"


def test_init_container_runs_to_completion_in_its_cpuset(env, tmp_path):
    out = tmp_path / "seen"
    code = runtime.run_to_completion(env, "Guaranteed", "uid-2", "init", [
        "sh", "-c", f"grep Cpus_allowed_list /proc/self/status > {out}; exit 3"], cpus=CPUS[:1])
    assert code == 3
    assert out.read_text().split()[-1] == str(CPUS[0])
    assert not (cgroups.cpuset_hierarchy()[1] / cgroups.lab_root_name(env) / "kubepods/poduid-2/init").exists()
