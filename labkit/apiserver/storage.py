"""Object storage: SQLite on disk, an in-memory index for reads, and a revision-ordered event
log for watches — the part etcd plus the watch cache play in a real API server.

Writes: under `store.lock` (which the registry holds around read-modify-write sequences, making
them atomic like etcd's GuaranteedUpdate) a write takes the next global revision — the written
object's resourceVersion, as etcd's modRevision — updates the index and queues the row. A
committer thread writes queued rows in one SQLite transaction (WAL journal, `synchronous=FULL`:
durable across process and machine crashes), then publishes their watch events, in revision order.
Requests are answered only once their writes are durable (`wait_durable`, called by the request
handler), so no acknowledged write is ever lost; concurrent writers share one fsync (group commit).
The revision never goes backwards, also across restarts.

Objects handed out are private copies.
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
EVENT_LOG_LIMIT = 20_000        # watchers further behind get 410 Gone and relist, as from the watch cache


class Compacted(Exception):
    """A read at a revision older than the history kept (etcd's ErrCompacted)."""


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
    """Events of one resource (optionally one namespace) after revision `since`, filtered by
    `accept(event) -> (type, obj) | None`, which decides what the watching client sees
    (selectors turn a MODIFIED that leaves the selection into a DELETED)."""

    def __init__(self, store: "Store", key: str, namespace: str | None, accept, since: int):
        self.store = store
        self.key = key
        self.namespace = namespace
        self.accept = accept
        self.since = since
        self._queue: deque = deque()
        self._cond = threading.Condition(threading.Lock())
        self.stopped = False
        self.offered = 0        # events queued for the client so far

    def _offer(self, event: Event) -> None:
        if event.rev <= self.since or (self.namespace and event.namespace != self.namespace):
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
        # every write in revision order as it happens (the log above only gets them once durable):
        # what reads at an older revision undo (etcd's MVCC history, compacted at the same length)
        self._history: list[Event] = []
        self._history_first = self.revision + 1
        self._watchers: dict[str, list[Watcher]] = {}
        self._listeners: list[Callable[[Event], None]] = []
        # group commit: rows queued by writers, written by the committer thread
        self._pending: list[tuple[Event, str, tuple]] = []
        self._durable = self.revision
        self._failure: str | None = None
        self._closing = False
        self._commit_cond = threading.Condition(threading.Lock())
        self._thread_revision = threading.local()
        self._committer = threading.Thread(target=self._commit_loop, daemon=True, name="storage-commit")
        self._committer.start()

    def close(self) -> None:
        with self._commit_cond:
            self._closing = True
            self._commit_cond.notify_all()
        self._committer.join()
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
        entries, rev = self.scan(key, namespace)
        return [json.loads(text) for _, _, text in entries], rev

    def scan(self, key: str, namespace: str | None = None, after: tuple[str, str] | None = None,
             at: int | None = None) -> tuple[list[tuple[tuple[str, str], dict, str]], int]:
        """((namespace, name), shared object, JSON text) in key order, after `after`, and the
        revision they are current at: now, or the revision `at` (raises Compacted when that is
        older than the history kept). The shared objects must not be modified."""
        with self.lock:
            state = self._index.get(key, {})
            rev = self.revision
            if at is not None and at < rev:
                if at < self._history_first - 1:
                    raise Compacted(at)
                state = dict(state)
                for event in reversed(self._history[at + 1 - self._history_first:]):
                    if event.key != key:
                        continue
                    if event.type == ADDED:
                        state.pop((event.namespace, event.name), None)
                    else:       # the object as it was before a change or a deletion
                        state[(event.namespace, event.name)] = (event.old, None)
                rev = at
            entries = [(k, obj, text) for k, (obj, text) in state.items()
                       if (namespace is None or k[0] == namespace) and (after is None or k > after)]
        entries = [(k, obj, text if text is not None else dumps(obj)) for k, obj, text in entries]
        entries.sort(key=lambda e: e[0])
        return entries, rev

    @property
    def oldest_revision(self) -> int:
        """The oldest revision reads can still be made at."""
        return self._history_first - 1

    # -- writes ------------------------------------------------------------------------------------
    def put(self, key: str, namespace: str, name: str, obj: dict) -> dict:
        """Create or replace an object; assigns the next revision as its resourceVersion."""
        with self.lock:
            self._check_writable()
            old_entry = self._index.get(key, {}).get((namespace, name))
            rev = self.revision + 1
            obj.setdefault("metadata", {})["resourceVersion"] = str(rev)
            text = dumps(obj)
            stored = json.loads(text)
            self._index.setdefault(key, {})[(namespace, name)] = (stored, text)
            self._queue(Event(rev, MODIFIED if old_entry else ADDED, key, namespace, name, stored,
                              old_entry[0] if old_entry else None),
                        "INSERT OR REPLACE INTO objects (key, namespace, name, rv, data) VALUES (?, ?, ?, ?, ?)",
                        (key, namespace, name, rev, text))
            return json.loads(text)

    def delete(self, key: str, namespace: str, name: str) -> dict | None:
        """Remove an object; returns its last state with the deletion's revision."""
        with self.lock:
            self._check_writable()
            entry = self._index.get(key, {}).get((namespace, name))
            if entry is None:
                return None
            rev = self.revision + 1
            del self._index[key][(namespace, name)]
            last = json.loads(entry[1])
            last["metadata"]["resourceVersion"] = str(rev)
            self._queue(Event(rev, DELETED, key, namespace, name, last, entry[0]),
                        "DELETE FROM objects WHERE key = ? AND namespace = ? AND name = ?", (key, namespace, name))
            return json.loads(dumps(last))

    def _check_writable(self) -> None:
        if self._failure is not None:
            raise internal(f"storage is unavailable: {self._failure}")
        if self._closing:
            raise internal("storage is closed")

    def _queue(self, event: Event, statement: str, args: tuple) -> None:
        self.revision = event.rev
        self._thread_revision.value = event.rev
        self._history.append(event)
        if len(self._history) > EVENT_LOG_LIMIT:
            drop = len(self._history) // 2
            del self._history[:drop]
            self._history_first += drop
        with self._commit_cond:
            self._pending.append((event, statement, args))
            self._commit_cond.notify_all()

    def wait_durable(self) -> None:
        """Return once everything this thread wrote is on disk (raise if it cannot be)."""
        rev = getattr(self._thread_revision, "value", 0)
        if rev <= self._durable:
            return
        with self._commit_cond:
            while self._durable < rev and self._failure is None:
                self._commit_cond.wait()
        if self._failure is not None:
            raise internal(f"storage write failed: {self._failure}")

    def _commit_loop(self) -> None:
        while True:
            with self._commit_cond:
                while not self._pending and not self._closing:
                    self._commit_cond.wait()
                if not self._pending:
                    return
                batch, self._pending = self._pending, []
            try:
                self._db.execute("BEGIN IMMEDIATE")
                for _, statement, args in batch:
                    self._db.execute(statement, args)
                self._db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('revision', ?)",
                                 (str(batch[-1][0].rev),))
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                with self._commit_cond:         # memory is now ahead of the disk: stop writing
                    self._failure = str(exc)
                    self._commit_cond.notify_all()
                return
            with self.lock:
                for event, _, _ in batch:
                    self._publish(event)
            with self._commit_cond:
                self._durable = batch[-1][0].rev
                self._commit_cond.notify_all()

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
            initial: list[dict] = []
            if since is None:
                watcher = Watcher(self, key, namespace, accept, self.revision)
                initial = [json.loads(text) for (ns, _), (_, text) in sorted(self._index.get(key, {}).items())
                           if not namespace or ns == namespace]
            else:
                if since < self._log_first - 1:
                    raise expired(f"too old resource version: {since} ({self._log_first - 1})")
                watcher = Watcher(self, key, namespace, accept, since)
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
