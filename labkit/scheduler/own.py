"""A scheduler of the student's own, run as a lab process of the scheduler lab (`procs.spawn`: the
ledger has it before it starts, `labkit cleanup scheduler` stops it): `python FILE` with KUBECONFIG
naming the lab's embedded API server, in FILE's directory, its output in the lab's log
logs/my-scheduler.log. One runs at a time; serving again restarts it with the file given."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from labkit import procs
from labkit.errors import LabkitError

TAG = "my-scheduler"
STARTUP = 1.0           # seconds it must stay up for `serve` to call it started


def log_path(env) -> Path:
    return Path(env.dir) / "logs" / f"{TAG}.log"


def running(env) -> bool:
    return bool(procs.find(procs.owner_token(env, TAG)))


def stop(env) -> bool:
    """Stop the student's scheduler; True if it was running."""
    return procs.remove_all({procs.owner_token(env, TAG)})


def serve(env, file: Path, kubeconfig: Path) -> Path:
    """(Re)start `python FILE` as the lab's process `my-scheduler`; fails with the end of its log
    if it exits within its first second."""
    file = Path(file).resolve()
    if not file.is_file():
        raise LabkitError(f"{file}: no such file")
    stop(env)
    log = log_path(env)
    start = log.stat().st_size if log.exists() else 0
    proc = procs.spawn(env, TAG, [sys.executable, "-u", str(file)], cwd=file.parent,
                       extra_env={"KUBECONFIG": str(kubeconfig)})
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_bytes()[start:].decode(errors="replace").strip()[-1500:] if log.exists() else ""
            raise LabkitError(f"{file.name} exited with code {proc.returncode}" + (f":\n{tail}" if tail else ""))
        time.sleep(0.05)
    return log
