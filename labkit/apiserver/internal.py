"""Controllers that run inside kube-apiserver itself, in their embedded form:

- the CRD finalizer (apiextensions-apiserver pkg/controller/finalizer): a CustomResourceDefinition
  being deleted gets condition Terminating, all its custom resources are deleted, then its
  `customresourcecleanup.apiextensions.k8s.io` finalizer is removed, which removes the CRD;
- APIService auto-registration (kube-aggregator's autoregister and crdregistration controllers):
  a local APIService `<version>.<group>` for every served built-in and custom group/version; a
  built-in one is made once per start (deleted, it stays deleted), a custom resource's whenever
  it is missing;
- APIService availability: kube-aggregator's remote AvailableConditionController, in
  availability.py.
"""

from __future__ import annotations

import queue
import sys
import threading
import time

from labkit.apiserver.availability import AvailableConditionController
from labkit.apiserver.client import LocalClient
from labkit.apiserver.discovery import user_agent
from labkit.apiserver.errors import ApiError
from labkit.apiserver.timestamps import now_rfc3339
from labkit.apiserver.registry.apiextensions import CRD_CLEANUP_FINALIZER
from labkit.apiserver.storage import Event

CRD_KEY = "apiextensions.k8s.io/customresourcedefinitions"
APISERVICES_KEY = "apiregistration.k8s.io/apiservices"
AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
# kube-aggregator's apiVersionPriorities: (groupPriorityMinimum, versionPriority) of the built-in
# group/versions; other versions of a built-in group get the group's priority and version 15
BUILTIN_PRIORITY = {"": 18000, "apiregistration.k8s.io": 18000, "apps": 17800, "events.k8s.io": 17750,
                    "authentication.k8s.io": 17700, "authorization.k8s.io": 17600, "autoscaling": 17500,
                    "batch": 17400, "rbac.authorization.k8s.io": 17000, "apiextensions.k8s.io": 16700,
                    "coordination.k8s.io": 16500, "discovery.k8s.io": 16200}
VERSION_PRIORITY = {("", "v1"): 1, ("autoscaling", "v2"): 30}


class ApiServerInternals:
    def __init__(self, api):
        self.api = api
        self.registry = api.registry
        self.client = LocalClient(api, "system:apiserver", ["system:masters"], user_agent=user_agent("kube-apiserver"))
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True, name="apiserver-internal")
        self._pending = 0
        self._lock = threading.Lock()
        self.availability = AvailableConditionController(api)
        self._synced_once: set[str] = set()     # built-in APIServices synced since this start
        self._stopping = threading.Event()

    def start(self) -> None:
        self.registry.store.add_listener(self._on_event)
        self._thread.start()
        self.availability.start()
        self._enqueue(("apiservices", None))
        for crd in self.registry.store.list(CRD_KEY)[0]:
            self._enqueue(("crd", crd["metadata"]["name"]))

    def stop(self) -> None:
        # the server closes its store right after: an item cut off by that is no error to report
        # (it was, as "storage is closed (retrying)" on stderr, when a server stopped while it
        # still registered its APIServices)
        self._stopping.set()
        self.registry.store.remove_listener(self._on_event)
        self._queue.put(None)
        self.availability.stop()

    def idle(self) -> bool:
        with self._lock:
            return self._pending == 0 and self.availability.idle()

    def _enqueue(self, item) -> None:
        with self._lock:
            self._pending += 1
        self._queue.put(item)

    def _on_event(self, event: Event) -> None:
        if event.key == CRD_KEY:
            self._enqueue(("crd", event.name))
            self._enqueue(("apiservices", None))
        elif event.key == APISERVICES_KEY and event.type == "DELETED":
            # the autoregister controller's informer requeues a deleted APIService's name
            self._enqueue(("apiservices", None))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                if item[0] == "crd":
                    self._finalize_crd(item[1])
                else:
                    self._register_apiservices()
            except ApiError as exc:
                if self._stopping.is_set():
                    return
                print(f"labkit-apiserver: {item[0]} {item[1] or ''}: {exc.message} (retrying)", file=sys.stderr)
                time.sleep(0.2)
                self._queue.put(item)      # retried; the pending count stays
                continue
            except Exception as exc:
                if self._stopping.is_set():
                    return
                print(f"labkit-apiserver: {item[0]} {item[1] or ''}: {exc!r}", file=sys.stderr)
            with self._lock:
                self._pending -= 1

    # -- CRD finalizer -----------------------------------------------------------------------------
    def _finalize_crd(self, name: str) -> None:
        try:
            crd = self.client.get("apiextensions.k8s.io/v1", "customresourcedefinitions", name)
        except ApiError as exc:
            if exc.code == 404:
                return
            raise
        meta = crd["metadata"]
        if not meta.get("deletionTimestamp") or CRD_CLEANUP_FINALIZER not in (meta.get("finalizers") or []):
            return
        crd = self._set_terminating(crd, "InstanceDeletionInProgress", "CustomResource deletion is in progress")
        for rt in self.registry.crd_types(name)[:1]:
            items, _ = self.registry.list(rt, None)
            for item in items:
                try:
                    self.registry.delete(rt, item["metadata"].get("namespace"), item["metadata"]["name"], {})
                except ApiError as exc:
                    if exc.code != 404:
                        raise
            remaining, _ = self.registry.list(rt, None)
            if remaining:
                raise ApiError(409, "Conflict", f"{len(remaining)} custom resources of {name} remain")
        crd = self._set_terminating(crd, "InstanceDeletionCompleted", "removed all instances")
        finalizers = [f for f in crd["metadata"].get("finalizers") or [] if f != CRD_CLEANUP_FINALIZER]
        self.client.patch("apiextensions.k8s.io/v1", "customresourcedefinitions", name,
                          {"metadata": {"finalizers": finalizers or None,
                                        "resourceVersion": crd["metadata"]["resourceVersion"]}}, "merge")

    def _set_terminating(self, crd: dict, reason: str, message: str) -> dict:
        status = dict(crd.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Terminating"]
        conditions.append({"type": "Terminating", "status": "True", "reason": reason, "message": message,
                           "lastTransitionTime": now_rfc3339()})
        status["conditions"] = conditions
        return self.client.update("apiextensions.k8s.io/v1", "customresourcedefinitions", dict(crd, status=status),
                                  subresource="status")

    # -- APIService registration -------------------------------------------------------------------
    def _register_apiservices(self) -> None:
        wanted = {}
        for group, versions in self.registry.catalog.groups():
            for i, version in enumerate(versions):
                priority = VERSION_PRIORITY.get((group, version), 15) if group in BUILTIN_PRIORITY else 15 - i
                wanted[f"{version}.{group}"] = {"group": group, "version": version,
                                                "groupPriorityMinimum": BUILTIN_PRIORITY.get(group, 1000),
                                                "versionPriority": priority}
        existing, _ = self.client.list("apiregistration.k8s.io/v1", "apiservices")
        have = {a["metadata"]["name"]: a for a in existing}
        for name, spec in wanted.items():
            # kube-aggregator autoregister_controller.go checkAPIService: a built-in group's APIService
            # (automanaged "onstart", pkg/controlplane/apiserver aggregator.go) is created once per
            # start (2B): deleted after that, it stays deleted until kube-apiserver restarts; a
            # custom resource's (automanaged "true", crdregistration_controller.go) is created
            # whenever it is missing (2C)
            once = spec["group"] in BUILTIN_PRIORITY
            if once and name in self._synced_once:
                continue
            if once:
                self._synced_once.add(name)
            if name not in have:
                obj = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                       "metadata": {"name": name, "labels": {AUTOMANAGED: "onstart" if spec["group"] in
                                                             BUILTIN_PRIORITY else "true"}},
                       "spec": spec}
                try:
                    self.client.create("apiregistration.k8s.io/v1", "apiservices", obj)
                except ApiError as exc:
                    if exc.code != 409:
                        raise
        for name, obj in have.items():
            if name not in wanted and (obj["metadata"].get("labels") or {}).get(AUTOMANAGED) == "true":
                try:
                    self.client.delete("apiregistration.k8s.io/v1", "apiservices", name)
                except ApiError as exc:
                    if exc.code != 404:
                        raise
