"""Lab-owned cgroups: one subtree per lab and controller, cgroup v1 or v2.

The subtree root is `labkit-<prefix>-<lab>` directly under the hierarchy that offers the
controller (v1: /sys/fs/cgroup/<controller>, e.g. cpuset, cpu, cpuacct, memory; v2: the unified
root, which must offer the controller). The controller defaults to cpuset. Every directory is
recorded in the lab's ledger before it is made; removal kills what runs inside and removes the
directories bottom-up.
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
        if path.exists():
            if version == "v2" and step is not None:
                _enable(path.parent, controller)   # v2: one tree, controllers enabled level by level
            continue
        env.ledger.record("cgroup", path=str(path))
        if version == "v2":
            _enable(path.parent, controller)
        path.mkdir()
        if version == "v1" and controller == "cpuset":
            # A v1 cpuset cgroup takes no tasks until cpus and mems are set: start from the parent's.
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (path / knob).write_text((path.parent / knob).read_text().strip() or "\n")
    return path


def _enable(parent: Path, controller: str) -> None:
    control = parent / "cgroup.subtree_control"
    if control.exists() and controller not in control.read_text().split():
        control.write_text(f"+{controller}")


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
    if not path.exists():
        return False
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
    return True
