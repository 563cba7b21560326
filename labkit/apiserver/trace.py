"""What each stage of the request pipeline decided about one request, in order: which
authenticator recognised the caller, whether impersonation was allowed, which authorizer rule
allowed or why none did, each admission plugin or webhook and what it changed, validation,
storage, audit. `labkit requests explain` shows these steps; the server keeps them (`Traces`: the
newest in memory, all of them in traces.log beside the audit log) and answers them by audit ID.

A step is labkit's own record, not an upstream format; what the steps say must be true of the
upstream stage they stand for (each stage's module cites its source).
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from dataclasses import dataclass, field

# the stages in the order kube-apiserver's handler chain and registry run them
STAGES = ("authentication", "impersonation", "authorization", "mutating-admission", "validation",
          "validating-admission", "storage", "audit")


@dataclass
class Step:
    stage: str            # one of STAGES
    name: str             # which part decided: an authenticator, an authorizer, a plugin, a webhook
    outcome: str          # e.g. "authenticated", "allowed", "denied", "no opinion", "patched", "rejected", "error"
    detail: str = ""      # one sentence a student can read
    data: dict = field(default_factory=dict)   # what the stage saw or produced (e.g. a JSON patch)


@dataclass
class Trace:
    audit_id: str = ""
    steps: list[Step] = field(default_factory=list)
    # the audit annotations stages add to the request's audit event, as upstream's do
    # (e.g. authorization.k8s.io/decision, mutation.webhook.admission.k8s.io/round_0_index_0)
    annotations: dict[str, str] = field(default_factory=dict)
    # the audit level an annotation needs to be logged at (AddAnnotationWithLevel; others: any level)
    annotation_levels: dict[str, str] = field(default_factory=dict)

    def add(self, stage: str, name: str, outcome: str, detail: str = "", **data) -> None:
        if stage not in STAGES:
            raise ValueError(f"unknown pipeline stage {stage!r}")
        self.steps.append(Step(stage, name, outcome, detail, data))

    def to_dict(self) -> dict:
        """The trace as the server answers it. The steps' data are shared, not copied: `Traces`
        keeps the trace as JSON text, written once the request is answered."""
        return {"auditID": self.audit_id,
                "steps": [{"stage": s.stage, "name": s.name, "outcome": s.outcome, "detail": s.detail,
                           "data": s.data} for s in self.steps],
                "annotations": dict(self.annotations)}


TRACES_FILE = "traces.log"      # beside audit.log in the server's state directory


class Traces:
    """The traces of the server's requests by audit ID: the newest `limit` in memory, and, with a
    `path`, every one also appended to that file as a JSON line, so that `labkit requests explain
    AUDIT_ID` finds the trace of every request in the audit log (the server writes both for each
    request it answers, from its first start in a state directory on), however many came since.
    Memory stays bounded by `limit`; the file grows with the audit log (see `get`). A trace is
    kept as its JSON line: encoded once, for the file and for memory, and decoded only when read
    (nearly every trace is written and never read)."""

    def __init__(self, limit: int = 1000, path: str | os.PathLike | None = None):
        self.limit = limit
        self.path = Path(path) if path else None
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._fd = None
        if self.path is not None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def keep(self, trace: Trace) -> None:
        if not trace.audit_id:
            return
        line = (json.dumps(trace.to_dict(), separators=(",", ":"), ensure_ascii=False, default=str)
                + "\n").encode()
        with self._lock:
            self._items[trace.audit_id] = line
            while len(self._items) > self.limit:
                self._items.popitem(last=False)
            if self._fd is not None:
                os.write(self._fd, line)

    def get(self, audit_id: str) -> dict | None:
        """The trace of one request: from memory, else the newest line of the file with its ID
        (a read of the whole file, as `labkit requests explain` reads the whole audit log)."""
        with self._lock:
            kept = self._items.get(audit_id)
        if kept is not None:
            return json.loads(kept)
        if self.path is None or not audit_id:
            return None
        found = None
        needle = f'"auditID":{json.dumps(audit_id)}'.encode()
        try:
            with open(self.path, "rb") as f:
                for line in f:
                    if needle in line:
                        try:
                            found = json.loads(line)
                        except ValueError:      # a line cut short by a crash
                            continue
        except FileNotFoundError:
            return None
        return found

    def newest(self, count: int) -> list[dict]:
        with self._lock:
            kept = list(self._items.values())[-count:]
        return [json.loads(line) for line in kept]

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
