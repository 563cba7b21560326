"""An event recorder like client-go's tools/record: core/v1 Events named `<object>.<hex nanos>`
in the object's namespace (`default` for cluster-scoped objects), with `source.component` and
`reportingComponent` set; a repeat of the same event is counted (count, lastTimestamp) instead of
creating a new one, as the EventCorrelator does. Events are written from a background thread so
a controller never waits for them."""

from __future__ import annotations

import queue
import threading
import time

from labkit.apiserver.client import Client
from labkit.apiserver.errors import ApiError


def involved(obj: dict) -> dict:
    """The object reference an Event is about (ref.GetReference)."""
    meta = obj.get("metadata") or {}
    return {"kind": obj.get("kind", ""), "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
            "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", ""),
            "resourceVersion": meta.get("resourceVersion", "")}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class EventRecorder:
    def __init__(self, client: Client, component: str, host: str = ""):
        self.client = client
        self.component = component
        self.host = host
        self._queue: queue.Queue = queue.Queue()
        self._seen: dict[tuple, tuple[str, str, int]] = {}
        self._pending = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"events-{component}")
        self._thread.start()

    def event(self, involved: dict, type_: str, reason: str, message: str) -> None:
        """`involved`: {kind, apiVersion, namespace, name, uid} of the object the event is about."""
        with self._lock:
            self._pending += 1
        self._queue.put((dict(involved), type_, reason, message))

    def idle(self) -> bool:
        """Every event recorded so far has been written (or given up)."""
        with self._lock:
            return self._pending == 0

    def flush(self, timeout: float = 5.0) -> None:
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def stop(self) -> None:
        self._queue.put(None)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                self._write(*item)
            except (ApiError, OSError):
                pass    # like client-go: events are best effort
            finally:
                with self._lock:
                    self._pending -= 1

    def _write(self, involved: dict, type_: str, reason: str, message: str) -> None:
        namespace = involved.get("namespace") or "default"
        key = (involved.get("uid"), involved.get("kind"), reason, message, type_)
        now = _now()
        seen = self._seen.get(key)
        if seen is not None:
            ns, name, count = seen
            try:
                self.client.patch("v1", "events", name, {"count": count + 1, "lastTimestamp": now},
                                  "merge", namespace=ns)
                self._seen[key] = (ns, name, count + 1)
                return
            except ApiError:
                pass
        name = f"{involved.get('name', '')}.{time.time_ns():x}"
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": self.component, **({"host": self.host} if self.host else {})},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            "reportingComponent": self.component, "reportingInstance": self.host,
        }
        self.client.create("v1", "events", event, namespace=namespace)
        self._seen[key] = (namespace, name, 1)
