"""The audit log: kube-apiserver's audit.k8s.io/v1 Events, one JSON line each, at the level and
stages the audit policy (auditpolicy.py) chooses for the request, so checks can see *how*
something was done: which user sent which verb on which object with which propagationPolicy,
and the answer's code.
"""

from __future__ import annotations

import calendar
import json
import os
import threading
import time
import uuid
from pathlib import Path

from labkit.apiserver.auditpolicy import LEVELS, RequestAuditConfig


def _timestamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1_000_000):06d}Z"


def received_at(event: dict) -> float:
    """When the request of an audit event came (its requestReceivedTimestamp), in seconds since the epoch."""
    return _seconds(event.get("requestReceivedTimestamp") or "1970-01-01T00:00:00Z")


def _seconds(stamp: str) -> float:
    main, _, frac = stamp.rstrip("Z").partition(".")
    if len(main) == 19 and main[4] == main[7] == "-" and main[10] == "T" and main[13] == main[16] == ":":
        # the fixed layout _timestamp writes, read without time.strptime (checks read every event
        # of a lab's log; strptime was most of that): the same seconds as the general case below
        whole = calendar.timegm((int(main[0:4]), int(main[5:7]), int(main[8:10]), int(main[11:13]),
                                 int(main[14:16]), int(main[17:19]), 0, 0, 0))
    else:
        whole = calendar.timegm(time.strptime(main, "%Y-%m-%dT%H:%M:%S"))
    return whole + (float("0." + frac) if frac else 0.0)


class AuditLog:
    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self._fd = None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(self, event: dict) -> None:
        if self._fd is None:
            return
        line = (json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        with self._lock:
            if self._fd is not None:
                os.write(self._fd, line)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _without_managed_fields(obj):
    """audit/request.go `copyWithoutManagedFields`: the object (or each list item) without
    metadata.managedFields."""
    if not isinstance(obj, dict):
        return obj
    result = dict(obj)
    if isinstance(result.get("metadata"), dict) and "managedFields" in result["metadata"]:
        result["metadata"] = {k: v for k, v in result["metadata"].items() if k != "managedFields"}
    if isinstance(result.get("items"), list):
        result["items"] = [_without_managed_fields(i) for i in result["items"]]
    return result


class RequestAudit:
    """The audit events of one request, at the level and without the stages its policy rule
    chose (filters/audit.go `WithAudit`, audit/request.go `LogRequestObject`,
    `LogResponseObject`): Metadata events carry who, what and the answer's status; Request
    adds requestObject; RequestResponse adds responseObject."""

    def __init__(self, log: AuditLog, config: RequestAuditConfig, *, audit_id: str, uri: str, verb: str,
                 user: dict | None, source: str, user_agent: str, object_ref: dict | None, received: float,
                 impersonated: dict | None = None):
        self.log = log
        self.config = config
        self.event = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": config.level,
                      "auditID": audit_id or str(uuid.uuid4()), "stage": "", "requestURI": uri, "verb": verb,
                      "user": user or {}}
        if impersonated:
            self.event["impersonatedUser"] = impersonated
        self.event.update({"sourceIPs": [source], "userAgent": user_agent})
        if object_ref:
            self.event["objectRef"] = object_ref
        self.received = received

    def complete_object_ref(self, obj) -> None:
        """audit/request.go `LogRequestObject`: the decoded object of a create or update fills in
        what the URL did not say (a create's name), at every level."""
        ref = self.event.get("objectRef")
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if ref is None or not isinstance(meta, dict):
            return
        for key in ("namespace", "name", "uid", "resourceVersion"):
            if not ref.get(key) and isinstance(meta.get(key), str) and meta[key]:
                ref[key] = meta[key]

    @property
    def enabled(self) -> bool:
        return self.config.level != "None"

    def at_least(self, level: str) -> bool:
        return LEVELS.index(self.config.level) >= LEVELS.index(level)

    def emit(self, stage: str, *, code: int | None = None, status: dict | None = None, request_object=None,
             response_object=None, annotations: dict | None = None, levels: dict | None = None) -> None:
        """One event of `stage`; `levels`: the level each annotation so marked needs (the others
        are logged at every level)."""
        if not self.enabled or stage in self.config.omit_stages:
            return
        event = dict(self.event, stage=stage)
        if code is not None:
            response_status = {"metadata": {}}
            if isinstance(status, dict) and status.get("kind") == "Status":
                response_status.update({k: status[k] for k in ("status", "message", "reason", "details")
                                        if status.get(k)})
            response_status["code"] = code
            event["responseStatus"] = response_status
        if request_object is not None and self.at_least("Request"):
            event["requestObject"] = _without_managed_fields(request_object) if self.config.omit_managed_fields \
                else request_object
        if response_object is not None and self.at_least("RequestResponse"):
            event["responseObject"] = _without_managed_fields(response_object) \
                if self.config.omit_managed_fields else response_object
        event["requestReceivedTimestamp"] = _timestamp(self.received)
        event["stageTimestamp"] = _timestamp(time.time())
        annotations = {k: v for k, v in (annotations or {}).items() if self.at_least((levels or {}).get(k, "Metadata"))}
        if annotations:
            event["annotations"] = annotations
        self.log.write(event)


class _View:
    """What this process has read of one audit log for one set of left-out users and one sieve
    (read_since): the events of requests received at `since` or later, parsed, in the file's
    order, and the byte offset read up to (the file is only ever appended to while it is the same
    file)."""

    def __init__(self, identity: tuple[int, int], since: float):
        self.identity = identity
        self.since = since
        self.offset = 0
        self.events: list[tuple[float, dict]] = []


_VIEWS: dict[tuple[str, frozenset, str], _View] = {}
_VIEWS_LOCK = threading.Lock()
_RECEIVED_KEY = '"requestReceivedTimestamp":"'
_USER_KEY = '"user":{"username":"'


def _line_received_at(line: str) -> float:
    """received_at of a line's event. In the lines AuditLog.write writes, the event's own
    requestReceivedTimestamp is the last key of that name (only the annotations, strings, follow
    it), so it is read without parsing the line; any other line is parsed. ValueError: not an
    event (a line cut short by a crash)."""
    at = line.rfind(_RECEIVED_KEY)
    if at >= 0:
        start = at + len(_RECEIVED_KEY)
        end = line.find('"', start)
        if end > start:
            try:
                return _seconds(line[start:end])
            except (ValueError, OverflowError):
                pass
    return received_at(json.loads(line))


def _line_username(line: str) -> str | None:
    """The username of a line AuditLog.write wrote, without parsing it: the event's own "user" is
    its first key of that name (only strings come before it: kind, apiVersion, level, auditID,
    stage, requestURI, verb). None when the line does not show it plainly."""
    at = line.find('"user":{')
    if at < 0 or not line.startswith(_USER_KEY, at):
        return None
    start = at + len(_USER_KEY)
    end = line.find('"', start)
    return line[start:end] if end > start and "\\" not in line[start:end] else None


def read_since(path: str | Path, since: float, exclude_users=(), containing: str = "") -> list[dict]:
    """The events of an audit log whose request came at `since` or later, oldest line first, but
    those of `exclude_users`: what `[e for e in read(path) if received_at(e) >= since and
    e["user"].get("username") not in exclude_users]` gives, reading again only what was appended
    since the last call, and each line parsed once per process for the earliest `since` asked.
    With `containing`, only the lines that hold that text (a caller's cheap first sieve, e.g.
    '"subresource":"status"': an event it wants must hold it; it still judges the events it gets).

    A lab's log grows while nobody works: the namespace lab's, by ~20 events a second of its
    namespace controller's requests (each stuck namespace swept again every 8 s, as upstream's
    controller does). One `labkit check namespace` reads it 20 times; parsing the lines afresh each
    time took 16 s of CPU after half an hour. A line before `since` or of a left-out user is
    never parsed or kept. The events are shared by the calls: callers read them, never change them."""
    excluded = frozenset(exclude_users)
    key = (str(path), excluded, containing)
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            identity = (st.st_dev, st.st_ino)
            with _VIEWS_LOCK:
                view = _VIEWS.get(key)
                if view is None or view.identity != identity or st.st_size < view.offset or since < view.since:
                    view = _VIEWS[key] = _View(identity, since)     # new, replaced, or asked earlier: from the start
                f.seek(view.offset)
                for raw in f:           # a line at a time: a log of hours is hundreds of megabytes
                    if not raw.endswith(b"\n"):
                        break           # a line still being written waits
                    view.offset += len(raw)
                    line = raw.decode(errors="replace").rstrip("\r\n")
                    try:
                        at = _line_received_at(line)
                        if at < view.since or (containing and containing not in line) \
                                or (excluded and _line_username(line) in excluded):
                            continue
                        event = json.loads(line)
                    except (ValueError, AttributeError):
                        continue        # a line cut short by a crash, as read() skips it
                    view.events.append((at, event))
                return [event for at, event in view.events if at >= since]
    except FileNotFoundError:
        return []


def read(path: str | Path) -> list[dict]:
    """All events of an audit log (a line cut short by a crash is skipped)."""
    events = []
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return events
    for line in text.split("\n"):        # JSON lines: a string may hold U+2028, which splitlines() splits at
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events
