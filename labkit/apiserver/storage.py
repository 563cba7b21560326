"""Object storage: SQLite on disk, an in-memory index for reads, and a revision-ordered event
log for watches — the part etcd plus the watch cache play in a real API server.

Every write is one SQLite transaction (WAL journal; `synchronous=FULL` by default, so an
acknowledged write survives a crash of the process and of the machine) that stores the object and
the new global revision together. The revision is the resourceVersion of the written object and
of its watch event, as etcd's modRevision is; it never goes backwards, also across restarts.

The caller (the registry) holds `store.lock` around read-modify-write sequences, which makes them
atomic like etcd's GuaranteedUpdate. Objects handed out are private copies.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import deque
from pathlib import Path
from typing import Callable

from labkit.apiserver.errors import expired, internal

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
EVENT_LOG_LIMIT = 200_000


def dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class Event:
    """One committed change. `obj` is the object after the change (the last state for DELETED),
    `old` the one before (None for ADDED). Both are shared: never modify them."""

    __slots__ = ("rev", "type", "key", "namespace", "name", "obj", "old")

    def __init__(self, rev, type_, key, namespace, name, obj, old):
        self.rev, self.type, self.key, self.namespace, self.name = rev, type_, key, namespace, name
        self.obj, self.old = obj, old


class Watcher:
    """Events of one resource (optionally one namespace) from a revision on, filtered by `accept`.

    `accept(event) -> (type, obj) | None` decides what the watching client sees (selectors turn
    a MODIFIED that leaves the selection into a DELETED)."""

    def __init__(self, store: "Store", key: str, namespace: str | None, accept):
        self.store = store
        self.key = key
        self.namespace = namespace
        self.accept = accept
        self._queue: deque = deque()
        self._cond = threading.Condition(threading.Lock())
        self.stopped = False
        self.offered = 0        # events queued for the client so far

    def _offer(self, event: Event) -> None:
        if self.namespace and event.namespace != self.namespace:
            return
        delivered = self.accept(event)
        if delivered is None:
            return
        with self._cond:
            self._queue.append((event.rev, delivered[0], delivered[1]))
            self.offered += 1
            self._cond.notify()

    def next(self, timeout: float | None):
        """(rev, type, obj) of the next event, or None after `timeout` seconds / when stopped."""
        with self._cond:
            if not self._queue and not self.stopped:
                self._cond.wait(timeout)
            if self._queue:
                return self._queue.popleft()
            return None

    def pending(self) -> int:
        return len(self._queue)

    def stop(self) -> None:
        self.store._remove_watcher(self)
        with self._cond:
            self.stopped = True
            self._cond.notify_all()


class Store:
    def __init__(self, path: str | Path, synchronous: str = "FULL"):
        self.path = str(path)
        self.lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.execute("CREATE TABLE IF NOT EXISTS objects (key TEXT NOT NULL, namespace TEXT NOT NULL, "
                         "name TEXT NOT NULL, rv INTEGER NOT NULL, data TEXT NOT NULL, "
                         "PRIMARY KEY (key, namespace, name))")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        # key -> {(namespace, name): (object, json text)}
        self._index: dict[str, dict[tuple[str, str], tuple[dict, str]]] = {}
        for key, ns, name, data in self._db.execute("SELECT key, namespace, name, data FROM objects"):
            self._index.setdefault(key, {})[(ns, name)] = (json.loads(data), data)
        row = self._db.execute("SELECT value FROM meta WHERE name = 'revision'").fetchone()
        max_rv = self._db.execute("SELECT MAX(rv) FROM objects").fetchone()[0] or 0
        self.revision = max(int(row[0]) if row else 0, max_rv)
        self._log: list[Event] = []
        self._log_first = self.revision + 1       # revision of _log[0]
        self._watchers: dict[str, list[Watcher]] = {}
        self._listeners: list[Callable[[Event], None]] = []

    def close(self) -> None:
        with self.lock:
            for watchers in list(self._watchers.values()):
                for w in list(watchers):
                    w.stop()
            self._db.close()

    # -- reads ---------------------------------------------------------------------------------
    def get(self, key: str, namespace: str, name: str) -> dict | None:
        entry = self._index.get(key, {}).get((namespace, name))
        return json.loads(entry[1]) if entry else None

    def get_text(self, key: str, namespace: str, name: str) -> str | None:
        entry = self._index.get(key, {}).get((namespace, name))
        return entry[1] if entry else None

    def list(self, key: str, namespace: str | None = None) -> tuple[list[dict], int]:
        with self.lock:
            entries = self._index.get(key, {})
            items = [json.loads(text) for (ns, _), (_, text) in sorted(entries.items())
                     if namespace is None or ns == namespace]
            return items, self.revision

    def count(self, key: str, namespace: str | None = None) -> int:
        entries = self._index.get(key, {})
        if namespace is None:
            return len(entries)
        return sum(1 for ns, _ in list(entries) if ns == namespace)

    def keys(self) -> list[str]:
        return [k for k, v in self._index.items() if v]

    # -- writes (callers hold self.lock) --------------------------------------------------------
    def put(self, key: str, namespace: str, name: str, obj: dict) -> dict:
        """Create or replace an object; assigns the next revision as its resourceVersion."""
        with self.lock:
            old_entry = self._index.get(key, {}).get((namespace, name))
            rev = self.revision + 1
            obj.setdefault("metadata", {})["resourceVersion"] = str(rev)
            text = dumps(obj)
            self._write(rev, "INSERT OR REPLACE INTO objects (key, namespace, name, rv, data) VALUES (?, ?, ?, ?, ?)",
                        (key, namespace, name, rev, text))
            stored = json.loads(text)
            self._index.setdefault(key, {})[(namespace, name)] = (stored, text)
            self._publish(Event(rev, MODIFIED if old_entry else ADDED, key, namespace, name, stored,
                                old_entry[0] if old_entry else None))
            return json.loads(text)

    def delete(self, key: str, namespace: str, name: str) -> dict | None:
        """Remove an object; returns its last state with the deletion's revision."""
        with self.lock:
            entry = self._index.get(key, {}).get((namespace, name))
            if entry is None:
                return None
            rev = self.revision + 1
            self._write(rev, "DELETE FROM objects WHERE key = ? AND namespace = ? AND name = ?", (key, namespace, name))
            del self._index[key][(namespace, name)]
            last = json.loads(entry[1])
            last["metadata"]["resourceVersion"] = str(rev)
            self._publish(Event(rev, DELETED, key, namespace, name, last, entry[0]))
            return json.loads(dumps(last))

    def _write(self, rev: int, statement: str, args: tuple) -> None:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(statement, args)
            self._db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('revision', ?)", (str(rev),))
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise internal(f"storage write failed: {exc}")
        self.revision = rev

    def _publish(self, event: Event) -> None:
        self._log.append(event)
        if len(self._log) > EVENT_LOG_LIMIT:
            drop = len(self._log) // 2
            del self._log[:drop]
            self._log_first += drop
        for watcher in list(self._watchers.get(event.key, ())):
            watcher._offer(event)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:   # a listener must never break a write
                pass

    # -- watches -------------------------------------------------------------------------------
    def watch(self, key: str, namespace: str | None, since: int | None, accept) -> tuple[Watcher, list[dict]]:
        """Start a watch. With `since` (a revision), replay the logged events after it; with None,
        return the current objects (for synthetic ADDED events) and watch from now.

        Returns (watcher, initial objects)."""
        with self.lock:
            watcher = Watcher(self, key, namespace, accept)
            initial: list[dict] = []
            if since is None:
                initial = [json.loads(text) for (ns, _), (_, text) in sorted(self._index.get(key, {}).items())
                           if not namespace or ns == namespace]
            else:
                if since < self._log_first - 1:
                    raise expired(f"too old resource version: {since} ({self._log_first - 1})")
                for event in self._log[max(0, since + 1 - self._log_first):]:
                    if event.key == key:
                        watcher._offer(event)
            self._watchers.setdefault(key, []).append(watcher)
            return watcher, initial

    def _remove_watcher(self, watcher: Watcher) -> None:
        with self.lock:
            watchers = self._watchers.get(watcher.key, [])
            if watcher in watchers:
                watchers.remove(watcher)

    def add_listener(self, listener: Callable[[Event], None]) -> None:
        with self.lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[Event], None]) -> None:
        with self.lock:
            if listener in self._listeners:
                self._listeners.remove(listener)
