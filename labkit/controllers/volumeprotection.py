"""The PVC and PV protection controllers (pkg/controller/volume/pvcprotection/
pvc_protection_controller.go and pkg/controller/volume/pvprotection/pv_protection_controller.go,
processPVC / processPV):

- a PersistentVolumeClaim keeps kubernetes.io/pvc-protection while it is used: while any pod of
  its namespace that is bound to a node (spec.nodeName set) has a volume with that claimName
  (podUsesPVC — whatever the pod's phase, and also while it is being deleted: the kubelet must
  unmount it first); once the claim is being deleted and no such pod remains (checked in the cache,
  then with a live list), the finalizer is removed and the claim goes;
- a PersistentVolume keeps kubernetes.io/pv-protection while it is Bound (status.phase); once it
  is being deleted and not bound, the finalizer is removed;
- both add their finalizer to an object that is not being deleted and lacks it (admission adds it
  on create; the controllers repair objects made without it).

A pod that goes away re-examines the claims it used.
"""

from __future__ import annotations

from labkit.apiserver.errors import ApiError
from labkit.apiserver.storageprotection import PV_PROTECTION, PVC_PROTECTION
from labkit.controllers.base import KeyedController

PVC_CONTROLLER, PV_CONTROLLER = "pvc-protection", "pv-protection"


def claims_of(pod: dict) -> list[str]:
    return [v["persistentVolumeClaim"]["claimName"] for v in (pod.get("spec") or {}).get("volumes") or []
            if (v.get("persistentVolumeClaim") or {}).get("claimName")]


def pod_uses_claim(pod: dict, claim: str) -> bool:
    """podUsesPVC: only scheduled pods count (a kubelet never starts a pod whose claim is being deleted)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and claim in claims_of(pod)


class _Protection(KeyedController):
    finalizer = ""
    api_version, resource = "v1", ""

    def _set_finalizers(self, obj: dict, finalizers: list[str]) -> None:
        meta = obj["metadata"]
        patch = {"metadata": {"finalizers": finalizers or None, "resourceVersion": meta["resourceVersion"]}}
        try:
            self.client.patch(self.api_version, self.resource, meta["name"], patch, "merge", meta.get("namespace"))
        except ApiError as exc:
            if exc.code != 404:
                raise

    def process(self, obj: dict, in_use) -> None:
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        what = f"{obj['kind']} {meta.get('namespace') + '/' if meta.get('namespace') else ''}{meta['name']}"
        if meta.get("deletionTimestamp"):
            if self.finalizer not in finalizers:
                return
            user = in_use()
            if user:
                self.log.record(self.name, "keep", None, f"{what} is being deleted but {user} → keep {self.finalizer}")
                return
            self._set_finalizers(obj, [f for f in finalizers if f != self.finalizer])
            self.log.record(self.name, "release", None, f"{what} is being deleted and no longer in use → remove "
                            f"{self.finalizer}")
        elif self.finalizer not in finalizers:
            self._set_finalizers(obj, finalizers + [self.finalizer])


class PVCProtectionController(_Protection):
    name = PVC_CONTROLLER
    user = "system:serviceaccount:kube-system:pvc-protection-controller"
    finalizer, resource = PVC_PROTECTION, "persistentvolumeclaims"

    def make_informers(self):
        def pod_changed(*pods):
            for pod in pods:
                for claim in claims_of(pod):
                    self.queue.add(f"{pod['metadata']['namespace']}/{claim}")
        return {"claims": self.informer("v1", self.resource, "PersistentVolumeClaim", on_add=self.enqueue,
                                        on_update=lambda old, new: self.enqueue(new)),
                "pods": self.informer("v1", "pods", "Pod", on_add=pod_changed, on_update=pod_changed,
                                      on_delete=pod_changed)}

    def sync(self, key: str) -> None:
        claim = self.informers["claims"].get(key)
        if claim is None:
            return
        namespace, name = key.split("/", 1)

        def in_use():
            for pod in self.informers["pods"].list(namespace):
                if pod_uses_claim(pod, name):
                    return f"pod {pod['metadata']['name']} uses it"
            for pod in self.client.list("v1", "pods", namespace)[0]:       # askAPIServer: a live list
                if pod_uses_claim(pod, name):
                    return f"pod {pod['metadata']['name']} uses it"
            return None
        self.process(claim, in_use)


class PVProtectionController(_Protection):
    name = PV_CONTROLLER
    user = "system:serviceaccount:kube-system:pv-protection-controller"
    finalizer, resource = PV_PROTECTION, "persistentvolumes"

    def make_informers(self):
        return {"volumes": self.informer("v1", self.resource, "PersistentVolume", namespaced=False,
                                         on_add=self.enqueue, on_update=lambda old, new: self.enqueue(new))}

    def sync(self, key: str) -> None:
        volume = self.informers["volumes"].get(key)
        if volume is None:
            return
        self.process(volume, lambda: "it is Bound" if (volume.get("status") or {}).get("phase") == "Bound" else None)
