"""Where the gc lab's objects live: labkit's embedded API server (the default) or a real cluster
(`labkit run gc --kubeconfig FILE`). Checks and `labkit gc graph` go through a Target, so they
read the same live objects either way; only the embedded server has an audit log and a GC
decision log (`audit()` / `decisions()` return None on a real cluster)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labkit.apiserver import audit as audit_log
from labkit.apiserver.client import HttpClient
from labkit.controllers import decisions as decision_log
from labkit.errors import LabkitError

LAB_ID = "gc"
SERVER_TAG = "apiserver"     # the embedded server's state directory: <lab dir>/apiserver


@dataclass
class Target:
    kubeconfig: Path
    context: str | None = None
    state_dir: Path | None = None    # the embedded server's state (audit.log, decisions.log)

    @property
    def embedded(self) -> bool:
        return self.state_dir is not None

    @property
    def description(self) -> str:
        return "labkit's embedded API server" if self.embedded else f"the cluster of {self.kubeconfig}"

    def client(self) -> HttpClient:
        return HttpClient.from_kubeconfig(self.kubeconfig, self.context)

    def kubectl(self, *args: str, input: str | None = None) -> str:
        """Run the real kubectl against this target; its output, or a LabkitError with its message."""
        import subprocess
        argv = ["kubectl", "--kubeconfig", str(self.kubeconfig)] + (["--context", self.context] if self.context else [])
        result = subprocess.run(argv + list(args), capture_output=True, text=True, input=input, timeout=120)
        if result.returncode != 0:
            raise LabkitError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def audit(self) -> list[dict] | None:
        """The API server's audit events, oldest first; None on a real cluster."""
        return audit_log.read(self.state_dir / "audit.log") if self.embedded else None

    def decisions(self) -> list[dict] | None:
        """The garbage collector's decision log; None on a real cluster."""
        return decision_log.read(self.state_dir / "decisions.log") if self.embedded else None


def for_env(env) -> Target:
    """The target of a running gc lab (lab code: lab.py, checks, solutions)."""
    options = getattr(env, "options", None) or {}
    if options.get("kubeconfig"):
        return Target(Path(options["kubeconfig"]), options.get("context"))
    from labkit.apiserver.server import read_server_info
    info = read_server_info(Path(env.dir) / SERVER_TAG)
    if info is None:
        raise LabkitError(f"the gc lab's API server is not running: `labkit run {LAB_ID}` starts it")
    return Target(info.kubeconfig, None, info.state_dir)


def lab_target() -> Target:
    """The target of the gc lab on this machine (for tools run outside lab code)."""
    from labkit.state import LabState

    state = LabState(LAB_ID)
    if state.phase != "up":
        raise LabkitError(f"the gc lab is not running: start it with `labkit run {LAB_ID}`, or pass --kubeconfig FILE")

    class _Env:
        dir = state.dir
        options = dict(state.status.get("options") or {})
    return for_env(_Env)
