"""The answer of a request: the Response every stage of the pipeline may return, and the
event streams of watches (a watch is answered with a stream that the HTTP front end writes
chunk by chunk and LocalClient reads in-process).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from labkit.apiserver.storage import BOOKMARK

BOOKMARK_INTERVAL = 5.0


@dataclass
class Response:
    code: int
    body: Any = None                  # dict/list (JSON) or bytes
    content_type: str = "application/json"
    stream: "WatchStream | None" = None
    warnings: list[str] = field(default_factory=list)     # sent as `Warning: 299 - "..."` headers


class WatchStream:
    """The events of one watch request, as dicts ready to be encoded (None = nothing new yet)."""

    def __init__(self, watcher, initial: list[dict], transform: Callable[[dict], dict], timeout: float,
                 bookmarks: bool, initial_events_end: bool, bookmark_object: Callable[[int], dict], store):
        self.watcher = watcher
        self.initial = initial
        self.transform = transform
        self.deadline = time.monotonic() + timeout
        self.bookmarks = bookmarks
        self.initial_events_end = initial_events_end
        self.bookmark_object = bookmark_object
        self.store = store
        self.closed = False
        self.on_close: Callable[[], None] | None = None     # the audit's ResponseComplete

        self._pending = [{"type": "ADDED", "object": obj} for obj in initial]
        if initial_events_end:
            mark = bookmark_object(store.revision)
            mark["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
            self._pending.append({"type": BOOKMARK, "object": mark, "ready": True})
        self._last_bookmark = time.monotonic()

    @property
    def expired(self) -> bool:
        return self.closed or time.monotonic() >= self.deadline

    def next(self, timeout: float) -> dict | None:
        """The next event, or None when nothing happened within `timeout` (or the watch ended)."""
        if self._pending:
            event = self._pending.pop(0)
            if not event.pop("ready", False):
                event["object"] = self.transform(event["object"])
            return event
        if self.expired:
            return None
        item = self.watcher.next(max(0.0, min(timeout, self.deadline - time.monotonic())))
        if item is not None:
            _, type_, obj = item
            return {"type": type_, "object": self.transform(obj)}
        if self.bookmarks and not self.watcher.stopped and time.monotonic() - self._last_bookmark >= BOOKMARK_INTERVAL:
            with self.store.lock:
                rev = self.store.revision if not self.watcher.pending() else None
            if rev is not None:
                self._last_bookmark = time.monotonic()
                return {"type": BOOKMARK, "object": self.bookmark_object(rev)}
        return None

    def events(self, poll: float = 1.0) -> Iterator[dict | None]:
        """Events until the watch times out or is closed; None now and then while idle."""
        try:
            while not self.expired and not self.watcher.stopped:
                yield self.next(poll)
            while self._pending:
                yield self.next(0)
        finally:
            self.close()

    def close(self) -> None:
        self.closed = True
        self.watcher.stop()
        self._closed()

    def _closed(self) -> None:
        callback, self.on_close = self.on_close, None
        if callback is not None:
            callback()


class _Stopped:
    """The watcher of a stream that watches nothing."""
    stopped = True
    offered = 0

    def stop(self) -> None:
        pass


class ErrorStream(WatchStream):
    """A watch that ends after one event (the ERROR event of a watch that cannot start)."""

    def __init__(self, event: dict):
        self.watcher = _Stopped()
        self.closed = False
        self.deadline = 0.0
        self._pending = [dict(event, ready=True)]
        self.on_close = None

    def close(self) -> None:
        self.closed = True
        self._closed()
