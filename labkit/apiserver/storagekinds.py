"""storage.k8s.io/v1 StorageClass, CSIDriver and VolumeAttachment: their defaults, strategies,
validation and printers. All three are cluster-scoped.

StorageClass (pkg/registry/storage/storageclass/strategy.go; pkg/apis/storage/validation/
validation.go ValidateStorageClass, ValidateStorageClassUpdate; pkg/apis/storage/v1/defaults.go
SetDefaults_StorageClass): reclaimPolicy defaults to Delete and volumeBindingMode to Immediate;
provisioner is required and a qualified name; parameters, provisioner and reclaimPolicy may not
change ("updates to ... are forbidden."), volumeBindingMode is immutable.

CSIDriver (pkg/registry/storage/csidriver/strategy.go; validation.go ValidateCSIDriver,
ValidateCSIDriverUpdate; defaults.go SetDefaults_CSIDriver): attachRequired defaults to true,
podInfoOnMount, storageCapacity, requiresRepublish and seLinuxMount to false, fsGroupPolicy to
ReadWriteOnceWithFSType, volumeLifecycleModes to [Persistent]; attachRequired (reported at
upstream's own path `spec.attachedRequired`) and volumeLifecycleModes are immutable.

VolumeAttachment (pkg/registry/storage/volumeattachment/strategy.go; validation.go
ValidateVolumeAttachment, ValidateVolumeAttachmentV1, ValidateVolumeAttachmentUpdate): a status
subresource, the status dropped on create and kept on update; spec.attacher required, exactly
one of source.persistentVolumeName and source.inlineVolumeSpec, a valid nodeName; the spec is
read-only after creation. The attach/detach controller and the external attacher that would
create and attach them are not reconstructed: a VolumeAttachment is only what someone posts.
"""

from __future__ import annotations

from labkit.apiserver import defaults, tables
from labkit.apiserver.errors import FieldError, RawJSON, field_forbidden, field_invalid, field_required, field_unsupported
from labkit.apiserver.resources import ResourceType, StatusSubresource, Strategy
from labkit.apiserver.validation import dns1123_subdomain_problems, qualified_name_problems

# pkg/apis/storage/validation/validation.go
MAX_PROVISIONER_PARAMETER_SIZE = 256 * (1 << 10)
MAX_PROVISIONER_PARAMETER_LEN = 512
SUPPORTED_RECLAIM_POLICIES = ["Delete", "Retain"]
SUPPORTED_BINDING_MODES = ["Immediate", "WaitForFirstConsumer"]
SUPPORTED_FS_GROUP_POLICIES = ["File", "None", "ReadWriteOnceWithFSType"]
VOLUME_LIFECYCLE_MODES = ["Persistent", "Ephemeral"]
# pkg/apis/storage/util/helpers.go IsDefaultAnnotation
DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")


# -- defaults (pkg/apis/storage/v1/defaults.go) ---------------------------------------------------

@defaults.defaulter("V1StorageClass")
def storage_class(obj: dict) -> None:
    # SetDefaults_StorageClass
    if obj.get("reclaimPolicy") is None:
        obj["reclaimPolicy"] = "Delete"
    if obj.get("volumeBindingMode") is None:
        obj["volumeBindingMode"] = "Immediate"


@defaults.defaulter("V1CSIDriver")
def csi_driver(obj: dict) -> None:
    # SetDefaults_CSIDriver (SELinuxMountReadWriteOncePod is on in 1.34: seLinuxMount defaults too)
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    for key, value in (("attachRequired", True), ("podInfoOnMount", False), ("storageCapacity", False),
                       ("fsGroupPolicy", "ReadWriteOnceWithFSType"), ("requiresRepublish", False),
                       ("seLinuxMount", False)):
        if spec.get(key) is None:
            spec[key] = value
    if not spec.get("volumeLifecycleModes"):
        spec["volumeLifecycleModes"] = ["Persistent"]


# -- StorageClass -------------------------------------------------------------------------------------

def is_default_class(obj: dict) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)


def _storage_class_row(obj):
    # printers.go printStorageClass
    name = tables._name(obj) + (" (default)" if is_default_class(obj) else "")
    return [name, obj.get("provisioner", ""), obj.get("reclaimPolicy") or "Delete",
            obj.get("volumeBindingMode") or "Immediate", bool(obj.get("allowVolumeExpansion", False)),
            tables.age(obj)]


# printers.go storageClassColumnDefinitions
STORAGE_CLASS_PRINTER = ([tables.NAME, tables._col("Provisioner"), tables._col("ReclaimPolicy"),
                          tables._col("VolumeBindingMode"), tables._col("AllowVolumeExpansion"), tables.AGE],
                         _storage_class_row)


def _parameters_problems(params) -> list[FieldError]:
    """validateParameters (allowEmpty for StorageClass)."""
    if not isinstance(params, dict):
        return []
    if len(params) > MAX_PROVISIONER_PARAMETER_LEN:
        return [FieldError("Too long", "parameters", f"may not be more than {MAX_PROVISIONER_PARAMETER_LEN} bytes")]
    errors, total = [], 0
    for key, value in params.items():
        if not key:
            errors.append(field_invalid("parameters", key, "field can not be empty."))
        total += len(key) + len(str(value))
    if total > MAX_PROVISIONER_PARAMETER_SIZE:
        errors.append(FieldError("Too long", "parameters", f"may not be more than {MAX_PROVISIONER_PARAMETER_SIZE} "
                                 "bytes"))
    return errors


class StorageClassStrategy(Strategy):
    printer = STORAGE_CLASS_PRINTER
    # storageclass/storage/storage.go: ReturnDeletedObject (the three kinds' DELETE answers the
    # object, as the OpenAPI document's delete responses, and so the typed clients, expect)
    return_deleted_object = True

    def validate(self, obj):
        errors: list[FieldError] = []
        provisioner = obj.get("provisioner") or ""
        if not provisioner:
            errors.append(field_required("provisioner"))
        else:
            # validateProvisioner: ValidateQualifiedName of the lower-cased name
            errors += [field_invalid("provisioner", provisioner.lower(), msg)
                       for msg in qualified_name_problems(provisioner.lower())]
        errors += _parameters_problems(obj.get("parameters"))
        policy = obj.get("reclaimPolicy") or ""
        if policy and policy not in SUPPORTED_RECLAIM_POLICIES:
            errors.append(field_unsupported("reclaimPolicy", policy, SUPPORTED_RECLAIM_POLICIES))
        mode = obj.get("volumeBindingMode")
        if mode is None:
            errors.append(field_required("volumeBindingMode"))
        elif mode not in SUPPORTED_BINDING_MODES:
            errors.append(field_unsupported("volumeBindingMode", mode, SUPPORTED_BINDING_MODES))
        return errors

    def validate_update(self, new, old):
        # ValidateStorageClassUpdate (the strategy's ValidateUpdate runs ValidateStorageClass too)
        errors = self.validate(new)
        if (new.get("parameters") or {}) != (old.get("parameters") or {}):
            errors.append(field_forbidden("parameters", "updates to parameters are forbidden."))
        if new.get("provisioner") != old.get("provisioner"):
            errors.append(field_forbidden("provisioner", "updates to provisioner are forbidden."))
        if new.get("reclaimPolicy") != old.get("reclaimPolicy"):
            errors.append(field_forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
        if new.get("volumeBindingMode") != old.get("volumeBindingMode"):
            errors.append(field_invalid("volumeBindingMode", new.get("volumeBindingMode"), "field is immutable"))
        return errors


# -- CSIDriver ---------------------------------------------------------------------------------------

def _csi_driver_row(obj):
    # printers.go printCSIDriver
    spec = obj.get("spec") or {}
    token_requests = spec.get("tokenRequests")
    tokens = "<unset>" if token_requests is None else ",".join(t.get("audience", "") for t in token_requests)
    modes = ",".join(spec.get("volumeLifecycleModes") or []) or "<none>"
    return [tables._name(obj), spec.get("attachRequired", True) is not False, bool(spec.get("podInfoOnMount")),
            bool(spec.get("storageCapacity")), tokens, bool(spec.get("requiresRepublish")), modes, tables.age(obj)]


# printers.go csiDriverColumnDefinitions
CSI_DRIVER_PRINTER = ([tables.NAME, tables._col("AttachRequired", "boolean"), tables._col("PodInfoOnMount", "boolean"),
                       tables._col("StorageCapacity", "boolean"), tables._col("TokenRequests"),
                       tables._col("RequiresRepublish", "boolean"), tables._col("Modes"), tables.AGE],
                      _csi_driver_row)


class CSIDriverStrategy(Strategy):
    printer = CSI_DRIVER_PRINTER
    return_deleted_object = True        # csidriver/storage/storage.go

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors: list[FieldError] = []
        # validateCSIDriverSpec: upstream's path for attachRequired is spec.attachedRequired
        for key, path in (("attachRequired", "spec.attachedRequired"), ("podInfoOnMount", "spec.podInfoOnMount"),
                          ("storageCapacity", "spec.storageCapacity"), ("seLinuxMount", "spec.seLinuxMount")):
            if spec.get(key) is None:
                errors.append(field_required(path))
        policy = spec.get("fsGroupPolicy")
        if policy is not None and policy not in SUPPORTED_FS_GROUP_POLICIES:
            errors.append(field_unsupported("spec.fsGroupPolicy", policy, SUPPORTED_FS_GROUP_POLICIES))
        seen: set[str] = set()
        for i, request in enumerate(spec.get("tokenRequests") or []):
            audience = request.get("audience", "")
            if audience in seen:
                errors.append(FieldError("Duplicate value", f"spec.tokenRequests[{i}].audience", "", audience, True))
                continue
            seen.add(audience)
            seconds = request.get("expirationSeconds")
            if seconds is None:
                continue
            if seconds < 600:
                errors.append(field_invalid(f"spec.tokenRequests[{i}].expirationSeconds", seconds,
                                            "may not specify a duration less than 10 minutes"))
            if seconds > 1 << 32:
                errors.append(field_invalid(f"spec.tokenRequests[{i}].expirationSeconds", seconds,
                                            "may not specify a duration larger than 2^32 seconds"))
        for mode in spec.get("volumeLifecycleModes") or []:
            if mode not in VOLUME_LIFECYCLE_MODES:
                errors.append(field_unsupported("spec.volumeLifecycleModes", mode, VOLUME_LIFECYCLE_MODES))
        period = spec.get("nodeAllocatableUpdatePeriodSeconds")
        if isinstance(period, int) and period < 10:
            errors.append(field_invalid("spec.nodeAllocatableUpdatePeriodSeconds", period,
                                        "must be greater than or equal to 10 seconds"))
        return errors

    def validate_update(self, new, old):
        # ValidateCSIDriverUpdate
        errors = self.validate(new)
        new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        if new_spec.get("attachRequired") != old_spec.get("attachRequired"):
            errors.append(field_invalid("spec.attachedRequired", new_spec.get("attachRequired"), "field is immutable"))
        if new_spec.get("volumeLifecycleModes") != old_spec.get("volumeLifecycleModes"):
            errors.append(field_invalid("spec.volumeLifecycleModes", new_spec.get("volumeLifecycleModes"),
                                        "field is immutable"))
        return errors


# -- VolumeAttachment -----------------------------------------------------------------------------

def _volume_attachment_row(obj):
    # printers.go printVolumeAttachment
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return [tables._name(obj), spec.get("attacher", ""), (spec.get("source") or {}).get("persistentVolumeName") or "",
            spec.get("nodeName", ""), bool(status.get("attached", False)), tables.age(obj)]


# printers.go volumeAttachmentColumnDefinitions
VOLUME_ATTACHMENT_PRINTER = ([tables.NAME, tables._col("Attacher", fmt="name"), tables._col("PV"),
                              tables._col("Node"), tables._col("Attached", "boolean"), tables.AGE],
                             _volume_attachment_row)


def _spec_value(spec: dict) -> RawJSON:
    """How field.Invalid renders the internal VolumeAttachmentSpec (%#v): the pointer's address
    is not reproducible, so its target is shown."""
    source = spec.get("source") or {}
    pv = source.get("persistentVolumeName")
    pv_text = "(*string)(nil)" if pv is None else f'&"{pv}"'
    inline = "(*core.PersistentVolumeSpec)(nil)" if source.get("inlineVolumeSpec") is None else \
        "&core.PersistentVolumeSpec{...}"
    return RawJSON(f'storage.VolumeAttachmentSpec{{Attacher:"{spec.get("attacher", "")}", '
                   f"Source:storage.VolumeAttachmentSource{{PersistentVolumeName:{pv_text}, InlineVolumeSpec:{inline}}}, "
                   f'NodeName:"{spec.get("nodeName", "")}"}}')


class VolumeAttachmentStatusSubresource(StatusSubresource):
    def validate(self, obj):
        return VolumeAttachmentStrategy.status_problems(obj)


class VolumeAttachmentStrategy(Strategy):
    subresources = (VolumeAttachmentStatusSubresource(),)
    printer = VOLUME_ATTACHMENT_PRINTER
    return_deleted_object = True        # volumeattachment/storage/storage.go

    @staticmethod
    def status_problems(obj) -> list[FieldError]:
        # validateVolumeAttachmentStatus: the error messages' size and codes
        status = obj.get("status") or {}
        errors: list[FieldError] = []
        for key in ("attachError", "detachError"):
            error = status.get(key) or {}
            if len(error.get("message") or "") > 1024:
                errors.append(FieldError("Too long", f"status.{key}.message", "may not be more than 262144 bytes"))
            code = error.get("errorCode")
            if isinstance(code, int) and code < 0:
                errors.append(field_invalid(f"status.{key}.errorCode", code,
                                            "must be between 0 and 2147483647, inclusive"))
        return errors

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors: list[FieldError] = []
        # validateVolumeAttachmentSpec
        attacher = spec.get("attacher") or ""
        if not attacher:
            errors.append(field_required("spec.attacher"))
        source = spec.get("source") or {}
        pv, inline = source.get("persistentVolumeName"), source.get("inlineVolumeSpec")
        if pv is None and inline is None:
            errors.append(field_required("spec.source", "must specify exactly one of inlineVolumeSpec and "
                                         "persistentVolumeName"))
        elif pv is not None and inline is not None:
            errors.append(field_forbidden("spec.source", "must specify exactly one of inlineVolumeSpec and "
                                          "persistentVolumeName"))
        elif pv is not None and not pv:
            errors.append(field_required("spec.source.persistentVolumeName",
                                         "must specify non empty persistentVolumeName"))
        node = spec.get("nodeName") or ""
        errors += [field_invalid("spec.nodeName", node, msg) for msg in dns1123_subdomain_problems(node)]
        errors += self.status_problems(obj)
        # ValidateVolumeAttachmentV1: the attacher is a CSI driver name, a PV name a valid name
        if attacher:
            errors += [field_invalid("spec.attacher", attacher, msg) for msg in dns1123_subdomain_problems(attacher)]
        if pv:
            errors += [field_invalid("spec.source.persistentVolumeName", pv, msg)
                       for msg in dns1123_subdomain_problems(pv)]
        return errors

    def validate_update(self, new, old):
        # ValidateVolumeAttachmentUpdate: the spec is read-only
        errors = self.validate(new)
        if (new.get("spec") or {}) != (old.get("spec") or {}):
            errors.append(field_invalid("spec", _spec_value(new.get("spec") or {}), "field is immutable"))
        return errors


def storage_types() -> list[ResourceType]:
    rt = ResourceType
    return [
        rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, StorageClassStrategy(),
           "storageclass", ["sc"]),
        rt("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False, CSIDriverStrategy(), "csidriver"),
        rt("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, VolumeAttachmentStrategy(),
           "volumeattachment"),
    ]
