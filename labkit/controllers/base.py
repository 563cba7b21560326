"""What the workload controllers share: a keyed sync loop over informers and a rate-limited
queue, client-go's ControllerExpectations, and the ControllerRefManager's adoption / release of
objects by label selector (pkg/controller/controller_ref_manager.go, controller_utils.go)."""

from __future__ import annotations

import threading
import time

from labkit.apiserver.client import ApiResource, Client
from labkit.apiserver.errors import ApiError
from labkit.apiserver.selectors import LabelSelector
from labkit.controllers.decisions import DecisionLog, describe
from labkit.controllers.events import EventRecorder, involved
from labkit.controllers.informer import Informer, object_key
from labkit.controllers.workqueue import RateLimitingQueue

EXPECTATIONS_TTL = 300.0


def bind(client, pod: dict, node_name: str) -> bool:
    """POST pods/<name>/binding (what the scheduler's DefaultBinder does); False when the Pod is
    gone or bound meanwhile (404, 409)."""
    meta = pod["metadata"]
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
    try:
        client.create("v1", "pods", binding, meta["namespace"], subresource="binding", name=meta["name"])
    except ApiError as exc:
        if exc.code not in (404, 409):
            raise
        return False
    return True


def controller_of(obj: dict) -> dict | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return ref
    return None


def controller_ref(owner: dict) -> dict:
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


class Expectations:
    """ControllerExpectations: creations/deletions a controller waits to observe before it syncs
    that key again (so it does not act twice on a stale cache)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._items: dict[str, list] = {}       # key -> [adds, dels, timestamp]

    def expect(self, key: str, adds: int = 0, dels: int = 0) -> None:
        with self._lock:
            self._items[key] = [adds, dels, time.monotonic()]

    def observed(self, key: str, adds: int = 0, dels: int = 0) -> None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                item[0] -= adds
                item[1] -= dels

    def satisfied(self, key: str) -> bool:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return True
            return (item[0] <= 0 and item[1] <= 0) or time.monotonic() - item[2] > EXPECTATIONS_TTL

    def delete(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    def all_satisfied(self) -> bool:
        with self._lock:
            keys = list(self._items)
        return all(self.satisfied(k) for k in keys)


class KeyedController:
    """Informers feed namespace/name keys into a queue; workers call `sync(key)`; an exception
    re-queues the key with backoff."""

    name = ""
    user = ""
    component = ""          # the Events' source (reportingController), when the controller emits some

    def __init__(self, client: Client, log: DecisionLog, workers: int = 1):
        self.client = client
        self.log = log
        self.workers = workers
        self.queue: RateLimitingQueue | None = None
        self.informers: dict[str, Informer] = {}
        self.expectations = Expectations()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.running = False
        self.recorder: EventRecorder | None = None

    def make_informers(self) -> dict[str, Informer]:
        raise NotImplementedError

    def sync(self, key: str) -> None:
        raise NotImplementedError

    def make_queue(self) -> RateLimitingQueue:
        """The work queue the workers take keys from (first in, first out)."""
        return RateLimitingQueue(self.name)

    def informer(self, api_version: str, resource: str, kind: str, namespaced: bool = True, **handlers) -> Informer:
        group, _, version = api_version.rpartition("/")
        return Informer(self.client, ApiResource(group, version, resource, kind, namespaced, ()), **handlers)

    def start(self) -> None:
        if self.running:
            return
        self._stop = threading.Event()
        self.queue = self.make_queue()
        self.expectations = Expectations()
        if self.component and self.recorder is None:
            self.recorder = EventRecorder(self.client, self.component)
        self.informers = self.make_informers()
        for informer in self.informers.values():
            informer.start()
        for informer in self.informers.values():
            informer.wait_synced(30)
        self.running = True
        for i in range(self.workers):
            t = threading.Thread(target=self._worker, daemon=True, name=f"{self.name}-{i}")
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        self._stop.set()
        self.queue.shutdown()
        for informer in self.informers.values():
            informer.stop()
        for t in self._threads:
            t.join(timeout=5)
        self._threads = []
        if self.recorder is not None:
            self.recorder.stop()
            self.recorder = None

    def event(self, obj: dict, type_: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(involved(obj), type_, reason, message)

    def idle(self) -> bool:
        return (not self.running) or (self.queue.idle() and all(i.idle() for i in self.informers.values())
                                      and self.expectations.all_satisfied()
                                      and (self.recorder is None or self.recorder.idle()))

    def enqueue(self, obj: dict) -> None:
        if self.queue is not None:
            self.queue.add(object_key(obj))

    def _worker(self) -> None:
        # wait.Until(worker, ...): each pass blocks in Get until a key comes or stop() shuts the
        # queue down (no timed wake-ups: an idle lab's dozens of workers cost no CPU)
        while not self._stop.is_set():
            self.process_next_work_item()

    def process_next_work_item(self, timeout: float | None = None) -> bool:
        """processNextWorkItem, as upstream's controllers write it: take a key, sync it; on
        success Forget (its backoff starts over), on error AddRateLimited (the key comes back
        after its growing per-item delay); Done either way. False when no key came in `timeout`."""
        key = self.queue.get(timeout=timeout)
        if key is None:
            return False
        try:
            self.sync(key)
            self.queue.forget(key)
        except Exception as exc:
            self.log.record(self.name, "error", None, f"syncing {key} failed: {exc} → retry", level="info")
            self.queue.add_rate_limited(key)
        finally:
            self.queue.done(key)
        return True

    # -- ControllerRefManager --------------------------------------------------------------------
    def claim(self, owner: dict, candidates: list[dict], selector: LabelSelector, api_version: str,
              resource: str) -> list[dict]:
        """The candidates this owner controls after adopting matching orphans and releasing owned
        objects that stopped matching."""
        owner_meta = owner["metadata"]
        owner_deleting = bool(owner_meta.get("deletionTimestamp"))
        claimed = []
        adoption_checked = False
        for obj in candidates:
            meta = obj["metadata"]
            ref = controller_of(obj)
            labels = meta.get("labels") or {}
            if ref is not None:
                if ref.get("uid") != owner_meta["uid"]:
                    continue
                if selector.matches(labels):
                    claimed.append(obj)
                elif not owner_deleting:
                    self._release(owner, obj, api_version, resource)
                continue
            if owner_deleting or not selector.matches(labels) or meta.get("deletionTimestamp"):
                continue
            if not adoption_checked:
                # RecheckDeletionTimestamp: a fresh read, in case the owner is being deleted
                fresh = self.client.get(owner["apiVersion"], _resource_of(owner), owner_meta["name"],
                                        owner_meta.get("namespace"))
                if fresh["metadata"].get("uid") != owner_meta["uid"] or fresh["metadata"].get("deletionTimestamp"):
                    return claimed
                adoption_checked = True
            adopted = self._adopt(owner, obj, api_version, resource)
            if adopted is not None:
                claimed.append(adopted)
        return claimed

    def _adopt(self, owner: dict, obj: dict, api_version: str, resource: str) -> dict | None:
        patch = {"metadata": {"ownerReferences": [controller_ref(owner)], "uid": obj["metadata"]["uid"]}}
        try:
            result = self.client.patch(api_version, resource, obj["metadata"]["name"], patch, "strategic",
                                       obj["metadata"].get("namespace"))
        except ApiError as exc:
            if exc.code in (404, 422):
                return None
            raise
        self.log.record(self.name, "adopt", _ref(obj),
                        f"{describe(_ref(obj))}: an orphan matching the selector of {describe(_ref(owner))} → adopt it "
                        "(controller and blockOwnerDeletion references)")
        return result

    def _release(self, owner: dict, obj: dict, api_version: str, resource: str) -> None:
        patch = {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": owner["metadata"]["uid"]}],
                              "uid": obj["metadata"]["uid"]}}
        try:
            self.client.patch(api_version, resource, obj["metadata"]["name"], patch, "strategic",
                              obj["metadata"].get("namespace"))
        except ApiError as exc:
            if exc.code not in (404, 422):
                raise
            return
        self.log.record(self.name, "release", _ref(obj),
                        f"{describe(_ref(obj))}: no longer matches the selector of {describe(_ref(owner))} → release "
                        "it (remove the owner reference)")


def _ref(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "namespace": meta.get("namespace", ""),
            "name": meta.get("name", ""), "uid": meta.get("uid", "")}


def _resource_of(obj: dict) -> str:
    return {"ReplicaSet": "replicasets", "Deployment": "deployments",
            "ReplicationController": "replicationcontrollers"}[obj["kind"]]
