"""Named network namespaces (the `ip netns` kind: /run/netns/<name>) owned by a lab.

Names are `<prefix>-<lab>-<host>`, so `ip netns` lists them and nothing else is confused with
them. The first named namespace on a machine makes /run/netns a mount point (iproute2 and
pyroute2 bind it onto itself); when labkit was the one to do that, a marker under /run/labkit
says so, and the last cleanup that leaves /run/netns empty undoes it, so the host's mount table
is exactly as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Sequence

from labkit import hostmounts
from labkit.errors import LabkitError

RUN_NETNS = Path("/run/netns")
MARKER_DIR = Path("/run/labkit")
MARKER = MARKER_DIR / "netns-mount.json"


def netns_path(name: str) -> Path:
    return RUN_NETNS / name


def exists(name: str) -> bool:
    return netns_path(name).exists()


def _note_run_netns() -> None:
    """Before the first namespace: remember whether labkit is about to create the /run/netns mount."""
    if hostmounts.is_mount_point(RUN_NETNS) or MARKER.exists():
        return
    MARKER_DIR.mkdir(mode=0o755, exist_ok=True)
    tmp = MARKER.with_suffix(".tmp")
    tmp.write_text(json.dumps({"dir_existed": RUN_NETNS.exists()}))
    os.replace(tmp, MARKER)


def release_run_netns() -> None:
    """Undo the /run/netns mount if labkit made it and no namespace is left in it."""
    if not MARKER.exists():
        return
    if RUN_NETNS.exists() and any(RUN_NETNS.iterdir()):
        return
    try:
        dir_existed = json.loads(MARKER.read_text()).get("dir_existed", True)
    except (OSError, ValueError):
        dir_existed = True
    while hostmounts.is_mount_point(RUN_NETNS):
        hostmounts.umount(RUN_NETNS, lazy=False)
    if not dir_existed and RUN_NETNS.exists():
        RUN_NETNS.rmdir()
    MARKER.unlink(missing_ok=True)
    try:
        MARKER_DIR.rmdir()
    except OSError:
        pass


def create_netns(env, host: str) -> str:
    """Create the lab's network namespace for `host` (recorded first); returns its name."""
    from pyroute2 import netns as pr_netns

    name = env.netns_name(host)
    if exists(name):
        raise LabkitError(
            f"network namespace {name} already exists but this lab did not record it; "
            f"remove it (ip netns del {name}) or set LABKIT_PREFIX to another prefix"
        )
    env.ledger.record("netns", name=name)
    _note_run_netns()
    pr_netns.create(name)
    run_in(name, ["ip", "link", "set", "lo", "up"])
    return name


def _processes_in(name: str) -> list[int]:
    try:
        target = os.stat(netns_path(name)).st_ino
    except FileNotFoundError:
        return []
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}/ns/net").st_ino == target:
                    pids.append(int(pid))
            except OSError:
                pass
    return pids


def remove_recorded(entry: dict) -> bool:
    name = entry["name"]
    path = netns_path(name)
    if not path.exists():
        release_run_netns()
        return False
    # Processes a student started inside the namespace (e.g. from `labkit shell`) go with it.
    from labkit.procs import kill
    kill(_processes_in(name), grace=0.5)
    while hostmounts.is_mount_point(path):
        hostmounts.umount(path, lazy=True)
    path.unlink(missing_ok=True)
    release_run_netns()
    return True


def run_in(name: str, argv: Sequence[str], *, check: bool = True, timeout: float | None = 30,
           input: str | None = None) -> subprocess.CompletedProcess:
    """Run a command in a lab network namespace and capture its output (text)."""
    result = subprocess.run(
        ["nsenter", f"--net={netns_path(name)}", "--", *argv],
        capture_output=True, text=True, timeout=timeout, input=input,
    )
    if check and result.returncode != 0:
        raise LabkitError(
            f"in {name}: {' '.join(argv)} failed ({result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
        )
    return result

