"""What each stage of the request pipeline decided about one request, in order: which
authenticator recognised the caller, whether impersonation was allowed, which authorizer rule
allowed or why none did, each admission plugin or webhook and what it changed, validation,
storage, audit. `labkit requests explain` shows these steps; the server keeps the newest ones
(`Traces`) and answers them by audit ID.

A step is labkit's own record, not an upstream format; what the steps say must be true of the
upstream stage they stand for (each stage's module cites its source).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, field

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

    def add(self, stage: str, name: str, outcome: str, detail: str = "", **data) -> None:
        if stage not in STAGES:
            raise ValueError(f"unknown pipeline stage {stage!r}")
        self.steps.append(Step(stage, name, outcome, detail, data))

    def to_dict(self) -> dict:
        return {"auditID": self.audit_id, "steps": [asdict(s) for s in self.steps],
                "annotations": dict(self.annotations)}


class Traces:
    """The newest `limit` traces by audit ID."""

    def __init__(self, limit: int = 1000):
        self.limit = limit
        self._items: OrderedDict[str, dict] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, trace: Trace) -> None:
        if not trace.audit_id:
            return
        with self._lock:
            self._items[trace.audit_id] = trace.to_dict()
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def get(self, audit_id: str) -> dict | None:
        with self._lock:
            return self._items.get(audit_id)

    def newest(self, count: int) -> list[dict]:
        with self._lock:
            return list(self._items.values())[-count:]
