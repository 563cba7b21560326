"""A minimal container runtime for the live NUMA lab: processes in cpuset cgroups.

What a CRI runtime does for kubelet's CPU and Memory Managers, on real kernel parts:
* every container is a real process in its own cgroup, laid out as kubelet's cgroupfs driver lays
  out pods (pkg/kubelet/cm/qos_container_manager_linux.go, helpers_linux.go GetPodCgroupNameSuffix):
  `kubepods/pod<uid>/` for Guaranteed pods, `kubepods/burstable/pod<uid>/` and
  `kubepods/besteffort/pod<uid>/` for the others, with one child per container named by its
  container ID (64 hex digits), as containerd names it with the cgroupfs driver (with the systemd
  driver, usual on kubeadm nodes, the same tree is spelled kubepods.slice/.../cri-containerd-<id>.scope)
  — all under the lab's own cgroup subtree (labkit.cgroups), cgroup v1 cpuset or v2, whichever the
  host offers (`labkit doctor` says which);
* the process joins its cgroup *before* it executes the container's command (as runc does), so it
  never runs with another CPU set;
* `cpuset.cpus` / `cpuset.mems` are what kubelet asks the runtime for (CRI
  `LinuxContainerResources.CpusetCpus` / `CpusetMems`, set at creation by
  `internalContainerLifecycleImpl.PreCreateContainer` and later by the CPU Manager's reconcile
  loop through `UpdateContainerResources`); the kernel applies them to every task of the cgroup;
* the truth is read back from the kernel: `/proc/<pid>/status` `Cpus_allowed_list` and
  `Mems_allowed_list`.

Container images do not exist here: a container runs its `command` + `args` from the Pod spec as
a host command (default: `sleep infinity`, or `true` for an init container, which has to finish).
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from labkit import cgroups, procs
from labkit.errors import LabkitError
from labkit.numa.cpuset import format_cpus, parse

DEFAULT_COMMAND = ("sleep", "infinity")
DEFAULT_INIT_COMMAND = ("true",)
# Joins the cgroup given as $1, then becomes the container's command.
_ENTER_CGROUP = 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"'
_NAME_RE = re.compile(r"[^A-Za-z0-9_.-]")


def qos_parent(qos_class: str) -> str:
    """kubelet's cgroupfs layout: Guaranteed pods sit directly under kubepods."""
    return {"Guaranteed": "kubepods", "Burstable": "kubepods/burstable",
            "BestEffort": "kubepods/besteffort"}[qos_class]


def lab_cgroup_root(env) -> Path:
    """The lab's cgroup subtree (labkit.cgroups creates it on first use)."""
    found = cgroups.cpuset_hierarchy()
    if found is None:
        raise LabkitError("no cgroup hierarchy with the cpuset controller (see `labkit doctor`)")
    return found[1] / cgroups.lab_root_name(env)


def new_container_id() -> str:
    """A container ID as containerd makes one (64 hex digits)."""
    return secrets.token_hex(32)


def container_cgroup_relpath(qos_class: str, pod_uid: str, container_id: str) -> str:
    return f"{qos_parent(qos_class)}/pod{pod_uid}/{container_id}"


def container_tag(pod_uid: str, container: str) -> str:
    return f"pod{pod_uid}/{_NAME_RE.sub('_', container)}"


@dataclass
class Affinity:
    """What the kernel says a process may use."""
    cpus: list[int]
    mems: list[int]


def _parse_list(text: str) -> list[int]:
    return sorted(parse(text.strip()))


def proc_affinity(pid: int) -> Affinity | None:
    """Cpus_allowed_list / Mems_allowed_list of a live process (None when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return Affinity(_parse_list(fields.get("Cpus_allowed_list", "")), _parse_list(fields.get("Mems_allowed_list", "")))


def cgroup_cpuset(path: Path) -> Affinity:
    """The cpuset a cgroup asks for (v1 cpuset.cpus, v2 cpuset.cpus; empty in v2 = inherited)."""
    path = Path(path)
    effective = "cpuset.cpus.effective" if (path / "cpuset.cpus.effective").exists() else "cpuset.cpus"
    mems_file = "cpuset.mems.effective" if (path / "cpuset.mems.effective").exists() else "cpuset.mems"
    return Affinity(_parse_list((path / effective).read_text()), _parse_list((path / mems_file).read_text()))


def set_cpuset(path: Path, cpus, mems=None) -> None:
    """UpdateContainerResources for the cpuset: v1 needs a non-empty set, so mems=None keeps it."""
    if mems is not None:
        cgroups.write(path, "cpuset.mems", format_cpus(mems))
    cgroups.write(path, "cpuset.cpus", format_cpus(cpus))


def container_command(spec: dict, init: bool = False) -> list[str]:
    argv = list(spec.get("command") or []) + list(spec.get("args") or [])
    return argv or list(DEFAULT_INIT_COMMAND if init else DEFAULT_COMMAND)


def check_command(argv: list[str], where: str, path) -> None:
    from labkit.errors import ConfigError
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ConfigError(path, where, "expected a list of strings")
    if shutil.which(argv[0]) is None:
        raise ConfigError(path, where, f"{argv[0]!r} is not a command on this host "
                                       "(containers run host commands; images are not pulled)")


def start(env, qos_class: str, pod_uid: str, container: str, container_id: str, argv: list[str], cpus, mems=None):
    """Create the container's cgroup with its cpuset and start its process inside.

    Returns (cgroup path, subprocess.Popen of the process).
    """
    group = cgroups.create(env, container_cgroup_relpath(qos_class, pod_uid, container_id))
    set_cpuset(group, cpus, mems)
    proc = procs.spawn(env, container_tag(pod_uid, container), ["sh", "-c", _ENTER_CGROUP, "sh", str(group), *argv])
    return group, proc


def wait_joined(group: Path, pid: int, timeout: float = 5.0) -> bool:
    """True once `pid` runs inside `group` (the shell wrapper joins before exec)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid in cgroups.processes(group):
            return True
        if proc_affinity(pid) is None:
            return False
        time.sleep(0.01)
    return False


def run_to_completion(env, qos_class: str, pod_uid: str, container: str, container_id: str, argv: list[str], cpus,
                      mems=None, timeout: float = 60.0) -> int:
    """An init container: run it in its cgroup until it exits; returns its exit code."""
    group, proc = start(env, qos_class, pod_uid, container, container_id, argv, cpus, mems)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LabkitError(f"init container {container} did not finish within {timeout:.0f} s") from None
    finally:
        remove_cgroup(group)   # kills whatever it left running


def stop(env, pod_uid: str, container: str) -> None:
    pids = procs.find(procs.owner_token(env, container_tag(pod_uid, container)))
    if pids:
        procs.kill(pids, grace=1.0)


def remove_cgroup(path: Path) -> None:
    """Remove a pod's or container's cgroup (killing what still runs there), children first."""
    cgroups.remove_recorded({"path": str(path)})


def running_pids(env, pod_uid: str, container: str) -> list[int]:
    return procs.find(procs.owner_token(env, container_tag(pod_uid, container)))

