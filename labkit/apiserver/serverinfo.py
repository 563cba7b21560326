"""Where a running embedded API server listens, as it wrote it to <state>/server.json: read by
everything that talks to a lab's server (labkit.apiserver.target, the labs' tools) without
importing the server itself (labkit.apiserver.server, which writes the file, is far heavier)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from labkit.apiserver.client import HttpClient

ADMIN_USER = "labkit-admin"


@dataclass
class ServerInfo:
    url: str
    port: int
    pid: int
    kubeconfig: Path
    state_dir: Path

    @property
    def token(self) -> str:
        from labkit.apiserver import authn
        return next(t for t, u in authn.load_token_file(self.state_dir / "tokens.csv").items() if u.name == ADMIN_USER)

    def client(self) -> HttpClient:
        return HttpClient.for_embedded(self.kubeconfig)

    def set_controller(self, name: str, running: bool | None = None, restart: bool = False) -> dict:
        body = {"restart": True} if restart else {"running": running}
        return self.client().check(*self.client().request("PUT", f"/labkit/v1/controllers/{name}", body=body))


def read_server_info(state_dir: str | os.PathLike) -> ServerInfo | None:
    state_dir = Path(state_dir)
    try:
        data = json.loads((state_dir / "server.json").read_text())
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
