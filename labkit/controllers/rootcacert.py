"""The root CA certificate publisher (pkg/controller/certificates/rootcacertpublisher/publisher.go,
Publisher.syncNamespace): every namespace has a ConfigMap `kube-root-ca.crt` holding the
cluster's CA bundle (`ca.crt`, what the controller manager's --root-ca-file names; here the
embedded server's CA) and the annotation kubernetes.io/description. It looks again at a
namespace when it is added or updated while Active, and when that ConfigMap is updated or
deleted: a deleted one comes back, an edited one is put right. A create refused because the
namespace is gone or terminating is not retried, so namespace deletion removes it like the rest."""

from __future__ import annotations

from labkit.apiserver.errors import ApiError
from labkit.controllers.base import KeyedController
from labkit.controllers.serviceaccount import terminating_refusal

CONTROLLER = "root-ca-cert-publisher"
CONFIGMAP = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")


class RootCACertPublisher(KeyedController):
    name = CONTROLLER
    user = "system:serviceaccount:kube-system:root-ca-cert-publisher"

    def __init__(self, client, log, root_ca: bytes):
        super().__init__(client, log)
        self.root_ca = root_ca.decode()

    def make_informers(self):
        def namespace_updated(_old, new):
            if (new.get("status") or {}).get("phase") == "Active":
                self.enqueue(new)

        def configmap_changed(*objs):
            cm = objs[-1]
            if cm["metadata"]["name"] == CONFIGMAP:
                self.queue.add(cm["metadata"]["namespace"])
        return {
            "namespaces": self.informer("v1", "namespaces", "Namespace", namespaced=False, on_add=self.enqueue,
                                        on_update=namespace_updated),
            "configmaps": self.informer("v1", "configmaps", "ConfigMap", on_update=configmap_changed,
                                        on_delete=configmap_changed),
        }

    def sync(self, namespace: str) -> None:
        data = {"ca.crt": self.root_ca}
        cm = self.informers["configmaps"].get(f"{namespace}/{CONFIGMAP}")
        if cm is None:
            try:
                self.client.create("v1", "configmaps", {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": CONFIGMAP, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": data}, namespace)
            except ApiError as exc:
                if exc.code == 404 or terminating_refusal(exc):
                    return      # the namespace is gone or terminating: do not retry
                raise
            self.log.record(self.name, "create", None, f"namespace {namespace}: no ConfigMap {CONFIGMAP} → publish "
                            "the root CA bundle", level="debug")
            return
        annotations = cm["metadata"].get("annotations") or {}
        if cm.get("data") == data and annotations.get(DESCRIPTION_ANNOTATION):
            return
        meta = dict(cm["metadata"], annotations=dict(annotations, **{DESCRIPTION_ANNOTATION: DESCRIPTION}))
        self.client.update("v1", "configmaps", dict(cm, metadata=meta, data=data), namespace)
        self.log.record(self.name, "update", None, f"namespace {namespace}: ConfigMap {CONFIGMAP} differs from the "
                        "root CA bundle → put it right", level="debug")
