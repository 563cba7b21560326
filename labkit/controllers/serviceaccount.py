"""The service-account controller (pkg/controller/serviceaccount/serviceaccounts_controller.go,
ServiceAccountsController.syncNamespace): every Active namespace has a ServiceAccount `default`.
It looks again at a namespace when the namespace is added or updated, and when one of its
ServiceAccounts is deleted, so a deleted `default` comes back; a namespace that is gone or not
Active is left alone (so namespace deletion removes the account with everything else), and a
create refused because the namespace is terminating is not retried."""

from __future__ import annotations

from labkit.apiserver.errors import ApiError
from labkit.controllers.base import KeyedController

CONTROLLER = "serviceaccount"
# serviceaccounts_controller.go DefaultServiceAccountsControllerOptions: ServiceAccounts: [{Name: "default"}]
MANAGED = ("default",)


def terminating_refusal(exc: ApiError) -> bool:
    """The 403 NamespaceLifecycle answers a create in a terminating namespace (cause NamespaceTerminating)."""
    causes = (exc.details or {}).get("causes") or []
    return exc.code == 403 and any(c.get("reason") == "NamespaceTerminating" for c in causes)


class ServiceAccountsController(KeyedController):
    name = CONTROLLER
    user = "system:serviceaccount:kube-system:service-account-controller"

    def make_informers(self):
        def by_namespace(obj):
            self.queue.add(obj["metadata"]["namespace"])
        return {
            "namespaces": self.informer("v1", "namespaces", "Namespace", namespaced=False, on_add=self.enqueue,
                                        on_update=lambda old, new: self.enqueue(new)),
            "serviceaccounts": self.informer("v1", "serviceaccounts", "ServiceAccount", on_delete=by_namespace),
        }

    def sync(self, namespace: str) -> None:
        ns = self.informers["namespaces"].get(namespace)
        if ns is None or (ns.get("status") or {}).get("phase") != "Active":
            return      # gone or terminating: nothing to do
        for name in MANAGED:
            if self.informers["serviceaccounts"].get(f"{namespace}/{name}") is not None:
                continue
            try:
                self.client.create("v1", "serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                             "metadata": {"name": name}}, namespace)
            except ApiError as exc:
                if exc.code in (404, 409) or terminating_refusal(exc):
                    continue
                raise
            self.log.record(self.name, "create", None, f"namespace {namespace}: no ServiceAccount {name} → create it",
                            level="debug")
