"""Mounts and paths in the host's mount namespace that labkit made, and reading mountinfo.

Labs keep their experiments in mount namespaces of their own; the few host-side things labkit
may create (the /run/netns mount that named network namespaces need, lab directories) are
recorded in a ledger and removed here.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from pathlib import Path

from labkit import paths

MNT_DETACH = 2
# glibc by its soname (Debian, Ubuntu): ctypes.util.find_library("c") runs `ldconfig -p` in a child
# process, for every labkit process that imports this module
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points(mountinfo: str | None = None) -> list[str]:
    """Mount points listed in a mountinfo text (default: this process's mount namespace)."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    return [unescape(line.split(" ")[4]) for line in mountinfo.splitlines() if line]


def is_mount_point(path: str | os.PathLike) -> bool:
    return os.path.abspath(path) in mount_points()


def umount(path: str | os.PathLike, lazy: bool = True) -> None:
    if _libc.umount2(os.fsencode(os.fspath(path)), MNT_DETACH if lazy else 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))


def remove_recorded(entry: dict) -> bool:
    path = entry["path"]
    removed = False
    while is_mount_point(path):   # stacked mounts: take them all
        umount(path, lazy=True)
        removed = True
    return removed


def _owned(path: Path) -> bool:
    """Only trees under labkit's own roots may be deleted by cleanup."""
    path = path.resolve()
    roots = [paths.state_root().resolve(), Path("/run/labkit")]
    return any(path == r or r in path.parents for r in roots)


def remove_recorded_path(entry: dict) -> bool:
    path = Path(entry["path"])
    if not path.exists() and not path.is_symlink():
        return False
    if not _owned(path):
        raise RuntimeError(f"refusing to delete {path}: not under labkit's state directory or /run/labkit")
    for mp in sorted((m for m in mount_points() if m == str(path) or m.startswith(str(path) + "/")),
                     key=len, reverse=True):
        umount(mp, lazy=True)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    return True
