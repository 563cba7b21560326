"""The namespace controller, reconstructed from pkg/controller/namespace (namespace_controller.go)
and pkg/controller/namespace/deletion (namespaced_resources_deleter.go,
status_condition_utils.go), as of Kubernetes 1.34.

It watches namespaces and works on those being deleted: it discovers every namespaced resource
that can be deleted, deletes the pods first when the OrderedNamespaceDeletion feature is on (off
by default in 1.30–1.32, on from 1.33, GA and locked on in 1.34: version.py) and waits for them
to be gone before touching anything else — otherwise every resource in the same pass — with
deletecollection (or list + delete) and propagationPolicy Background, counts what remains and
which finalizers hold it, writes the five deletion conditions, and once nothing remains removes
the `kubernetes` spec finalizer through `PUT /api/v1/namespaces/<name>/finalize` — the update in
which the API server removes the namespace. A namespace with content left is retried after
estimate/2+1 seconds; a failure (discovery of some group failed, items that should be gone are
not) is retried with backoff, and the namespace is then never finalized.

Every pass is recorded in the decision log with its reason (`labkit ns log`, `labkit ns explain`).
The informer resyncs every --namespace-sync-period (5 min): each Terminating namespace is then
queued again, 5 s later, like after any change.
"""

from __future__ import annotations

import threading
import time

from labkit.apiserver.client import AGGREGATED_DISCOVERY_ACCEPT, ApiResource, Client, read_aggregated_discovery
from labkit.apiserver.errors import ApiError
from labkit.controllers.clock import wall
from labkit.controllers.decisions import DecisionLog
from labkit.controllers.informer import Informer
from labkit.controllers.workqueue import RateLimitingQueue

CONTROLLER = "namespace"
FINALIZER = "kubernetes"
# namespace_controller.go: namespaceDeletionGracePeriod, "to allow HA apiservers and etcd to catch up"
DELETION_GRACE_PERIOD = 5.0
# namespaced_resources_deleter.go: finalizerEstimateSeconds, the estimate reported for content held by finalizers
FINALIZER_ESTIMATE_SECONDS = 15
WORKERS = 2                     # upstream --concurrent-namespace-syncs defaults to 10
NAMESPACE_SYNC_PERIOD = 300.0   # --namespace-sync-period: the informer's resync

# status_condition_utils.go: the conditions the deleter maintains, in the order they are first written
CONDITION_TYPES = ("NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
                   "NamespaceDeletionContentFailure", "NamespaceContentRemaining", "NamespaceFinalizersRemaining")
OK_REASONS = {"NamespaceDeletionDiscoveryFailure": "ResourcesDiscovered",
              "NamespaceDeletionGroupVersionParsingFailure": "ParsedGroupVersions",
              "NamespaceDeletionContentFailure": "ContentDeleted",
              "NamespaceContentRemaining": "ContentRemoved",
              "NamespaceFinalizersRemaining": "ContentHasNoFinalizers"}
OK_MESSAGES = {"NamespaceDeletionDiscoveryFailure": "All resources successfully discovered",
               "NamespaceDeletionGroupVersionParsingFailure": "All legacy kube types successfully parsed",
               "NamespaceDeletionContentFailure": "All content successfully deleted, may be waiting on finalization",
               "NamespaceContentRemaining": "All content successfully removed",
               "NamespaceFinalizersRemaining": "All content-preserving finalizers finished"}



def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _parse_rfc3339(value: str) -> float:
    import calendar
    return calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S"))


def gvr_string(resource: ApiResource) -> str:
    """schema.GroupVersionResource's String(): `apps/v1, Resource=deployments`, `/v1, Resource=pods`."""
    return f"{resource.group}/{resource.version}, Resource={resource.resource}"


class ResourcesRemaining(Exception):
    """deletion.ResourcesRemainingError."""

    def __init__(self, estimate: int):
        super().__init__(f"some content remains in the namespace, estimate {estimate} seconds before it is removed")
        self.estimate = estimate


class DeletionError(Exception):
    """An aggregate of the pass's errors (utilerrors.NewAggregate)."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")


# -- discovery -------------------------------------------------------------------------------

def discover_preferred_namespaced(client: Client) -> tuple[list[ApiResource], dict[str, str]]:
    """ServerPreferredNamespacedResources through aggregated discovery (what current
    controller-managers use): the namespaced resources of each group's preferred version, and
    the group/versions that failed — with aggregated discovery a group/version the aggregator
    could not reach is listed as Stale, which client-go reports as
    `stale GroupVersion discovery: <gv>` (discovery/aggregated_discovery.go)."""
    found: list[ApiResource] = []
    failed: dict[str, str] = {}
    preferred: dict[str, str] = {}
    for path in ("/api", "/apis"):
        code, body = client.request("GET", path, accept=AGGREGATED_DISCOVERY_ACCEPT)
        if code != 200 or not isinstance(body, dict) or body.get("kind") != "APIGroupDiscoveryList":
            message = body.get("message") if isinstance(body, dict) else None
            raise ApiError(code if code >= 400 else 500, "InternalError",
                           message or f"unexpected answer to GET {path} (HTTP {code})")
        read_aggregated_discovery(body, found, failed, preferred)
    return [r for r in found if r.namespaced and preferred.get(r.group) == r.version], failed


def discovery_error_message(failed: dict[str, str]) -> str:
    """discovery.ErrGroupDiscoveryFailed.Error()."""
    groups = sorted(f"{gv}: {err}" for gv, err in failed.items())
    return "unable to retrieve the complete list of server APIs: " + ", ".join(groups)


# -- the deleter -----------------------------------------------------------------------------

class ConditionUpdater:
    """status_condition_utils.go namespaceConditionUpdater."""

    def __init__(self):
        self.new: dict[str, dict] = {}
        self.delete_content_errors: list[str] = []

    def _set(self, ctype: str, reason: str, message: str) -> None:
        self.new[ctype] = {"type": ctype, "status": "True", "lastTransitionTime": now_rfc3339(), "reason": reason,
                           "message": message}

    def discovery_failed(self, failed: dict[str, str]) -> None:
        self._set("NamespaceDeletionDiscoveryFailure", "DiscoveryFailed",
                  f"Discovery failed for some groups, {len(failed)} failing: {discovery_error_message(failed)}")

    def delete_content_failed(self, error: str) -> None:
        self.delete_content_errors.append(error)

    def content_totals(self, by_resource: dict[str, int], by_finalizer: dict[str, int]) -> None:
        remaining = sorted(f"{gr} has {n} resource instances" for gr, n in by_resource.items() if n)
        if by_resource:
            self._set("NamespaceContentRemaining", "SomeResourcesRemain",
                      "Some resources are remaining: " + ", ".join(remaining))
        held = sorted(f"{f} in {n} resource instances" for f, n in by_finalizer.items() if n)
        if by_finalizer:
            self._set("NamespaceFinalizersRemaining", "SomeFinalizersRemain",
                      "Some content in the namespace has finalizers remaining: " + ", ".join(held))

    def update(self, status: dict) -> bool:
        """Update(): writes all five conditions into `status`; whether anything changed."""
        if "NamespaceDeletionContentFailure" not in self.new and self.delete_content_errors:
            msgs = sorted(self.delete_content_errors)
            self._set("NamespaceDeletionContentFailure", "ContentDeletionFailed",
                      f"Failed to delete all resource types, {len(msgs)} remaining: {', '.join(msgs)}")
        conditions = status.setdefault("conditions", [])
        changed = False
        for ctype in CONDITION_TYPES:
            new = self.new.get(ctype) or {"type": ctype, "status": "False", "lastTransitionTime": now_rfc3339(),
                                          "reason": OK_REASONS[ctype], "message": OK_MESSAGES[ctype]}
            old = next((c for c in conditions if c.get("type") == ctype), None)
            if old is None:
                conditions.append(new)
                changed = True
            elif (old.get("status"), old.get("message"), old.get("reason")) != \
                    (new["status"], new["message"], new["reason"]):
                if old.get("status") != new["status"]:
                    old["lastTransitionTime"] = now_rfc3339()
                old.update(status=new["status"], reason=new["reason"], message=new["message"])
                changed = True
        return changed


class NamespacedResourcesDeleter:
    """namespaced_resources_deleter.go."""

    def __init__(self, client: Client, log: DecisionLog, ordered: bool = True, clock=time.monotonic):
        self.client = client
        self.log = log
        self.ordered = ordered          # the OrderedNamespaceDeletion feature gate
        self.clock = clock              # time.Since(namespaceDeletedAt) is read on it (clock.wall)
        # discoverResourcesFn: (resources, failed group/versions); a scenario may pin it
        self.discover = discover_preferred_namespaced

    def _record(self, action: str, ns: dict | str, message: str, level: str = "info", **fields) -> None:
        name = ns if isinstance(ns, str) else ns["metadata"]["name"]
        uid = "" if isinstance(ns, str) else ns["metadata"].get("uid", "")
        self.log.record(CONTROLLER, action, {"apiVersion": "v1", "kind": "Namespace", "namespace": "", "name": name,
                                             "uid": uid}, f"namespace {name}: {message}", level=level, **fields)

    def delete(self, name: str) -> None:
        """Delete(): raises ResourcesRemaining or DeletionError while the namespace cannot be finalized."""
        try:
            ns = self.client.get("v1", "namespaces", name)
        except ApiError as exc:
            if exc.code == 404:
                self._record("skip", name, "gone → nothing to do", level="debug")
                return
            raise
        if not ns["metadata"].get("deletionTimestamp"):
            self._record("skip", ns, "not being deleted → nothing to do", level="debug")
            return
        if (ns.get("status") or {}).get("phase") != "Terminating":
            ns = self._retry_on_conflict(ns, self._set_terminating)
            if ns is None:
                return
        if not (ns.get("spec") or {}).get("finalizers"):
            self._record("skip", ns, "spec.finalizers is empty → already finalized, nothing to do", level="debug")
            return
        estimate = self.delete_all_content(ns)
        if estimate > 0:
            raise ResourcesRemaining(estimate)
        self._retry_on_conflict(ns, self._finalize)

    def _retry_on_conflict(self, ns: dict, fn):
        for _ in range(10):
            try:
                return fn(ns)
            except ApiError as exc:
                if exc.code == 404:
                    return None
                if exc.code != 409:
                    raise
            ns = self.client.get("v1", "namespaces", ns["metadata"]["name"])
        return fn(ns)

    def _set_terminating(self, ns: dict) -> dict:
        status = dict(ns.get("status") or {}, phase="Terminating")
        out = self.client.update("v1", "namespaces", dict(ns, status=status), subresource="status")
        self._record("terminating", ns, "being deleted but phase is not Terminating → set status.phase Terminating")
        return out

    def _finalize(self, ns: dict) -> dict:
        """finalizeNamespace: remove `kubernetes` from spec.finalizers through the finalize subresource
        (the remaining ones de-duplicated and sorted)."""
        remaining = sorted({f for f in (ns.get("spec") or {}).get("finalizers") or [] if f != FINALIZER})
        body = dict(ns, spec=dict(ns.get("spec") or {}, finalizers=remaining))
        out = self.client.update("v1", "namespaces", body, subresource="finalize")
        if remaining:
            self._record("finalize", ns, f"no content left → remove the {FINALIZER} finalizer (PUT …/finalize); "
                         f"spec.finalizers {remaining} remain, so the namespace stays until their owners remove them")
        else:
            self._record("finalize", ns, f"no content left → remove the {FINALIZER} finalizer (PUT …/finalize); "
                         + ("metadata.finalizers " + str(ns["metadata"]["finalizers"]) + " remain"
                            if ns["metadata"].get("finalizers") else "the API server removes the namespace"))
        return out

    # -- deleteAllContent ------------------------------------------------------------------------
    def delete_all_content(self, ns: dict) -> int:
        name = ns["metadata"]["name"]
        deleted_at = _parse_rfc3339(ns["metadata"]["deletionTimestamp"])
        errors: list[str] = []
        conditions = ConditionUpdater()
        estimate = 0
        try:
            resources, failed = self.discover(self.client)
        except ApiError as exc:
            resources, failed = [], {}
            errors.append(exc.message)
            conditions.new["NamespaceDeletionDiscoveryFailure"] = {
                "type": "NamespaceDeletionDiscoveryFailure", "status": "True", "lastTransitionTime": now_rfc3339(),
                "reason": "DiscoveryFailed", "message": exc.message}
        if failed:
            errors.append(discovery_error_message(failed))
            conditions.discovery_failed(failed)
            self._record("discovery-failed", ns, f"discovery failed for {', '.join(sorted(failed))} → delete what can "
                         "be seen, but do not finalize: resources of those groups cannot be proven gone",
                         failed=failed)
        deletable = [r for r in resources if "delete" in r.verbs]
        by_resource: dict[str, int] = {}
        by_finalizer: dict[str, int] = {}
        pods = next((r for r in deletable if r.group == "" and r.resource == "pods"), None)
        if self.ordered and pods is not None:
            deletable = [r for r in deletable if r is not pods]
            remaining, finalizers, pod_estimate, error = self._delete_resource(ns, pods, deleted_at)
            estimate = max(estimate, pod_estimate)
            if error:
                errors.append(error)
                conditions.delete_content_failed(error)
            if remaining:
                # pods first: wait for them before touching anything else (the conditions are
                # written without content totals)
                self._write_conditions(ns, conditions)
                self._record("wait-pods", ns, f"{remaining} pod(s) remain (estimate {pod_estimate} s) → "
                             "ordered deletion: wait for the pods before deleting other resources", level="info")
                if error:
                    raise DeletionError([f"failed to delete pods for namespace: {name}, err: {error}"])
                return estimate
        # upstream ranges over a Go map (random order); every resource is handled in this one pass
        for resource in sorted(deletable, key=lambda r: (r.group, r.resource)):
            remaining, finalizers, r_estimate, error = self._delete_resource(ns, resource, deleted_at)
            if error:
                errors.append(error)
                conditions.delete_content_failed(error)
            estimate = max(estimate, r_estimate)
            if remaining:
                by_resource[f"{resource.resource}.{resource.group}"] = remaining
                for f, n in finalizers.items():
                    by_finalizer[f] = by_finalizer.get(f, 0) + n
        conditions.content_totals(by_resource, by_finalizer)
        self._write_conditions(ns, conditions)
        if by_resource:
            what = ", ".join(f"{n} {gr}" for gr, n in sorted(by_resource.items()))
            held = ", ".join(f"{f} on {n}" for f, n in sorted(by_finalizer.items())) or "no finalizers"
            then = "retry with backoff (the error follows)" if errors else \
                f"check again in {estimate // 2 + 1} s (estimate {estimate} s)"
            self._record("content-remaining", ns, f"content remains ({what}; {held}) → {then}",
                         remaining=by_resource, finalizers=by_finalizer)
        if errors:
            raise DeletionError(errors)
        return estimate

    def _write_conditions(self, ns: dict, conditions: ConditionUpdater) -> None:
        status = dict(ns.get("status") or {})
        status["conditions"] = [dict(c) for c in status.get("conditions") or []]
        if conditions.update(status):
            try:
                out = self.client.update("v1", "namespaces", dict(ns, status=status), subresource="status")
                ns["status"], ns["metadata"] = out.get("status"), out["metadata"]
            except ApiError as exc:         # upstream logs it and carries on (HandleError)
                self._record("error", ns, f"updating the conditions failed: {exc.message}")

    def _delete_resource(self, ns: dict, resource: ApiResource, deleted_at: float):
        """deleteAllContentForGroupVersionResource: (remaining, finalizers -> count, estimate, error)."""
        name = ns["metadata"]["name"]
        try:
            estimate = self._estimate(resource, name, deleted_at)
            if "deletecollection" in resource.verbs and self._delete_collection(resource, name):
                pass
            else:
                self._delete_each(resource, name)
            items = self._list(resource, name)
        except ApiError as exc:
            return 0, {}, 0, exc.message
        if items is None or not items:
            return 0, {}, 0, None
        finalizers: dict[str, int] = {}
        for item in items:
            for f in item["metadata"].get("finalizers") or []:
                finalizers[f] = finalizers.get(f, 0) + 1
        if estimate:
            return len(items), finalizers, estimate, None
        if finalizers:
            return len(items), finalizers, FINALIZER_ESTIMATE_SECONDS, None
        return len(items), {}, estimate, (f"unexpected items still remain in namespace: {name} for gvr: "
                                          f"{gvr_string(resource)}")

    def _estimate(self, resource: ApiResource, namespace: str, deleted_at: float) -> int:
        """estimateGracefulTermination: pods only — the largest terminationGracePeriodSeconds of the
        non-terminal pods, or 0 once that long has passed since the namespace's deletionTimestamp."""
        if (resource.group, resource.resource) != ("", "pods"):
            return 0
        estimate = 0
        for pod in self.client.list("v1", "pods", namespace)[0]:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            if isinstance(grace, int) and grace > estimate:
                estimate = grace
        # estimateGracefulTermination: time.Since(namespaceDeletedAt) >= the estimate -> 0
        return 0 if wall(self.clock) - deleted_at >= estimate else estimate

    def _delete_collection(self, resource: ApiResource, namespace: str) -> bool:
        path = self.client.path(resource.api_version, resource.resource, namespace)
        code, body = self.client.request("DELETE", path, body={"propagationPolicy": "Background"})
        if code < 300:
            return True
        if code in (404, 405):          # MethodNotSupported or NotFound: list + delete, this pass only
            return False
        raise ApiError.from_status(code, body)

    def _delete_each(self, resource: ApiResource, namespace: str) -> None:
        items = self._list(resource, namespace)
        for item in items or []:
            path = self.client.path(resource.api_version, resource.resource, namespace, item["metadata"]["name"])
            code, body = self.client.request("DELETE", path, body={"propagationPolicy": "Background"})
            if code >= 300 and code not in (404, 405):
                raise ApiError.from_status(code, body)

    def _list(self, resource: ApiResource, namespace: str) -> list[dict] | None:
        if "list" not in resource.verbs:
            return None
        code, body = self.client.request("GET", self.client.path(resource.api_version, resource.resource, namespace))
        if code == 200:
            return body.get("items") or []
        if code in (404, 405):
            return None
        raise ApiError.from_status(code, body)


# -- the controller --------------------------------------------------------------------------

class NamespaceController:
    """namespace_controller.go: a queue of namespaces being deleted, each handed to the deleter."""

    name = CONTROLLER

    def __init__(self, client: Client, log: DecisionLog, grace_period: float = DELETION_GRACE_PERIOD,
                 ordered: bool = True, resync_period: float = NAMESPACE_SYNC_PERIOD, clock=None):
        self.client = client
        self.log = log
        self.grace_period = grace_period
        self.resync_period = resync_period
        # the delays (grace period, requeues) are on this clock; labkit.controllers.clock
        self.clock = clock or time.monotonic
        self.deleter = NamespacedResourcesDeleter(client, log, ordered, self.clock)
        self.running = False
        self.queue: RateLimitingQueue | None = None
        self.informer: Informer | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._due: dict[str, float] = {}        # name -> when its delayed pass after an event is due
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.running:
            return
        self._stop = threading.Event()
        self.queue = self.new_queue(self.clock)
        self.informer = Informer(self.client, ApiResource("", "v1", "namespaces", "Namespace", False, ()),
                                 on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new),
                                 on_delete=self._forget, resync_period=self.resync_period)
        self.informer.start()
        self.informer.wait_synced(30)
        self.running = True
        for i in range(WORKERS):
            t = threading.Thread(target=self._worker, daemon=True, name=f"{CONTROLLER}-{i}")
            t.start()
            self._threads.append(t)

    @staticmethod
    def new_queue(clock=time.monotonic) -> RateLimitingQueue:
        """NewTypedItemExponentialFailureRateLimiter(5ms, 60s) with the default overall bucket."""
        return RateLimitingQueue(CONTROLLER, base_delay=0.005, max_delay=60.0, clock=clock)

    def wait_synced(self, timeout: float) -> bool:
        return self.informer is not None and self.informer.wait_synced(timeout)

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        self._stop.set()
        self.queue.shutdown()
        self.informer.stop()
        for t in self._threads:
            t.join(timeout=5)
        self._threads = []

    def busy(self) -> bool:
        """Work in hand now: a change not yet handled, a namespace queued or in a pass (a pass
        waiting for its time does not count)."""
        return self.running and (not self.informer.idle() or self.queue.busy())

    def idle(self) -> bool:
        if not self.running:
            return True
        now = self.clock()
        with self._lock:
            self._due = {n: t for n, t in self._due.items() if t > now}
            if self._due:           # a pass is due after a change it saw: not idle yet
                return False
        return self.queue.idle() and self.informer.idle()

    def _enqueue(self, ns: dict) -> None:
        """enqueueNamespace: only namespaces being deleted, namespaceDeletionGracePeriod after the event."""
        if not ns["metadata"].get("deletionTimestamp") or self.queue is None:
            return
        name = ns["metadata"]["name"]
        with self._lock:
            self._due[name] = max(self._due.get(name, 0.0), self.clock() + self.grace_period)
        self.queue.add_after(name, self.grace_period)

    def _forget(self, ns: dict) -> None:
        """The namespace is gone: a pass still due for it would find nothing to do."""
        with self._lock:
            self._due.pop(ns["metadata"]["name"], None)

    def _worker(self) -> None:
        while not self._stop.is_set():
            name = self.queue.get()         # None once stop() shut the queue down
            if name is not None:
                self.process(name)

    def process(self, name: str) -> None:
        """One pass over a namespace taken from the queue (the worker's workFunc) and its requeue."""
        try:
            self.deleter.delete(name)
            self.queue.forget(name)
        except ResourcesRemaining as exc:
            # "some content remains": check again after estimate/2 + 1 seconds (namespace_controller.go)
            self.queue.add_after(name, exc.estimate // 2 + 1)     # int64 arithmetic: 15 s -> 8 s
        except DeletionError as exc:
            delay = self.queue.when(name)
            self.log.record(CONTROLLER, "retry", {"apiVersion": "v1", "kind": "Namespace", "namespace": "",
                                                  "name": name, "uid": ""},
                            f"namespace {name}: deletion failed: {exc} → not finalized; retry with backoff "
                            f"(in {delay:.2f} s)")
            self.queue.add_after(name, delay)
        except Exception as exc:
            self.log.record(CONTROLLER, "error", None, f"namespace {name}: {exc} → retry with backoff")
            self.queue.add_rate_limited(name)
        finally:
            self.queue.done(name)
