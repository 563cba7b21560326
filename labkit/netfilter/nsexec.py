"""Run a Python function inside a lab network namespace, in a forked child.

Netlink (the conntrack table through pyroute2, nfacct counters) works on the calling process's network namespace. So that
labkit never touches the host's tables (even *reading* a legacy table from the root namespace
creates it there), such work runs in a child process that joined the lab namespace with setns(2)
before doing anything else; the result comes back pickled through a pipe.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import traceback

from labkit.errors import LabkitError

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def call_in_netns(netns: str, fn, *args, **kwargs):
    """fn(*args, **kwargs) run in a child that joined /run/netns/<netns>; returns its result
    (which must pickle). An exception in the child is re-raised here as LabkitError."""
    from labkit.netlab import netns_path

    path = str(netns_path(netns))
    if not os.path.exists(path):
        raise LabkitError(f"network namespace {netns} does not exist")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # child: join the namespace first, then work
        os.close(read_fd)
        try:
            _setns(path)
            payload = ("ok", fn(*args, **kwargs))
        except BaseException as exc:              # report everything, never return into the parent's code
            payload = ("error", f"{type(exc).__name__}: {exc}", traceback.format_exc())
        try:
            data = pickle.dumps(payload)
        except Exception as exc:
            data = pickle.dumps(("error", f"result does not pickle: {exc}", ""))
        with os.fdopen(write_fd, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as inp:
        data = inp.read()
    os.waitpid(pid, 0)
    if not data:
        raise LabkitError(f"in {netns}: the helper process died without an answer")
    payload = pickle.loads(data)
    if payload[0] == "error":
        raise LabkitError(f"in {netns}: {payload[1]}")
    return payload[1]
