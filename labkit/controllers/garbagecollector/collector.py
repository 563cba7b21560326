"""The garbage collector's workers (pkg/controller/garbagecollector/garbagecollector.go,
operations.go, patch.go, Kubernetes 1.33/1.34): attemptToDeleteItem with its classification of
owner references into solid / dangling / waitingForDependentsDeletion, processDeletingDependentsItem
for owners deleted in the foreground, attemptToOrphan for owners deleted with `orphan`, owner lookup
with the absent-owner cache, and the DELETE / PATCH requests they send — each decision recorded
with its reason in the decision log.
"""

from __future__ import annotations

import threading
import time

from labkit.apiserver.client import ApiResource, Client, RESTMapper
from labkit.apiserver.errors import ApiError
from labkit.controllers.decisions import DecisionLog, describe
from labkit.controllers.events import EventRecorder
from labkit.controllers.garbagecollector.graph import Node, ObjectReference, coordinates
from labkit.controllers.garbagecollector.graph_builder import CONTROLLER, GraphBuilder, has_finalizer

FORGET, REQUEUE = "forget", "requeue"
DELETABLE_VERBS = {"delete", "list", "watch"}


class EnqueuedVirtualDeleteEvent(Exception):
    """A virtual delete event was queued; processGraphChanges takes it from here."""


class NamespacedOwnerOfClusterScopedObject(Exception):
    def __init__(self):
        super().__init__("cluster-scoped objects cannot refer to namespaced owners")


class RESTMappingError(Exception):
    def __init__(self, kind: str, api_version: str):
        super().__init__(f"unable to get REST mapping for {kind}/{api_version}.")


def _owner_summary(refs: list[dict]) -> str:
    return ", ".join(f"{r.get('kind')} {r.get('name')}" for r in refs)


def _another_uid(dangling: list[dict], renamed: set) -> str:
    """The note for dangling references whose name is held by another object: the owner the
    reference means (by UID) is absent, though `kubectl get` finds one of that name (isDangling:
    the UIDs differ)."""
    named = [r for r in dangling if r.get("uid") in renamed]
    if not named:
        return ""
    return f" (the {_owner_summary(named)} the GC found {'has' if len(named) == 1 else 'have'} another UID than the reference)"


class GarbageCollector:
    """kube-controller-manager runs --concurrent-gc-syncs=20 workers per queue, re-reads discovery
    every 30 s (GarbageCollector.Sync) and resets its shared REST mapper every 30 s
    (controllermanager.go CreateControllerContext); here 8 workers (Python threads share one core
    anyway) and both every 2 s — the shortened period upstream's own integration tests use (5 s
    there) — so CRDs are monitored soon after they are created. As upstream, the mapper is also
    reset when the resources change, and a kind it cannot map (a CRD deleted before a sync saw it)
    is retried with backoff ("unable to get REST mapping"). While discovery lists resources the
    last sync has not caught up with, the collector is not idle. One discovery (aggregated: two
    GETs) serves both the mapper and the sync of a period; asking whether it is idle re-reads
    discovery at most once a second."""

    name = CONTROLLER

    def __init__(self, client: Client, log: DecisionLog, workers: int = 8, sync_period: float = 2.0, clock=None):
        self.client = client
        self.clock = clock or time.monotonic      # when its queues' delayed items are due
        self.log = log
        self.workers = workers
        self.sync_period = sync_period
        self.mapper: RESTMapper | None = None
        self.builder: GraphBuilder | None = None
        self.recorder: EventRecorder | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._resources: set[ApiResource] = set()
        self._pending_checked = (0.0, False)     # (when, result) of the last discovery comparison
        self.observed: dict[str, set[tuple[str, str]]] = {}     # GraphBuilder.observed, kept across restarts
        self.running = False

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        if self.running:
            return
        self._stop = threading.Event()
        self.recorder = EventRecorder(self.client, "garbage-collector-controller")
        self.builder = GraphBuilder(self.client, self.log, self.recorder, observed=self.observed, clock=self.clock)
        self.mapper = RESTMapper(self.client)
        self._resources = set()
        self._sync_once()
        self.builder.run()
        self.running = True
        self.log.record(CONTROLLER, "start", None, "garbage collector started", level="debug")
        for i in range(self.workers):
            self._spawn(self._delete_worker, f"gc-attempt-to-delete-{i}")
            self._spawn(self._orphan_worker, f"gc-attempt-to-orphan-{i}")
        self._spawn(self._sync_loop, "gc-sync")

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        self._stop.set()
        self.builder.attempt_to_delete.shutdown()
        self.builder.attempt_to_orphan.shutdown()
        self.builder.stop()
        for t in self._threads:
            t.join(timeout=5)
        self._threads = []
        self.recorder.stop()
        self.log.record(CONTROLLER, "stop", None, "garbage collector stopped", level="debug")

    def _spawn(self, target, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def is_synced(self) -> bool:
        return self.running and self.builder.is_synced()

    def wait_synced(self, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.is_synced():
                return True
            time.sleep(0.01)
        return False

    def busy(self) -> bool:
        """Work in hand now: graph changes not yet processed, items queued or being processed
        (items waiting for their backoff do not count)."""
        b = self.builder
        return self.running and (not b.idle() or b.attempt_to_delete.busy() or b.attempt_to_orphan.busy())

    def idle(self) -> bool:
        b = self.builder
        if not self.running:
            return True
        return (b.idle() and b.attempt_to_delete.idle() and b.attempt_to_orphan.idle()
                and not self._discovery_pending())

    def _discovery_pending(self) -> bool:
        """Discovery differs from what the last sync monitors (checked at most once a second)."""
        checked_at, pending = self._pending_checked
        now = time.monotonic()
        if now - checked_at < 1.0:
            return pending
        try:
            pending = self._wanted() not in (None, self._resources)
        except (ApiError, OSError):
            pending = False
        self._pending_checked = (now, pending)
        return pending

    def graph_has_uid(self, uid: str) -> bool:
        return self.running and self.builder.read(uid) is not None

    def graph(self) -> list[dict]:
        """The dependency graph: one entry per node (for `labkit gc graph` and debugging)."""
        if not self.running:
            return []
        out = []
        for n in self.builder.nodes():
            out.append({"identity": n.identity.as_dict(), "owners": n.owners, "virtual": n.virtual,
                        "beingDeleted": n.being_deleted, "deletingDependents": n.deleting_dependents,
                        "dependents": sorted(d.identity.uid for d in n.get_dependents())})
        return out

    # -- discovery sync (GarbageCollector.Sync) ----------------------------------------------------
    def _deletable_resources(self, found=None) -> tuple[set[ApiResource], dict[str, str]]:
        found = found or self.client.discover()
        preferred = {r for r in found.resources if found.preferred.get(r.group) == r.version
                     and DELETABLE_VERBS <= set(r.verbs)}
        return preferred, found.failed

    def _wanted(self, found=None) -> set[ApiResource] | None:
        """The resources the monitors should cover now (None: discovery listed none), keeping the
        synced monitors of groups whose discovery failed (partial discovery)."""
        new, failed = self._deletable_resources(found)
        if not new:
            return None
        if failed:
            for resource in self._resources:
                if resource.api_version in failed and self.builder.is_resource_synced(resource):
                    new.add(resource)
        return new

    def _sync_once(self, found=None) -> None:
        new = self._wanted(found)
        if new is None or new == self._resources:
            return
        self.mapper.reset(found)
        self.builder.sync_monitors(new)
        self._resources = new
        self._pending_checked = (0.0, False)

    def _sync_loop(self) -> None:
        while not self._stop.wait(self.sync_period):
            try:
                found = self.client.discover()
                self.mapper.reset(found)    # the controller manager's periodic restMapper.Reset()
                self._sync_once(found)
            except (ApiError, OSError) as exc:
                self.log.record(CONTROLLER, "error", None, f"resource discovery failed: {exc}", level="debug")

    # -- attemptToDelete -------------------------------------------------------------------------
    def _delete_worker(self) -> None:
        queue = self.builder.attempt_to_delete
        while not self._stop.is_set():
            item = queue.get()          # None once stop() shut the queue down
            if item is None:
                continue
            try:
                action = self.attempt_to_delete_worker(item)
            except Exception as exc:      # HandleCrash
                self.log.record(CONTROLLER, "error", item.identity, f"{describe(item.identity)}: {exc!r}")
                action = REQUEUE
            if action == FORGET:
                queue.forget(item)
            else:
                queue.add_rate_limited(item)
            queue.done(item)

    def attempt_to_delete_worker(self, n: Node) -> str:
        b = self.builder
        if n.virtual:
            in_graph = b.read(n.identity.uid)
            if in_graph is None or not in_graph.virtual:
                return FORGET      # no longer in the graph, or observed since
        in_graph = b.read(n.identity.uid)
        if in_graph is not None and (n.identity.api_version != in_graph.identity.api_version or
                                     n.identity.kind != in_graph.identity.kind):
            n = n.clone()
            n.identity = ObjectReference(in_graph.identity.api_version, in_graph.identity.kind, n.identity.name,
                                         n.identity.uid, n.identity.namespace)
        try:
            self.attempt_to_delete_item(n)
        except EnqueuedVirtualDeleteEvent:
            return FORGET
        except NamespacedOwnerOfClusterScopedObject:
            return FORGET
        except RESTMappingError as exc:
            self.log.record(CONTROLLER, "error", n.identity, f"{describe(n.identity)}: {exc} → retry later")
            return REQUEUE
        except ApiError as exc:
            self.log.record(CONTROLLER, "error", n.identity,
                            f"{describe(n.identity)}: request failed ({exc.code} {exc.reason}: {exc.message}) → retry")
            return REQUEUE
        if n.virtual:
            return REQUEUE      # until an informer observes it (issue 56121)
        return FORGET

    def api_resource(self, api_version: str, kind: str) -> ApiResource:
        resource = self.mapper.for_kind(api_version, kind)
        if resource is None:
            raise RESTMappingError(kind, api_version)
        return resource

    def get_object(self, identity: ObjectReference) -> dict:
        resource = self.api_resource(identity.api_version, identity.kind)
        namespace = identity.namespace if resource.namespaced else ""
        if resource.namespaced and not namespace:
            raise NamespacedOwnerOfClusterScopedObject()
        return self.client.get(resource.api_version, resource.resource, identity.name, namespace or None)

    def is_dangling(self, reference: dict, item: Node) -> tuple[bool, dict | None]:
        key = coordinates(reference)
        if self.builder.absent_owner_cache.has(key):
            return True, None
        key = key.with_namespace(item.identity.namespace)
        if self.builder.absent_owner_cache.has(key):
            return True, None
        resource = self.api_resource(reference.get("apiVersion", ""), reference.get("kind", ""))
        if not resource.namespaced:
            key = key.with_namespace("")
        if not item.identity.namespace and resource.namespaced:
            self.log.record(CONTROLLER, "ignore", item.identity,
                            f"{describe(item.identity)}: cluster-scoped, but refers to a namespaced owner "
                            f"{reference.get('kind')} {reference.get('name')} → never collected")
            raise NamespacedOwnerOfClusterScopedObject()
        try:
            owner = self.client.get(resource.api_version, resource.resource, reference.get("name", ""),
                                    item.identity.namespace if resource.namespaced else None)
        except ApiError as exc:
            if exc.code == 404:
                self.builder.absent_owner_cache.add(key)
                return True, None
            raise
        if owner["metadata"].get("uid") != reference.get("uid"):
            self.builder.absent_owner_cache.add(key)       # same name, another object
            return True, owner                             # (labkit's: the log says so)
        return False, owner

    def classify_references(self, item: Node, references: list[dict]):
        """solid, dangling, waitingForDependentsDeletion (classifyReferences); and, labkit's, the
        UIDs of the dangling references whose name the GET found on another object (another UID)."""
        solid, dangling, waiting, renamed = [], [], [], set()
        for ref in references:
            is_dangling, owner = self.is_dangling(ref, item)
            if is_dangling:
                dangling.append(ref)
                if owner is not None:
                    renamed.add(ref.get("uid"))
            elif owner["metadata"].get("deletionTimestamp") and has_finalizer(owner, "foregroundDeletion"):
                waiting.append(ref)
            else:
                solid.append(ref)
        return solid, dangling, waiting, renamed

    def attempt_to_delete_item(self, item: Node) -> None:
        who = describe(item.identity)
        if item.being_deleted and not item.deleting_dependents:
            self.log.record(CONTROLLER, "wait", item.identity,
                            f"{who}: is being deleted → wait until it is gone", level="debug")
            return
        try:
            latest = self.get_object(item.identity)
        except ApiError as exc:
            if exc.code != 404:
                raise
            # labkit's record: a virtual node is an owner the graph does not hold now; whether any
            # monitor ever observed its UID (as this kind) tells one that never existed from one
            # deleted before its dependent's event reached the graph (GraphBuilder.observed)
            never = item.virtual and not self.builder.was_observed(item.identity)
            why = ""
            if never:
                why = " (it was never observed: a virtual owner that does not exist)"
            elif item.virtual:
                why = " (observed earlier and deleted since: a virtual owner that no longer exists)"
            self.log.record(CONTROLLER, "virtual-delete", item.identity,
                            f"{who}: not found on the server → remove it from the graph{why}",
                            level="info" if item.virtual else "debug", never_observed=never)
            self.builder.enqueue_virtual_delete_event(item.identity)
            raise EnqueuedVirtualDeleteEvent()
        if latest["metadata"].get("uid") != item.identity.uid:
            self.log.record(CONTROLLER, "virtual-delete", item.identity,
                            f"{who}: the object of that name has another UID → remove it from the graph")
            self.builder.enqueue_virtual_delete_event(item.identity)
            raise EnqueuedVirtualDeleteEvent()
        if item.deleting_dependents:
            self.process_deleting_dependents_item(item)
            return
        references = latest["metadata"].get("ownerReferences") or []
        if not references:
            self.log.record(CONTROLLER, "keep", item.identity, f"{who}: has no owner references → nothing to do",
                            level="debug")
            return
        solid, dangling, waiting, renamed = self.classify_references(item, references)
        classification = {"solid": [r.get("uid") for r in solid], "dangling": [r.get("uid") for r in dangling],
                          "waitingForDependentsDeletion": [r.get("uid") for r in waiting]}
        if solid:
            if not dangling and not waiting:
                self.log.record(CONTROLLER, "keep", item.identity,
                                f"{who}: owner {_owner_summary(solid)} exists → keep", level="debug",
                                classification=classification)
                return
            reasons = []
            if dangling:
                reasons.append(f"absent owner(s) {_owner_summary(dangling)}{_another_uid(dangling, renamed)}")
            if waiting:
                reasons.append(f"owner(s) {_owner_summary(waiting)} waiting for dependents' deletion")
            self.log.record(CONTROLLER, "remove-owner-references", item.identity,
                            f"{who}: owner {_owner_summary(solid)} still exists → keep it, remove its references "
                            f"to {' and '.join(reasons)}", classification=classification)
            uids = [r.get("uid") for r in dangling + waiting]
            self.patch(item, delete_owner_refs_smp(item.identity.uid, uids),
                       lambda n: self.delete_owner_refs_json_merge_patch(n, uids))
            return
        if waiting and item.dependents_length() > 0:
            for dep in item.get_dependents():
                if dep.deleting_dependents:
                    self.log.record(CONTROLLER, "unblock-owner-references", item.identity,
                                    f"{who}: its owner and its dependent {describe(dep.identity)} are both deleting "
                                    "dependents (a possible cycle) → set blockOwnerDeletion=false on its owner "
                                    "references first")
                    self.patch(item, unblock_owner_refs_smp(item), self.unblock_owner_refs_json_merge_patch)
                    break
            self.log.record(CONTROLLER, "delete", item.identity,
                            f"{who}: owner {_owner_summary(waiting)} is waiting for dependents' deletion and {who} "
                            "has dependents of its own → delete with Foreground", policy="Foreground",
                            classification=classification)
            self._delete(item, latest, "Foreground")
            return
        if has_finalizer(latest, "orphan"):
            policy, why = "Orphan", "it carries the orphan finalizer"
        elif has_finalizer(latest, "foregroundDeletion"):
            policy, why = "Foreground", "it carries the foregroundDeletion finalizer"
        else:
            policy, why = "Background", "the default"
        reasons = []
        if dangling:
            reasons.append(f"owner {_owner_summary(dangling)} {'is' if len(dangling) == 1 else 'are'} absent"
                           + _another_uid(dangling, renamed))
        if waiting:
            reasons.append(f"owner {_owner_summary(waiting)} {'is' if len(waiting) == 1 else 'are'} waiting for "
                           "dependents' deletion")
        self.log.record(CONTROLLER, "delete", item.identity,
                        f"{who}: {' and '.join(reasons)} → delete with {policy} ({why})", policy=policy,
                        classification=classification)
        self._delete(item, latest, policy)

    def _delete(self, item: Node, latest: dict, policy: str) -> None:
        meta = latest["metadata"]
        try:
            self.delete_object(item.identity, meta.get("resourceVersion", ""), meta.get("ownerReferences") or [],
                               policy)
        except ApiError as exc:
            if exc.code == 404:
                self.builder.enqueue_virtual_delete_event(item.identity)
                raise EnqueuedVirtualDeleteEvent()
            raise

    def process_deleting_dependents_item(self, item: Node) -> None:
        who = describe(item.identity)
        blocking = item.blocking_dependents()
        if not blocking:
            self.log.record(CONTROLLER, "remove-finalizer", item.identity,
                            f"{who}: no dependent blocks its deletion any more → remove the foregroundDeletion "
                            "finalizer", finalizer="foregroundDeletion")
            self.remove_finalizer(item, "foregroundDeletion")
            return
        queued = [d for d in blocking if not d.deleting_dependents]
        self.log.record(CONTROLLER, "wait", item.identity,
                        f"{who}: waiting for {len(blocking)} blocking dependent(s) to be deleted: "
                        + ", ".join(describe(d.identity) for d in blocking[:5]) + (" ..." if len(blocking) > 5 else ""),
                        level="debug")
        for dep in queued:
            self.builder.attempt_to_delete.add(dep)

    # -- attemptToOrphan -------------------------------------------------------------------------
    def _orphan_worker(self) -> None:
        queue = self.builder.attempt_to_orphan
        while not self._stop.is_set():
            owner = queue.get()
            if owner is None:
                continue
            try:
                action = self.attempt_to_orphan_worker(owner)
            except Exception as exc:
                self.log.record(CONTROLLER, "error", owner.identity, f"{describe(owner.identity)}: {exc!r}")
                action = REQUEUE
            if action == FORGET:
                queue.forget(owner)
            else:
                queue.add_rate_limited(owner)
            queue.done(owner)

    def attempt_to_orphan_worker(self, owner: Node) -> str:
        dependents = owner.get_dependents()
        who = describe(owner.identity)
        self.log.record(CONTROLLER, "orphan-dependents", owner.identity,
                        f"{who}: deleted with the orphan finalizer → remove its owner reference from "
                        f"{len(dependents)} dependent(s)"
                        + (": " + ", ".join(describe(d.identity) for d in dependents[:5]) if dependents else "")
                        + (" ..." if len(dependents) > 5 else ""))
        errors = []
        for dep in dependents:
            try:
                self.patch(dep, delete_owner_refs_smp(dep.identity.uid, [owner.identity.uid]),
                           lambda n: self.delete_owner_refs_json_merge_patch(n, [owner.identity.uid]))
            except (ApiError, RESTMappingError) as exc:
                if not (isinstance(exc, ApiError) and exc.code == 404):
                    errors.append(f"orphaning {dep.identity} failed, {exc}")
        if errors:
            self.log.record(CONTROLLER, "error", owner.identity,
                            f"{who}: failed to orphan dependents: {'; '.join(errors)} → retry")
            return REQUEUE
        self.log.record(CONTROLLER, "remove-finalizer", owner.identity,
                        f"{who}: dependents orphaned → remove the orphan finalizer", finalizer="orphan")
        try:
            self.remove_finalizer(owner, "orphan")
        except (ApiError, RESTMappingError) as exc:
            self.log.record(CONTROLLER, "error", owner.identity, f"{who}: removing the orphan finalizer failed: {exc}")
            return REQUEUE
        return FORGET

    # -- operations (operations.go, patch.go) ------------------------------------------------------
    def delete_object(self, identity: ObjectReference, resource_version: str, owners: list[dict],
                      policy: str) -> None:
        resource = self.api_resource(identity.api_version, identity.kind)
        namespace = identity.namespace if resource.namespaced else None
        preconditions = {"uid": identity.uid}
        if resource_version:
            preconditions["resourceVersion"] = resource_version
        options = {"preconditions": preconditions, "propagationPolicy": policy}
        try:
            self.client.delete(resource.api_version, resource.resource, identity.name, namespace, options=options)
        except ApiError as exc:
            if exc.code != 409 or not resource_version:
                raise
            # only the resourceVersion changed and the owners did not: retry without it
            try:
                live = self.client.get(resource.api_version, resource.resource, identity.name, namespace)
            except ApiError as get_exc:
                if get_exc.code == 404:
                    return
                raise exc
            meta = live["metadata"]
            if meta.get("uid") == identity.uid and meta.get("resourceVersion") != resource_version \
                    and (meta.get("ownerReferences") or []) == owners:
                self.delete_object(identity, "", [], policy)
                return
            raise

    def patch_object(self, identity: ObjectReference, patch, patch_type: str) -> dict:
        resource = self.api_resource(identity.api_version, identity.kind)
        namespace = identity.namespace if resource.namespaced else None
        return self.client.patch(resource.api_version, resource.resource, identity.name, patch, patch_type,
                                 namespace)

    def patch(self, item: Node, smp: dict, json_merge_patch) -> dict:
        """Strategic merge patch, or a JSON merge patch where the resource refuses it (415)."""
        try:
            return self.patch_object(item.identity, smp, "strategic")
        except ApiError as exc:
            if exc.code != 415:
                raise
        return self.patch_object(item.identity, json_merge_patch(item), "merge")

    def _metadata(self, n: Node) -> dict:
        return self.get_object(n.identity)["metadata"]

    def delete_owner_refs_json_merge_patch(self, item: Node, uids: list[str]) -> dict:
        meta = self._metadata(item)
        refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") not in uids]
        return {"metadata": {"resourceVersion": meta.get("resourceVersion"), "ownerReferences": refs}}

    def unblock_owner_refs_json_merge_patch(self, n: Node) -> dict:
        meta = self._metadata(n)
        refs = [dict(r, blockOwnerDeletion=False) for r in n.owners]
        return {"metadata": {"resourceVersion": meta.get("resourceVersion"), "ownerReferences": refs}}

    def remove_finalizer(self, owner: Node, finalizer: str) -> None:
        """GET, drop the finalizer, JSON merge patch with the resourceVersion; retried on conflict
        (retry.DefaultBackoff: 4 steps from 10 ms, factor 5)."""
        delay = 0.01
        for attempt in range(4):
            try:
                obj = self.get_object(owner.identity)
            except ApiError as exc:
                if exc.code == 404:
                    return
                raise
            finalizers = obj["metadata"].get("finalizers") or []
            if finalizer not in finalizers:
                return
            remaining = [f for f in finalizers if f != finalizer]
            patch = {"metadata": {"resourceVersion": obj["metadata"].get("resourceVersion"),
                                  "finalizers": remaining or None}}
            try:
                self.patch_object(owner.identity, patch, "merge")
                return
            except ApiError as exc:
                if exc.code == 404:
                    return
                if exc.code != 409 or attempt == 3:
                    raise
            time.sleep(delay)
            delay *= 5


def delete_owner_refs_smp(dependent_uid: str, owner_uids: list[str]) -> dict:
    return {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": uid} for uid in owner_uids],
                         "uid": dependent_uid}}


def unblock_owner_refs_smp(n: Node) -> dict:
    refs = [dict(r, blockOwnerDeletion=False) for r in n.owners if r.get("blockOwnerDeletion") is True]
    return {"metadata": {"ownerReferences": refs, "uid": n.identity.uid}}
