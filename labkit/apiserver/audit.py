"""The audit log: one JSON line per request, in the shape of kube-apiserver's audit.k8s.io/v1
Event (level Request for writes, so DeleteOptions and patches are recorded), appended as each
request completes (watches when their stream starts), so checks can see *how* something was done:
which user sent which verb on which object with which propagationPolicy, and the answer's code.
"""

from __future__ import annotations

import calendar
import json
import os
import threading
import time
import uuid
from pathlib import Path


def _timestamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1_000_000):06d}Z"


def received_at(event: dict) -> float:
    """When the request of an audit event came (its requestReceivedTimestamp), in seconds since the epoch."""
    stamp = event.get("requestReceivedTimestamp") or "1970-01-01T00:00:00Z"
    main, _, frac = stamp.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(main, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)


class AuditLog:
    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self._fd = None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def record(self, *, audit_id: str = "", user: str, groups: list[str], verb: str, uri: str, source: str, user_agent: str,
               object_ref: dict | None, code: int, received: float, request_object=None,
               stage: str = "ResponseComplete", annotations: dict | None = None) -> None:
        if self._fd is None:
            return
        event = {"kind": "Event", "apiVersion": "audit.k8s.io/v1",
                 "level": "Request" if request_object is not None else "Metadata",
                 "auditID": audit_id or str(uuid.uuid4()), "stage": stage, "requestURI": uri, "verb": verb,
                 "user": {"username": user, "groups": groups}, "sourceIPs": [source], "userAgent": user_agent}
        if object_ref:
            event["objectRef"] = object_ref
        event["responseStatus"] = {"metadata": {}, "code": code}
        if request_object is not None:
            event["requestObject"] = request_object
        event["requestReceivedTimestamp"] = _timestamp(received)
        if annotations:
            event["annotations"] = dict(annotations)
        event["stageTimestamp"] = _timestamp(time.time())
        line = (json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        with self._lock:
            os.write(self._fd, line)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def read(path: str | Path) -> list[dict]:
    """All events of an audit log (a line cut short by a crash is skipped)."""
    events = []
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return events
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events
