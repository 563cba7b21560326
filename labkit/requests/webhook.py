"""Student webhooks of the requests lab: each runs as a lab process (`procs.spawn`, so the ledger
has it before it starts and `labkit cleanup requests` stops it), listens on loopback with a
serving certificate from the lab's webhook CA, and keeps its port across restarts so the
webhook configuration that points at it stays right.

State, in <lab dir>/webhooks/: <name>.json {name, file, port, mode, tag}; the certificates are in
<lab dir>/webhook-pki/ (the CA and <name>.crt/.key).
"""

from __future__ import annotations

import json
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from labkit import procs
from labkit.errors import LabkitError
from labkit.requests import pki

HOST = "127.0.0.1"
PKI_DIR, STATE_DIR = "webhook-pki", "webhooks"


@dataclass
class Served:
    name: str
    file: str
    port: int
    mode: str           # "function" (review() in FILE, served by labkit.requests.host) or "server"
    running: bool
    log: Path
    cert: Path
    key: Path

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"


def pki_dir(env) -> Path:
    return Path(env.dir) / PKI_DIR


def _state(env, name: str) -> Path:
    return Path(env.dir) / STATE_DIR / f"{name}.json"


def _tag(name: str) -> str:
    return f"webhook-{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


def certificates(env, name: str) -> tuple[Path, Path]:
    """The serving certificate of webhook `name` (made once), for https://127.0.0.1 and localhost."""
    directory = pki_dir(env)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    if cert.exists() and key.exists():
        return cert, key
    return pki.issue_serving(directory, name, pki.sans_for(name))


def running(env, name: str) -> bool:
    return procs.running(procs.owner_token(env, _tag(name)))


def stop(env, name: str) -> bool:
    """Stop webhook `name`; True if it was running."""
    return procs.remove_all({procs.owner_token(env, _tag(name))})


def serve(env, file: Path, name: str, port: int | None = None, whole_server: bool = False,
          timeout: float = 10.0) -> Served:
    """(Re)start webhook `name` from `file`; waits until it listens."""
    file = Path(file).resolve()
    if not file.is_file():
        raise LabkitError(f"{file}: no such file")
    if not pki.NAME_RE.match(name):
        raise LabkitError(f"--name {name!r}: use lowercase letters, digits and dashes")
    state = _state(env, name)
    previous = json.loads(state.read_text()) if state.exists() else {}
    port = port or previous.get("port") or _free_port()
    stop(env, name)
    if _listening(port):
        raise LabkitError(f"port {port} of {HOST} is in use by another program: choose another with --port")
    cert, key = certificates(env, name)
    state.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = "server" if whole_server else "function"
    state.write_text(json.dumps({"name": name, "file": str(file), "port": port, "mode": mode}) + "\n")
    log = Path(env.dir) / "logs" / f"{_tag(name)}.log"
    if whole_server:
        argv = [sys.executable, str(file)]
        extra = {"WEBHOOK_CERT": str(cert), "WEBHOOK_KEY": str(key), "WEBHOOK_HOST": HOST, "WEBHOOK_PORT": str(port)}
    else:
        argv = [sys.executable, "-m", "labkit.requests.host", "--file", str(file), "--cert", str(cert),
                "--key", str(key), "--host", HOST, "--port", str(port)]
        extra = {}
    start = log.stat().st_size if log.exists() else 0
    proc = procs.spawn(env, _tag(name), argv, cwd=file.parent, extra_env=extra)
    deadline = time.monotonic() + timeout
    while not _listening(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(env, name)
            tail = log.read_bytes()[start:].decode(errors="replace").strip()[-1500:] if log.exists() else ""
            why = f"exited with code {proc.returncode}" if proc.returncode is not None else \
                f"did not listen on {HOST}:{port} within {timeout:.0f} s"
            raise LabkitError(f"webhook {name} {why}" + (f":\n{tail}" if tail else f" (log: {log})"))
        time.sleep(0.05)
    return describe(env, name)


def describe(env, name: str) -> Served | None:
    state = _state(env, name)
    if not state.exists():
        return None
    data = json.loads(state.read_text())
    directory = pki_dir(env)
    return Served(name, data["file"], data["port"], data["mode"], running(env, name),
                  Path(env.dir) / "logs" / f"{_tag(name)}.log", directory / f"{name}.crt", directory / f"{name}.key")


def all_served(env) -> list[Served]:
    directory = Path(env.dir) / STATE_DIR
    if not directory.is_dir():
        return []
    return [s for p in sorted(directory.glob("*.json")) if (s := describe(env, p.stem)) is not None]


def forget(env, name: str) -> None:
    """Stop webhook `name` and forget it (its certificate stays)."""
    stop(env, name)
    _state(env, name).unlink(missing_ok=True)
