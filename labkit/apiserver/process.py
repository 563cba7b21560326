"""The embedded API server as a lab process, seen from outside: where it says it listens
(server.json in its state directory, written by server.EmbeddedServer once it listens, before its
controllers start, and read here), whether it still runs, and `spawn(env)`, which starts it as a
tracked process of a lab.

Light on purpose: a check, a solution or a tool that only talks HTTPS to a running server reads
its target through this module (labkit.apiserver.target), without importing the server itself.

server.json: {"url": "https://127.0.0.1:PORT", "port": PORT, "pid": PID, "kubeconfig": PATH}
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from labkit.apiserver.client import HttpClient
from labkit.controllers.manager import DEFAULT_CONTROLLERS

SERVER_FILE = "server.json"

ADMIN_USER = "labkit-admin"
# the admin kubeconfig is what kubeadm v1.29+ writes to admin.conf: a user in the group
# kubeadm:cluster-admins, which the ClusterRoleBinding of that name binds to cluster-admin
# (bootstrappolicy.admin_binding), so its requests are authorized by RBAC; system:masters is
# kept for the server's own loopback clients, as kubeadm keeps it for super-admin.conf
ADMIN_GROUP = "kubeadm:cluster-admins"


@dataclass
class ServerInfo:
    url: str
    port: int
    pid: int
    kubeconfig: Path
    state_dir: Path

    @property
    def token(self) -> str:
        """The admin user's bearer token (the one in the kubeconfig the server wrote)."""
        return self.client().token

    def client(self) -> HttpClient:
        return HttpClient.for_embedded(self.kubeconfig)

    def set_controller(self, name: str, running: bool | None = None, restart: bool = False) -> dict:
        body = {"restart": True} if restart else {"running": running}
        return self.client().check(*self.client().request("PUT", f"/labkit/v1/controllers/{name}", body=body))

    def wait_controllers(self, names, timeout: float = 30.0, alive=None, log: str | os.PathLike | None = None) -> None:
        """Until each controller of `names` runs (its informers have listed what the server holds):
        the server starts its controllers after it listens (server.EmbeddedServer.start_controllers).
        `alive()` false, a controller that failed to start, or `timeout`: a LabkitError naming it
        and `log`, where the server's output is."""
        from labkit.errors import LabkitError
        names = list(names)
        if not names:
            return
        where = f" (log: {log})" if log else ""
        client = self.client()
        deadline = time.monotonic() + timeout
        while True:
            status = client.check(*client.request("GET", "/labkit/v1/controllers/startup"))
            failed = {n: e for n, e in (status.get("failed") or {}).items() if n in names}
            if failed:
                raise LabkitError("the API server's controller " + "; ".join(f"{n} did not start: {e}"
                                                                             for n, e in failed.items()) + where)
            missing = [n for n in names if n not in status.get("running", [])]
            if not missing:
                return
            if status.get("done") and not any(n in status.get("pending", []) for n in missing):
                raise LabkitError(f"the API server does not run the controller(s) {', '.join(missing)}{where}")
            if alive is not None and not alive():
                raise LabkitError(f"the API server exited while its controllers started{where}")
            if time.monotonic() > deadline:
                raise LabkitError(f"the API server's controller(s) {', '.join(missing)} did not start within "
                                  f"{timeout:.0f} s{where}")
            time.sleep(0.02)


def server_json(url: str, port: int, kubeconfig: Path) -> str:
    """The text of server.json for this process, which the server writes once it listens."""
    return json.dumps({"url": url, "port": port, "pid": os.getpid(), "kubeconfig": str(kubeconfig)}) + "\n"


def remove_server_info(state_dir: Path) -> None:
    (Path(state_dir) / SERVER_FILE).unlink(missing_ok=True)


def read_server_info(state_dir: str | os.PathLike) -> ServerInfo | None:
    state_dir = Path(state_dir)
    try:
        data = json.loads((state_dir / SERVER_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return ServerInfo(data["url"], data["port"], data["pid"], Path(data["kubeconfig"]), state_dir)


def server_alive(state_dir: str | os.PathLike) -> bool:
    """Whether the server of `state_dir` said where it listens and its process still lives."""
    info = read_server_info(state_dir)
    if info is None:
        return False
    try:
        os.kill(info.pid, 0)
    except OSError:
        return False
    return True


def spawn(env, tag: str = "apiserver", port: int = 0, controllers=DEFAULT_CONTROLLERS,
          timeout: float = 30.0, emulated_version: str | None = None,
          audit_policy: str | os.PathLike | None = None, ready=()) -> ServerInfo:
    """Start the server as a tracked process of the lab `env` (state in env.dir/<tag>) and wait
    until it listens, and until the controllers named in `ready` run. The kubeconfig is in the
    returned ServerInfo. The state directory is in the lab's ledger too: its objects live as long
    as the lab, so `labkit reset`, `cleanup` and a rebuild after a crash start from an empty server.

    The server starts `controllers` one after the other, in their order, once it listens: objects
    made before a controller started are in its informers' first list, and it acts on them then, so
    a build that waits for a controller's effect (bounded) needs nothing more; what must run before
    the build makes anything goes in `ready`."""
    from labkit import procs
    from labkit.errors import LabkitError

    state_dir = Path(env.dir) / tag
    env.ledger.record("path", path=str(state_dir))
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    remove_server_info(state_dir)
    argv = [sys.executable, "-m", "labkit.apiserver", "--state", str(state_dir), "--port", str(port),
            "--controllers", ",".join(controllers) or "none"]
    if emulated_version:
        argv += ["--emulated-version", emulated_version]
    if audit_policy:
        argv += ["--audit-policy", str(audit_policy)]
    proc = procs.spawn(env, tag, argv)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = read_server_info(state_dir)
        if info is not None and info.pid == proc.pid:
            info.wait_controllers(ready, max(deadline - time.monotonic(), 1.0), alive=lambda: proc.poll() is None,
                                  log=Path(env.dir) / "logs" / f"{tag}.log")
            return info
        if proc.poll() is not None:
            log = Path(env.dir) / "logs" / f"{tag}.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise LabkitError(f"the API server exited with code {proc.returncode}: {tail.strip()}")
        time.sleep(0.05)
    raise LabkitError(f"the API server did not start listening within {timeout:.0f} s (log: {env.dir}/logs/{tag}.log)")
