"""A scheduler of the student's own, run as a lab process of the scheduler lab (`procs.spawn`: the
ledger has it before it starts, `labkit cleanup scheduler` stops it): `python FILE` with KUBECONFIG
naming the lab's embedded API server, in FILE's directory, its output in the lab's log
logs/my-scheduler.log. One runs at a time; serving again restarts it with the file given.

The program authenticates as a user of its own, `my-scheduler` (a client certificate signed by the
lab CA, in the admin kubeconfig's group: the same rights as the student), so that the audit log
tells the program's requests from those the student types (a binding POSTed with kubectl is not
a scheduler's)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from labkit import procs
from labkit.errors import LabkitError

TAG = "my-scheduler"
USER = "my-scheduler"   # the user the served program authenticates as (audit log: user.username)
STARTUP = 1.0           # seconds it must stay up for `serve` to call it started


def log_path(env) -> Path:
    return Path(env.dir) / "logs" / f"{TAG}.log"


def running(env) -> bool:
    return procs.running(procs.owner_token(env, TAG))


def stop(env) -> bool:
    """Stop the student's scheduler; True if it was running."""
    return procs.remove_all({procs.owner_token(env, TAG)})


def program_kubeconfig(target) -> Path:
    """The kubeconfig the served program gets: user `my-scheduler`, with a client certificate for
    it, in the embedded server's state directory (removed with the server by `labkit cleanup`)."""
    from labkit.apiserver import users
    from labkit.apiserver.process import ADMIN_GROUP, read_server_info
    path = Path(target.state_dir) / f"{TAG}.kubeconfig"
    if not path.exists():
        info = read_server_info(target.state_dir)
        if info is None:
            raise LabkitError("the lab's API server is not running: start the lab with `labkit run scheduler`")
        pki = Path(target.state_dir) / "pki"
        cert, key = users.client_certificate(pki, USER, [ADMIN_GROUP])
        users.write_kubeconfig(path, info.url, pki, USER, certificate=cert, key=key)
    return path


def serve(env, file: Path, target) -> Path:
    """(Re)start `python FILE` as the lab's process `my-scheduler`, with KUBECONFIG naming the lab's
    API server as the user `my-scheduler`; fails with the end of its log if it exits within its
    first second."""
    file = Path(file).resolve()
    if not file.is_file():
        raise LabkitError(f"{file}: no such file")
    kubeconfig = program_kubeconfig(target)
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
