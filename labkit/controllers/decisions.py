"""The controllers' decision log: every decision with its reason, as JSON lines (a file that
`labkit gc log` follows) and in memory (the scenario runner reports it).

Each record: {"ts", "controller", "level" (info: something was done or refused; debug: a no-op),
"action", "item" (apiVersion, kind, namespace, name, uid), "message"} plus action-specific fields
(policy, owners, dependents, ...). `message` is the line a student reads, e.g.
`pod gc-e2e/web-1: owner ReplicaSet web-abc is waiting for dependents' deletion → delete with Background`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from pathlib import Path


def describe(ref) -> str:
    """`pod ns/name` for an object reference (anything with kind, namespace, name)."""
    kind = getattr(ref, "kind", None) or ref.get("kind", "")
    namespace = getattr(ref, "namespace", None) if not isinstance(ref, dict) else ref.get("namespace")
    name = getattr(ref, "name", None) if not isinstance(ref, dict) else ref.get("name")
    return f"{kind.lower()} {namespace + '/' if namespace else ''}{name}"


class DecisionLog:
    def __init__(self, path: str | Path | None = None, keep: int = 20000):
        self.path = Path(path) if path else None
        self._recent: deque = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._fd = None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def record(self, controller: str, action: str, item, message: str, level: str = "info", **fields) -> dict:
        entry = {"ts": round(time.time(), 6), "controller": controller, "level": level, "action": action}
        if item is not None:
            entry["item"] = item if isinstance(item, dict) else item.as_dict()
        entry["message"] = message
        entry.update({k: v for k, v in fields.items() if v is not None})
        line = (json.dumps(entry, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        with self._lock:
            self._recent.append(entry)
            if self._fd is not None:
                os.write(self._fd, line)
        return entry

    def recent(self, level: str | None = None) -> list[dict]:
        with self._lock:
            entries = list(self._recent)
        return [e for e in entries if level is None or e["level"] == level]

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def read(path: str | Path) -> list[dict]:
    entries = []
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return entries
    for line in text.splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def format_entry(entry: dict) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(entry.get("ts", 0)))
    millis = int((entry.get("ts", 0) % 1) * 1000)
    return f"{stamp}.{millis:03d} {entry.get('controller', '')}: {entry.get('message', '')}"
