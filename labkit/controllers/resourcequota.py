"""The resource quota controller (pkg/controller/resourcequota/resource_quota_controller.go,
Controller.syncResourceQuota): each ResourceQuota's status.hard is its spec.hard and its
status.used what the namespace's objects are charged for the resources it limits
(labkit.apiserver.admission.resourcequota.calculate_usage), zeros included; the status is written
only when it changed. A quota is synced when it is added or its spec changes, and the quotas of a
namespace when a Pod there is added, changes phase or is deleted (the replenishment controller's
pod handler); other objects' counts are recalculated at those syncs and at the full resync every
5 minutes (--resource-quota-sync-period), the admission plugin charging creates in between."""

from __future__ import annotations

import threading

from labkit.apiserver.admission.resourcequota import calculate_usage, counted_kinds
from labkit.apiserver.errors import ApiError
from labkit.controllers.base import KeyedController

CONTROLLER = "resourcequota"
RESYNC_PERIOD = 300.0       # --resource-quota-sync-period default


class ResourceQuotaController(KeyedController):
    name = CONTROLLER
    user = "system:serviceaccount:kube-system:resourcequota-controller"

    def make_informers(self):
        def namespace_of(obj):
            self.queue.add(obj["metadata"]["namespace"])

        def pod_changed(old, new):
            # replenishment: a Pod whose phase or deletion changed frees or takes compute quota
            if ((old.get("status") or {}).get("phase") != (new.get("status") or {}).get("phase")
                    or (old["metadata"].get("deletionTimestamp") != new["metadata"].get("deletionTimestamp"))):
                namespace_of(new)

        def quota_changed(old, new):
            if old.get("spec") != new.get("spec") or (new.get("status") or {}).get("hard") != (
                    (new.get("spec") or {}).get("hard") or {}):
                namespace_of(new)
        return {
            "resourcequotas": self.informer("v1", "resourcequotas", "ResourceQuota", on_add=namespace_of,
                                            on_update=quota_changed),
            "pods": self.informer("v1", "pods", "Pod", on_add=namespace_of, on_update=pod_changed,
                                  on_delete=namespace_of),
        }

    def start(self) -> None:
        super().start()
        stop = self._stop
        threading.Thread(target=self._resync, args=(stop,), name=f"{self.name}-resync", daemon=True).start()

    def _resync(self, stop: threading.Event) -> None:
        while not stop.wait(RESYNC_PERIOD):
            for quota in self.informers["resourcequotas"].list():
                self.queue.add(quota["metadata"]["namespace"])

    def sync(self, namespace: str) -> None:
        # a failed status write (a conflict with the admission plugin's, a transient error) fails
        # the sync after the namespace's other quotas are written: the worker requeues the key
        # rate-limited and does not forget its backoff (resource_quota_controller.go worker:
        # AddRateLimited on any error of syncResourceQuotaFromKey)
        failure: ApiError | None = None
        for quota in self.informers["resourcequotas"].list(namespace):
            hard = dict((quota.get("spec") or {}).get("hard") or {})
            objects = {}
            for group, resource in counted_kinds(hard):
                if (group, resource) == ("", "pods"):
                    objects[(group, resource)] = self.informers["pods"].list(namespace)
                    continue
                try:
                    listed, _ = self.client.list(f"{group}/v1" if group else "v1", resource, namespace)
                except ApiError:
                    continue    # a kind this server does not serve counts nothing
                objects[(group, resource)] = listed
            status = {"hard": hard, "used": calculate_usage(quota, objects)}
            if quota.get("status") == status:
                continue
            try:
                self.client.update("v1", "resourcequotas", dict(quota, status=status), namespace, subresource="status")
            except ApiError as exc:
                if exc.code != 404:
                    failure = failure or exc
                continue
            self.log.record(self.name, "update-status", None,
                            f"resourcequota {namespace}/{quota['metadata']['name']}: used {status['used']}",
                            level="debug")
        if failure is not None:
            raise failure
