"""The GraphBuilder (pkg/controller/garbagecollector/graph_builder.go): monitors (one informer per
deletable resource) feed add/update/delete events into `graph_changes`; a single thread applies
them to the graph (`uid_to_node`) and queues work for the collector: `attempt_to_delete` and
`attempt_to_orphan`.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

from labkit.apiserver.client import ApiResource, Client
from labkit.controllers.decisions import DecisionLog, describe
from labkit.controllers.events import EventRecorder
from labkit.controllers.garbagecollector.graph import (Node, ObjectReference, ReferenceCache, coordinates,
                                                       matches_coordinates)
from labkit.controllers.informer import Informer
from labkit.controllers.workqueue import RateLimitingQueue

ADD, UPDATE, DELETE = "add", "update", "delete"
CONTROLLER = "garbagecollector"


@dataclass
class GraphEvent:
    type: str
    obj: dict
    api_version: str
    kind: str
    old_obj: dict | None = None
    virtual: bool = False


@dataclass
class Monitor:
    resource: ApiResource
    informer: Informer
    started: bool = False


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def being_deleted(obj: dict | None) -> bool:
    return bool(obj) and bool(_meta(obj).get("deletionTimestamp"))


def has_finalizer(obj: dict | None, finalizer: str) -> bool:
    return bool(obj) and finalizer in (_meta(obj).get("finalizers") or [])


def deletion_starts_with_finalizer(old: dict | None, new: dict, finalizer: str) -> bool:
    if not being_deleted(new) or not has_finalizer(new, finalizer):
        return False
    if old is None:
        return True
    return not being_deleted(old) or not has_finalizer(old, finalizer)


def identity_from_event(event: GraphEvent) -> ObjectReference:
    meta = _meta(event.obj)
    return ObjectReference(event.api_version, event.kind, meta.get("name", ""), meta.get("uid", ""),
                           meta.get("namespace", "") or "")


def references_diffs(old: list[dict], new: list[dict]):
    old_by_uid = {r.get("uid"): r for r in old}
    added, changed = [], []
    remaining = set(old_by_uid)
    for ref in new:
        uid = ref.get("uid")
        if uid in remaining:
            if old_by_uid[uid] != ref:
                changed.append((old_by_uid[uid], ref))
            remaining.discard(uid)
        else:
            added.append(ref)
    removed = [old_by_uid[u] for u in remaining]
    return added, removed, changed


def group_kind(api_version: str, kind: str) -> tuple[str, str]:
    """(group, kind) of an apiVersion and kind: the core group is ""."""
    return (api_version.split("/", 1)[0] if "/" in api_version else "", kind)


class GraphBuilder:
    """`observed` (labkit's own record, not upstream's: upstream keeps no history) maps each UID
    any monitor has ever delivered an event for to the (group, kind)s it was observed as; the
    collector passes the same dict to every builder it starts, so it outlives a restart. The
    decision log reads it to tell an owner that never existed from one observed and deleted
    since (both are virtual nodes whose lookup finds nothing)."""

    def __init__(self, client: Client, log: DecisionLog, recorder: EventRecorder,
                 ignored: set[tuple[str, str]] | None = None,
                 observed: dict[str, set[tuple[str, str]]] | None = None, clock=time.monotonic):
        self.client = client
        self.log = log
        self.recorder = recorder
        self.ignored = ignored if ignored is not None else {("", "events"), ("events.k8s.io", "events")}
        self.graph_changes: queue.Queue = queue.Queue()
        self._changes_queued = 0         # idle when every queued change has been processed
        self._changes_processed = 0
        self.uid_to_node: dict[str, Node] = {}
        self._uid_lock = threading.Lock()
        self.observed = observed if observed is not None else {}
        self.attempt_to_delete = RateLimitingQueue("garbage_collector_attempt_to_delete", clock=clock)
        self.attempt_to_orphan = RateLimitingQueue("garbage_collector_attempt_to_orphan", clock=clock)
        self.absent_owner_cache = ReferenceCache(500)
        self.monitors: dict[ApiResource, Monitor] = {}
        self._monitor_lock = threading.Lock()
        self._running = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the graph ---------------------------------------------------------------------------------
    def read(self, uid: str) -> Node | None:
        with self._uid_lock:
            return self.uid_to_node.get(uid)

    def write(self, node: Node) -> None:
        with self._uid_lock:
            self.uid_to_node[node.identity.uid] = node

    def _delete_uid(self, uid: str) -> None:
        with self._uid_lock:
            self.uid_to_node.pop(uid, None)

    def nodes(self) -> list[Node]:
        with self._uid_lock:
            return list(self.uid_to_node.values())

    def was_observed(self, identity: ObjectReference) -> bool:
        """A monitor has delivered an event for this UID as this group and kind (at any time)."""
        with self._uid_lock:
            return group_kind(identity.api_version, identity.kind) in self.observed.get(identity.uid, ())

    def _observe(self, event: GraphEvent) -> None:
        uid = _meta(event.obj).get("uid")
        if uid and not event.virtual:
            with self._uid_lock:
                self.observed.setdefault(uid, set()).add(group_kind(event.api_version, event.kind))

    # -- monitors ----------------------------------------------------------------------------------
    def sync_monitors(self, resources: set[ApiResource]) -> None:
        with self._monitor_lock:
            current = {}
            for resource in resources:
                if (resource.group, resource.resource) in self.ignored:
                    continue
                if resource in self.monitors:
                    current[resource] = self.monitors.pop(resource)
                    continue
                current[resource] = Monitor(resource, self._informer_for(resource))
            removed, self.monitors = self.monitors, current
        for monitor in removed.values():
            if monitor.started:
                monitor.informer.stop()
        self.start_monitors()

    def _informer_for(self, resource: ApiResource) -> Informer:
        api_version, kind = resource.api_version, resource.kind

        def on_add(obj):
            self._put(GraphEvent(ADD, obj, api_version, kind))

        def on_update(old, new):
            self._put(GraphEvent(UPDATE, new, api_version, kind, old_obj=old))

        def on_delete(obj):
            self._put(GraphEvent(DELETE, obj, api_version, kind))

        return Informer(self.client, resource, on_add, on_update, on_delete)

    def start_monitors(self) -> None:
        with self._monitor_lock:
            if not self._running:
                return
            for monitor in self.monitors.values():
                if not monitor.started:
                    monitor.started = True
                    monitor.informer.start()

    def is_synced(self) -> bool:
        with self._monitor_lock:
            return bool(self.monitors) and all(m.informer.has_synced() for m in self.monitors.values())

    def is_resource_synced(self, resource: ApiResource) -> bool:
        with self._monitor_lock:
            monitor = self.monitors.get(resource)
            return monitor is not None and monitor.informer.has_synced()

    def idle(self) -> bool:
        with self._monitor_lock:
            informers_idle = all(m.informer.idle() for m in self.monitors.values())
        return informers_idle and self._changes_processed == self._changes_queued

    def _put(self, event: GraphEvent) -> None:
        self._changes_queued += 1
        self.graph_changes.put(event)

    # -- run ---------------------------------------------------------------------------------------
    def run(self) -> None:
        with self._monitor_lock:
            self._running = True
        self.start_monitors()
        self._thread = threading.Thread(target=self._process_loop, daemon=True, name="gc-graph-builder")
        self._thread.start()

    def stop(self) -> None:
        with self._monitor_lock:
            self._running = False
            monitors = list(self.monitors.values())
            self.monitors = {}
        self._stop.set()
        self.graph_changes.put(None)
        for monitor in monitors:
            if monitor.started:
                monitor.informer.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _process_loop(self) -> None:
        while not self._stop.is_set():
            event = self.graph_changes.get()
            if event is None:
                return
            try:
                self.process_graph_changes(event)
            except Exception as exc:     # HandleCrash: log and keep going
                self.log.record(CONTROLLER, "error", None, f"processing a graph change failed: {exc!r}")
            finally:
                self._changes_processed += 1

    def enqueue_virtual_delete_event(self, ref: ObjectReference) -> None:
        obj = {"apiVersion": ref.api_version, "kind": ref.kind,
               "metadata": {"namespace": ref.namespace, "uid": ref.uid, "name": ref.name}}
        self._put(GraphEvent(DELETE, obj, ref.api_version, ref.kind, virtual=True))

    # -- linking -----------------------------------------------------------------------------------
    def add_dependent_to_owners(self, n: Node, owners: list[dict]) -> None:
        """Link n into its owners' dependents; unknown owners become virtual nodes that the
        collector verifies; references whose coordinates cannot be right queue n for checking."""
        potentially_invalid = False
        for owner in owners:
            owner_node = self.read(owner.get("uid", ""))
            known = owner_node is not None
            if not known:
                owner_node = Node(coordinates(owner, n.identity.namespace), virtual=True)
                self.write(owner_node)
                self.log.record(CONTROLLER, "add-virtual-node", owner_node.identity,
                                f"{describe(owner_node.identity)}: owner of {describe(n.identity)} not observed yet "
                                "→ add a virtual node and verify it exists", level="debug")
            owner_node.add_dependent(n)
            if not known:
                self.attempt_to_delete.add(owner_node)
            elif not potentially_invalid:
                owner_namespaced = bool(owner_node.identity.namespace)
                if owner_namespaced and owner_node.identity.namespace != n.identity.namespace:
                    if not owner_node.virtual:
                        self.report_invalid_namespace_owner_ref(n, owner.get("uid", ""))
                    potentially_invalid = True
                elif not matches_coordinates(owner, owner_node.identity):
                    potentially_invalid = True
                elif not owner_namespaced and owner_node.identity.namespace != n.identity.namespace \
                        and owner_node.virtual:
                    potentially_invalid = True
        if potentially_invalid:
            self.attempt_to_delete.add(n)

    def report_invalid_namespace_owner_ref(self, n: Node, owner_uid: str) -> None:
        ref = next((r for r in n.owners if r.get("uid") == owner_uid), None)
        if ref is None:
            return
        invalid = coordinates(ref, n.identity.namespace)
        message = f"ownerRef {invalid} does not exist in namespace \"{n.identity.namespace}\""
        self.log.record(CONTROLLER, "invalid-owner-reference", n.identity,
                        f"{describe(n.identity)}: owner {ref.get('kind')} {ref.get('name')} lives in another "
                        f"namespace → event OwnerRefInvalidNamespace: {message}")
        self.recorder.event(n.identity.as_dict(), "Warning", "OwnerRefInvalidNamespace", message)

    def insert_node(self, n: Node) -> None:
        self.write(n)
        self.add_dependent_to_owners(n, n.owners)

    def remove_dependent_from_owners(self, n: Node, owners: list[dict]) -> None:
        for owner in owners:
            owner_node = self.read(owner.get("uid", ""))
            if owner_node is not None:
                owner_node.delete_dependent(n)

    def remove_node(self, n: Node) -> None:
        self._delete_uid(n.identity.uid)
        self.remove_dependent_from_owners(n, n.owners)

    def add_unblocked_owners_to_delete_queue(self, removed: list[dict], changed: list[tuple[dict, dict]]) -> None:
        """A blocking reference that went away (or stopped blocking) may let its owner finish."""
        for ref in removed:
            if ref.get("blockOwnerDeletion") is True:
                node = self.read(ref.get("uid", ""))
                if node is not None:
                    self.attempt_to_delete.add(node)
        for old, new in changed:
            if old.get("blockOwnerDeletion") is True and new.get("blockOwnerDeletion") is not True:
                node = self.read(new.get("uid", ""))
                if node is not None:
                    self.attempt_to_delete.add(node)

    def process_transitions(self, old_obj: dict | None, new_obj: dict, n: Node) -> None:
        if deletion_starts_with_finalizer(old_obj, new_obj, "orphan"):
            self.log.record(CONTROLLER, "queue-orphan", n.identity,
                            f"{describe(n.identity)}: deletion started with the orphan finalizer → orphan its "
                            "dependents", level="debug")
            self.attempt_to_orphan.add(n)
            return
        if deletion_starts_with_finalizer(old_obj, new_obj, "foregroundDeletion"):
            n.deleting_dependents = True
            dependents = n.get_dependents()
            self.log.record(CONTROLLER, "queue-foreground", n.identity,
                            f"{describe(n.identity)}: deletion started with the foregroundDeletion finalizer → "
                            f"attempt to delete its {len(dependents)} dependent(s), then itself", level="debug")
            for dep in dependents:
                self.attempt_to_delete.add(dep)
            self.attempt_to_delete.add(n)

    # -- processGraphChanges ------------------------------------------------------------------------
    def process_graph_changes(self, event: GraphEvent) -> None:
        self._observe(event)
        obj = event.obj
        meta = _meta(obj)
        uid = meta.get("uid", "")
        existing = self.read(uid)
        if existing is not None and not event.virtual and existing.virtual:
            observed = identity_from_event(event)
            if observed != existing.identity:
                _, invalid = partition_dependents(existing.get_dependents(), observed)
                for dep in invalid:
                    if observed.namespace and dep.identity.namespace != observed.namespace:
                        self.report_invalid_namespace_owner_ref(dep, observed.uid)
                    self.attempt_to_delete.add(dep)
                existing = existing.clone()
                existing.identity = observed
                self.write(existing)
            existing.virtual = False

        if event.type in (ADD, UPDATE) and existing is None:
            node = Node(identity_from_event(event), list(meta.get("ownerReferences") or []),
                        being_deleted=being_deleted(obj),
                        deleting_dependents=being_deleted(obj) and has_finalizer(obj, "foregroundDeletion"))
            self.insert_node(node)
            self.process_transitions(event.old_obj, obj, node)
        elif event.type in (ADD, UPDATE):
            if not event.virtual and (existing.identity.api_version != event.api_version or
                                      existing.identity.kind != event.kind):
                old_node = existing
                existing = existing.clone()
                existing.identity = ObjectReference(event.api_version, event.kind, old_node.identity.name,
                                                    old_node.identity.uid, old_node.identity.namespace)
                self.write(existing)
                for owner in existing.owners:
                    owner_node = self.read(owner.get("uid", ""))
                    if owner_node is not None:
                        owner_node.replace_dependent_if_exists(old_node, existing)
            new_owners = list(meta.get("ownerReferences") or [])
            added, removed, changed = references_diffs(existing.owners, new_owners)
            if added or removed or changed:
                self.add_unblocked_owners_to_delete_queue(removed, changed)
                existing.owners = new_owners
                self.add_dependent_to_owners(existing, added)
                self.remove_dependent_from_owners(existing, removed)
            if being_deleted(obj):
                existing.being_deleted = True
            self.process_transitions(event.old_obj, obj, existing)
        else:
            if existing is None:
                return
            remove = True
            if event.virtual:
                deleted = identity_from_event(event)
                if existing.virtual:
                    matching, nonmatching = partition_dependents(existing.get_dependents(), deleted)
                    if nonmatching:
                        remove = False
                        if matching:
                            self.absent_owner_cache.add(deleted)
                            for dep in matching:
                                self.attempt_to_delete.add(dep)
                        if existing.identity == deleted:
                            replacement = alternate_owner_identity(nonmatching, deleted)
                            if replacement is not None:
                                node = existing.clone()
                                node.identity = replacement
                                self.write(node)
                                self.attempt_to_delete.add_rate_limited(node)
                elif existing.identity != deleted:
                    remove = False
                    matching, _ = partition_dependents(existing.get_dependents(), deleted)
                    if matching:
                        self.absent_owner_cache.add(deleted)
                        for dep in matching:
                            self.attempt_to_delete.add(dep)
            if remove:
                self.remove_node(existing)
                dependents = existing.get_dependents()
                if dependents:
                    self.absent_owner_cache.add(identity_from_event(event))
                    self.log.record(CONTROLLER, "owner-gone", existing.identity,
                                    f"{describe(existing.identity)}: gone "
                                    f"{'(verified absent)' if event.virtual else ''}".rstrip()
                                    + f" → attempt to delete its {len(dependents)} dependent(s): "
                                    + ", ".join(describe(d.identity) for d in dependents[:5])
                                    + (" ..." if len(dependents) > 5 else ""), level="debug")
                for dep in dependents:
                    self.attempt_to_delete.add(dep)
                for owner in existing.owners:
                    owner_node = self.read(owner.get("uid", ""))
                    if owner_node is not None and owner_node.deleting_dependents:
                        self.attempt_to_delete.add(owner_node)


def partition_dependents(dependents: list[Node], identity: ObjectReference) -> tuple[list[Node], list[Node]]:
    """Dependents whose reference to identity.uid matches all its coordinates, and those whose
    reference does not (a dependent can be in both)."""
    owner_namespaced = bool(identity.namespace)
    matching, nonmatching = [], []
    for dep in dependents:
        found_match = found_mismatch = False
        if owner_namespaced and identity.namespace != dep.identity.namespace:
            found_mismatch = True
        else:
            for ref in dep.owners:
                if ref.get("uid") == identity.uid:
                    if matches_coordinates(ref, identity):
                        found_match = True
                    else:
                        found_mismatch = True
        if found_match:
            matching.append(dep)
        if found_mismatch:
            nonmatching.append(dep)
    return matching, nonmatching


def _reference_key(ref: ObjectReference):
    return (ref.kind, ref.api_version, ref.namespace, ref.name, ref.uid)


def alternate_owner_identity(deps: list[Node], absent: ObjectReference) -> ObjectReference | None:
    """getAlternateOwnerIdentity: another identity the dependents use for absent.uid — the first
    after `absent` in (kind, apiVersion, namespace, name, uid) order, else the first."""
    cluster_scoped = not absent.namespace
    seen = {absent}
    first = following = None
    for dep in deps:
        for ref in dep.owners:
            if ref.get("uid") != absent.uid:
                continue
            if matches_coordinates(ref, absent) and (cluster_scoped or absent.namespace == dep.identity.namespace):
                continue
            candidate = coordinates(ref, dep.identity.namespace)
            if cluster_scoped and candidate.api_version == absent.api_version and candidate.kind == absent.kind:
                candidate = candidate.with_namespace("")
            if candidate in seen:
                continue
            seen.add(candidate)
            if first is None or _reference_key(candidate) < _reference_key(first):
                first = candidate
            if _reference_key(absent) < _reference_key(candidate) and (
                    following is None or _reference_key(candidate) < _reference_key(following)):
                following = candidate
    return following or first

