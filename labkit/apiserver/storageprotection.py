"""The StorageObjectInUseProtection admission plugin
(plugin/pkg/admission/storage/storageobjectinuseprotection/admission.go, Admit), enabled by
default: every PersistentVolumeClaim created gets the finalizer kubernetes.io/pvc-protection and
every PersistentVolume kubernetes.io/pv-protection, unless it already has it. The PVC and PV
protection controllers (labkit.controllers.volumeprotection) remove them once the object is
being deleted and no longer in use."""

from __future__ import annotations

PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
FINALIZERS = {("", "persistentvolumeclaims"): PVC_PROTECTION, ("", "persistentvolumes"): PV_PROTECTION}


def storage_object_in_use_protection(request) -> None:
    """Admission on CREATE: add the protection finalizer (a mutation of the object being created)."""
    finalizer = FINALIZERS.get((request.rt.group, request.rt.resource))
    if request.operation != "CREATE" or finalizer is None or request.subresource or request.obj is None:
        return
    meta = request.obj.setdefault("metadata", {})
    if finalizer not in (meta.get("finalizers") or []):
        meta["finalizers"] = list(meta.get("finalizers") or []) + [finalizer]
