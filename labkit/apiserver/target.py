"""Where a lab's Kubernetes objects live: labkit's embedded API server (the default) or a real
cluster (`labkit run LAB --kubeconfig FILE [--context C]`, for labs whose lab.py lists those
OPTIONS). Lab code, checks and solutions go through a Target, so they read the same live objects
either way; only the embedded server has an audit log and a controllers' decision log
(`audit()` / `decisions()` return None on a real cluster, and checks that need them say so).

On a real cluster everything a lab creates goes through `Target.create`: it refuses an object
that was there before (the lab never takes over, nor later deletes, what is not its own) and
records an `apiobject` ledger entry before the object exists, so `labkit cleanup` deletes it
(and first releases the finalizers the lab itself put on it) even after kill -9."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from labkit.apiserver import audit as audit_log
from labkit.apiserver.client import HttpClient
from labkit.apiserver.process import read_server_info
from labkit.controllers import decisions as decision_log
from labkit.errors import LabkitError

SERVER_TAG = "apiserver"     # the embedded server's state directory: <lab dir>/apiserver
GONE_TIMEOUT = 120.0         # how long create() waits for an object that is still being deleted


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
        if self.embedded:
            return HttpClient.for_embedded(self.kubeconfig)
        return HttpClient.from_kubeconfig(self.kubeconfig, self.context)

    def kubectl(self, *args: str, input: str | None = None) -> str:
        """Run the real kubectl against this target; its output, or a LabkitError with its message."""
        import subprocess
        argv = ["kubectl", "--kubeconfig", str(self.kubeconfig)] + (["--context", self.context] if self.context else [])
        result = subprocess.run(argv + list(args), capture_output=True, text=True, input=input, timeout=120)
        if result.returncode != 0:
            raise LabkitError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def audit(self, since: float = 0.0, exclude_users=(), containing: str = "") -> list[dict] | None:
        """The API server's audit events of requests received at `since` (seconds since the epoch)
        or later, oldest first, but those of the users `exclude_users` (and with `containing`, only
        events whose line holds that text: labkit.apiserver.audit.read_since); None on a real cluster.
        The events are shared with the other calls of this process: read them, never change them."""
        if not self.embedded:
            return None
        return audit_log.read_since(self.state_dir / "audit.log", since, exclude_users, containing)

    def decisions(self, since: float = 0.0) -> list[dict] | None:
        """The controllers' decision log (garbage collector, namespace controller, ...) from
        `since` on; None on a real cluster."""
        if not self.embedded:
            return None
        return [d for d in decision_log.read(self.state_dir / "decisions.log") if d.get("ts", 0) >= since]

    def record(self, env, api_version: str, resource: str, name: str, namespace: str | None = None,
               finalizers: list[str] | None = None) -> None:
        """On a real cluster, put an object the lab is about to create into its ledger (with the
        finalizers the lab puts on it, which cleanup releases before it deletes the object)."""
        if self.embedded:
            return
        fields = dict(kubeconfig=str(self.kubeconfig), context=self.context, apiVersion=api_version,
                      resource=resource, namespace=namespace, name=name)
        if finalizers:
            fields["finalizers"] = list(finalizers)
        env.ledger.record("apiobject", **fields)

    def create(self, env, api_version: str, resource: str, obj: dict, namespace: str | None = None) -> dict:
        """Create `obj` for the lab. On a real cluster: refuse one that exists already (after
        waiting for one that is being deleted to go, e.g. the lab's own from before a reset),
        record it in the ledger, then create it."""
        meta = obj.get("metadata") or {}
        client = self.client()
        if not self.embedded:
            name = meta["name"]
            what = f"{resource} {namespace + '/' if namespace else ''}{name}"
            deadline = time.monotonic() + GONE_TIMEOUT
            while (existing := client.get_or_none(api_version, resource, name, namespace)) is not None:
                if not existing["metadata"].get("deletionTimestamp"):
                    raise LabkitError(f"{what} already exists on {self.description}: the lab needs it for itself "
                                      "(delete it, or use another cluster)")
                if time.monotonic() > deadline:
                    raise LabkitError(f"{what} on {self.description} is still being deleted after "
                                      f"{GONE_TIMEOUT:.0f} s: the lab needs it for itself")
                time.sleep(0.5)
            self.record(env, api_version, resource, name, namespace, meta.get("finalizers"))
        return client.create(api_version, resource, obj, namespace)


def for_env(env, lab_id: str | None = None) -> Target:
    """The target of a running lab (lab code: lab.py, checks, solutions)."""
    options = getattr(env, "options", None) or {}
    if options.get("kubeconfig"):
        return Target(Path(options["kubeconfig"]), options.get("context"))
    info = read_server_info(Path(env.dir) / SERVER_TAG)
    if info is None:
        lab_id = lab_id or getattr(getattr(env, "lab", None), "id", None) or Path(env.dir).name
        raise LabkitError(f"the {lab_id} lab's API server is not running: `labkit run {lab_id}` starts it")
    return Target(info.kubeconfig, None, info.state_dir)


def lab_target(lab_id: str) -> Target:
    """The target of the lab `lab_id` on this machine (for tools run outside lab code)."""
    from labkit.state import LabState

    state = LabState(lab_id)
    if state.phase != "up":
        raise LabkitError(f"the {lab_id} lab is not running: start it with `labkit run {lab_id}`, "
                          "or pass --kubeconfig FILE")

    class _Env:
        dir = state.dir
        options = dict(state.status.get("options") or {})
    return for_env(_Env, lab_id)
