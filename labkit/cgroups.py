"""Lab-owned cgroups: one subtree per lab and controller, cgroup v1 or v2.

The subtree root is `labkit-<prefix>-<lab>` directly under the hierarchy that offers the
controller (v1: /sys/fs/cgroup/<controller>, e.g. cpuset, cpu, cpuacct, memory; v2: the unified
root, which must offer the controller). The controller defaults to cpuset. Every directory is
recorded in the lab's ledger before it is made; removal kills what runs inside and removes the
directories bottom-up.

v1 cpuset: a new cgroup takes no task until cpuset.cpus and cpuset.mems are set, so it starts
with its parent's. v2: a cgroup has a controller's files only when its parent lists the
controller in cgroup.subtree_control, so it is enabled in each parent of the subtree before a
child is made (the kernel's "no internal processes" rule is kept: processes live only in
leaves); cpuset.cpus.effective says what applies, an empty cpuset.cpus means "the parent's".
When the unified root does not delegate the controller yet, enabling it there is the one change
outside the lab's subtree: it is recorded with the subtree root before it is made and undone
when the root's entry is cleaned up (unless another cgroup has come to use it meanwhile: the
kernel refuses then, and it stays).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


# A file every cgroup of the controller's v1 hierarchy has.
V1_MARKERS = {"cpuset": "cpuset.cpus", "cpu": "cpu.shares", "cpuacct": "cpuacct.usage",
              "memory": "memory.limit_in_bytes"}


def hierarchy(controller: str = "cpuset") -> tuple[str, Path] | None:
    """("v1", path) or ("v2", path) for the hierarchy that offers `controller`, or None."""
    v1 = CGROUP_ROOT / controller
    if controller in V1_MARKERS and (v1 / V1_MARKERS[controller]).exists():
        return "v1", v1
    for candidate in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        controllers = candidate / "cgroup.controllers"
        if controllers.exists() and controller in controllers.read_text().split():
            return "v2", candidate
    return None


def cpuset_hierarchy() -> tuple[str, Path] | None:
    return hierarchy("cpuset")


def hierarchy_description() -> str:
    """Which path CPU pinning takes on this machine, for `labkit doctor`."""
    found = cpuset_hierarchy()
    if found is None:
        return "no cgroup hierarchy offers the cpuset controller"
    version, base = found
    if version == "v1":
        return (f"cgroup v1: cpuset hierarchy at {base}; labkit-<prefix>-<lab>/kubepods/... below it, "
                "cpuset.cpus and cpuset.mems written per container")
    delegated = "cpuset" in _subtree_control(base)
    return (f"cgroup v2 (unified) at {base}; labkit-<prefix>-<lab>/kubepods/... below it, cpuset enabled through "
            f"cgroup.subtree_control at each level, cpuset.cpus.effective read back; the root "
            + ("already delegates cpuset" if delegated else "does not delegate cpuset yet: labkit enables it there while "
               "a lab runs and disables it again at cleanup"))


def _subtree_control(path: Path) -> list[str]:
    control = path / "cgroup.subtree_control"
    return control.read_text().split() if control.exists() else []


def lab_root_name(env) -> str:
    return f"labkit-{env.prefix}-{env.lab.id}"


def create(env, relpath: str = "", controller: str = "cpuset") -> Path:
    """Create (recorded first) the lab's cgroup subtree root and `relpath` under it."""
    found = hierarchy(controller)
    if found is None:
        raise RuntimeError(f"no cgroup hierarchy with the {controller} controller (see `labkit doctor`)")
    version, base = found
    root = base / lab_root_name(env)
    parts = [p for p in relpath.split("/") if p]
    path = root
    for step in [None, *parts]:
        if step is not None:
            path = path / step
        if version == "v2":       # one tree: the controller is enabled level by level
            in_base = path == root and controller not in _subtree_control(base)
            if in_base or not path.exists():
                env.ledger.record("cgroup", path=str(path), **({"enabled_in_parent": [controller]} if in_base else {}))
            enable(path.parent, controller)
        elif not path.exists():
            env.ledger.record("cgroup", path=str(path))
        if path.exists():
            continue
        path.mkdir()
        if version == "v1" and controller == "cpuset":
            # A v1 cpuset cgroup takes no tasks until cpus and mems are set: start from the parent's.
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (path / knob).write_text((path.parent / knob).read_text().strip() or "\n")
    return path


def enable(parent: Path, *controllers: str) -> None:
    """v2: let the children of `parent` use the controllers (cgroup.subtree_control). Only for the
    lab's own cgroups: the root's change goes through create(), which records it first."""
    have = _subtree_control(parent)
    wanted = " ".join(f"+{c}" for c in controllers if c not in have)
    if wanted:
        (parent / "cgroup.subtree_control").write_text(wanted)


def write(path: Path, knob: str, value: str) -> None:
    (Path(path) / knob).write_text(value)


def add_process(path: Path, pid: int) -> None:
    (Path(path) / "cgroup.procs").write_text(str(pid))


def processes(path: Path) -> list[int]:
    pids: list[int] = []
    for dirpath, _dirs, files in os.walk(path):
        if "cgroup.procs" in files:
            try:
                pids += [int(x) for x in (Path(dirpath) / "cgroup.procs").read_text().split()]
            except OSError:
                pass
    return pids


def remove_recorded(entry: dict) -> bool:
    path = Path(entry["path"])
    removed = path.exists()
    if removed:
        _remove_tree(path)
    for controller in entry.get("enabled_in_parent", []):
        try:
            (path.parent / "cgroup.subtree_control").write_text(f"-{controller}")
            removed = True
        except OSError:
            pass    # EBUSY: another cgroup uses it below the root by now; it stays enabled
    return removed


def _remove_tree(path: Path) -> None:
    from labkit.procs import kill
    kill(processes(path), grace=0.5)
    # bottom-up: children first
    for dirpath, _dirs, _files in sorted(os.walk(path), key=lambda t: -len(t[0])):
        for attempt in range(50):
            try:
                os.rmdir(dirpath)
                break
            except FileNotFoundError:
                break
            except OSError:
                if attempt == 49:
                    raise
                time.sleep(0.02)   # the kernel releases a cgroup a moment after its last task exits
