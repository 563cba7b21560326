"""An informer: list, then watch from the list's resourceVersion, keeping a local cache and
calling add/update/delete handlers — client-go's reflector + DeltaFIFO + indexer in one loop.

A relist (after a 410 Gone) calls `on_update` for objects it still sees and `on_delete` for those
that went away while the watch was down, as DeltaFIFO.Replace does. With a resync period, every
cached object is handed to `on_update(obj, obj)` once per period (the informer's Sync deltas).
"""

from __future__ import annotations

import threading
from typing import Callable

from labkit.apiserver.client import ApiResource, Client
from labkit.apiserver.errors import ApiError

IDLE_WAIT = 10.0        # seconds an informer waits for its watch's next event before looking again


def object_key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta.get("name", "")


class Informer:
    def __init__(self, client: Client, resource: ApiResource, on_add: Callable[[dict], None] | None = None,
                 on_update: Callable[[dict, dict], None] | None = None,
                 on_delete: Callable[[dict], None] | None = None, namespace: str | None = None,
                 resync_period: float | None = None):
        self.client = client
        self.resync_period = resync_period
        self.resource = resource
        self.namespace = namespace
        self.on_add, self.on_update, self.on_delete = on_add, on_update, on_delete
        self._cache: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._watch = None
        self._thread: threading.Thread | None = None
        self.last_resource_version = ""
        self.error: str | None = None
        self._listing = True
        self._handled = 0       # change events of the current watch fully handled

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"informer-{self.resource.resource}")
        self._thread.start()
        if self.resync_period:
            threading.Thread(target=self._resync_loop, daemon=True,
                             name=f"informer-resync-{self.resource.resource}").start()

    def _resync_loop(self) -> None:
        while not self._stop.wait(self.resync_period):
            if self.on_update and self._synced.is_set():
                for obj in self.list():
                    self.on_update(obj, obj)

    def stop(self) -> None:
        self._stop.set()
        watch = self._watch
        if watch is not None:
            watch.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    def idle(self) -> bool:
        """Synced, and every change the server has sent so far has been handled (exact for
        in-process watches; other transports count as idle once synced)."""
        if not self._synced.is_set() or self._listing:
            return False
        watch = self._watch
        if watch is None:
            return False
        offered = watch.changes_offered()
        return offered is None or offered == self._handled

    # -- cache -----------------------------------------------------------------------------------
    def get(self, key: str) -> dict | None:
        with self._lock:
            return self._cache.get(key)

    def list(self, namespace: str | None = None) -> list[dict]:
        with self._lock:
            items = list(self._cache.values())
        if namespace is None:
            return items
        return [o for o in items if (o.get("metadata") or {}).get("namespace") == namespace]

    # -- the loop --------------------------------------------------------------------------------
    def _run(self) -> None:
        r = self.resource
        backoff = 0.05
        while not self._stop.is_set():
            try:
                self._listing = True
                items, rv = self.client.list(r.api_version, r.resource, self.namespace)
                for item in items:      # typed lists carry no apiVersion/kind in their items
                    item.setdefault("apiVersion", r.api_version)
                    item.setdefault("kind", r.kind)
                self._replace(items)
                self.last_resource_version = rv
                self._synced.set()
                self.error = None
                backoff = 0.05
                while not self._stop.is_set():
                    if not self._watch_once():
                        break       # relist
            except (ApiError, OSError) as exc:
                self.error = str(exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _watch_once(self) -> bool:
        """Watch from the last resourceVersion until the watch ends. False: relist needed."""
        r = self.resource
        try:
            watch = self.client.watch(r.api_version, r.resource, self.namespace,
                                      resource_version=self.last_resource_version, timeout_seconds=600)
        except ApiError as exc:
            if exc.code == 410:
                return False
            raise
        self._handled = 0
        self._watch = watch
        self._listing = False
        try:
            # stop() sets _stop, then stops the watch it finds: the watch is either found there or
            # _stop is seen here, so next() needs no short timeout to notice a stop (each wake-up
            # of each informer of an idle lab cost CPU for nothing)
            while not self._stop.is_set():
                event = watch.next(IDLE_WAIT)
                if event is None:
                    if watch.ended:
                        return True
                    continue
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return False
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    self.last_resource_version = rv
                if kind == "BOOKMARK":
                    continue
                self._apply(kind, obj)
                self._handled += 1
            return True
        finally:
            self._listing = True
            self._watch = None
            watch.stop()

    def _apply(self, kind: str, obj: dict) -> None:
        key = object_key(obj)
        with self._lock:
            old = self._cache.get(key)
            if kind == "DELETED":
                self._cache.pop(key, None)
            else:
                self._cache[key] = obj
        if kind == "DELETED":
            if self.on_delete:
                self.on_delete(obj)
        elif old is None:
            if self.on_add:
                self.on_add(obj)
        elif self.on_update:
            self.on_update(old, obj)

    def _replace(self, items: list[dict]) -> None:
        new = {object_key(o): o for o in items}
        with self._lock:
            old = self._cache
            self._cache = dict(new)
        for key, obj in old.items():
            if key not in new and self.on_delete:
                self.on_delete(obj)
        for key, obj in new.items():
            if key in old:
                if self.on_update:
                    self.on_update(old[key], obj)
            elif self.on_add:
                self.on_add(obj)

