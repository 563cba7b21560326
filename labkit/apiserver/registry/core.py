"""The other core/v1 kinds: ReplicationControllers, ConfigMaps, Secrets, Services,
ServiceAccounts (with their token subresource), Events, Nodes, PersistentVolumes,
PersistentVolumeClaims and Endpoints (pkg/registry/core/<kind>/strategy.go).
"""

from __future__ import annotations

import hashlib
import ipaddress

from labkit.apiserver import tables
from labkit.apiserver.timestamps import now_rfc3339
from labkit.apiserver.errors import (FieldError, RawJSON, field_forbidden, field_invalid, field_required,
                                    field_unsupported, go_quote, invalid)
from labkit.apiserver.resources import (ORPHAN_DEPENDENTS, UNSUPPORTED, ScaleSubresource, StatusSubresource, Strategy,
                                        Subresource)
from labkit.apiserver.podvalidation import validate_pod_containers
from labkit.apiserver.validation import dns1123_subdomain_problems, label_value_problems, qualified_name_problems
from labkit.apiserver.registry.pod import _pod_template_labels
from labkit.apiserver.registry import serviceips
from labkit.apiserver.registry.servicealloc import (NodePortAllocator, drop_type_dependent_node_ports,
                                                    patch_allocated_values)
from labkit.jsondata import json_copy


class ReplicationControllerStrategy(Strategy):
    """pkg/registry/core/replicationcontroller/strategy.go: orphans by default ("for back
    compatibility"), selector defaulted from the template labels."""

    default_gc_policy = ORPHAN_DEPENDENTS
    subresources = (StatusSubresource(), ScaleSubresource(selector_is_map=True))
    generation = True
    field_labels = ("status.replicas",)
    printer = tables.PRINTERS["ReplicationController"]

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {"replicas": 0}

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = []
        selector = spec.get("selector") or {}
        if not selector:
            errors.append(field_required("spec.selector"))
        labels = _pod_template_labels(spec.get("template"))
        if spec.get("template") is not None and any(labels.get(k) != v for k, v in selector.items()):
            errors.append(field_invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`"))
        if spec.get("template") is not None:
            errors += validate_pod_containers(spec["template"].get("spec") or {}, "spec.template.spec")
        replicas = spec.get("replicas")
        if isinstance(replicas, int) and replicas < 0:
            errors.append(field_invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
        return errors


def _immutable(new: dict, old: dict, path: str) -> list[FieldError]:
    """ValidateImmutableField."""
    a, b = new, old
    for part in path.split("."):
        a, b = (a or {}).get(part), (b or {}).get(part)
    return [] if a == b else [field_invalid(path, a, "field is immutable")]


class ConfigMapStrategy(Strategy):
    printer = tables.PRINTERS["ConfigMap"]


class SecretStrategy(Strategy):
    field_labels = ("type",)
    printer = tables.PRINTERS["Secret"]

    def normalize(self, obj):
        # Convert_v1_Secret_To_core_Secret: the write-only stringData is merged into data
        if obj.get("stringData"):
            import base64
            data = obj.setdefault("data", {})
            for k, v in obj.pop("stringData").items():
                data[k] = base64.b64encode(v.encode()).decode()


class ServiceStrategy(Strategy):
    """pkg/registry/core/service: the REST layer allocates a cluster IP (here a stable address from
    the service CIDR per namespace/name, the IP allocator's stand-in) and node ports (from the
    range, as upstream's allocator draws them: servicealloc.py) before the strategy runs; an
    update that leaves them out keeps the allocated ones (patchAllocatedValues), so
    `kubectl replace -f` of a manifest works; a set cluster IP cannot change."""

    return_deleted_object = True
    subresources = (StatusSubresource(),)
    printer = tables.PRINTERS["Service"]
    _network = ipaddress.ip_network("10.96.0.0/12")

    def __init__(self):
        self.node_ports = NodePortAllocator()

    def _digest(self, obj: dict, salt: str = "") -> int:
        text = f"{obj['metadata'].get('namespace')}/{obj['metadata'].get('name')}{salt}"
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")

    def begin_create(self, registry, rt, obj):
        """storage.go beginCreate: normalizeClusterIPs, the pre-validation of the clusterIP /
        clusterIPs pair (alloc.go initIPFamilyFields), then the node ports (txnAllocNodePorts)."""
        spec = obj.setdefault("spec", {})
        serviceips.normalize_cluster_ips(spec, None)
        self._check_cluster_ips(obj)
        return self.node_ports.begin(registry, rt, obj, None)

    def begin_update(self, registry, rt, new, old):
        """storage.go beginUpdate: patchAllocatedValues, normalizeClusterIPs, the pre-validation
        of initIPFamilyFields, then alloc.go txnUpdateNodePorts."""
        spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
        serviceips.patch_allocated_cluster_ips(spec, old_spec)
        patch_allocated_values(new, old)
        serviceips.normalize_cluster_ips(spec, old_spec)
        self._check_cluster_ips(new)
        return self.node_ports.begin(registry, rt, new, old)

    @staticmethod
    def _check_cluster_ips(obj: dict) -> None:
        """initIPFamilyFields: ValidateServiceClusterIPsRelatedFields before any allocation; its
        errors are the whole answer (422), the strategy's validation never runs."""
        errors = serviceips.cluster_ips_match_errors(obj["spec"])
        if errors:
            raise invalid("Service", "", obj["metadata"].get("name", ""), errors)

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        spec = obj.setdefault("spec", {})
        if spec.get("type") != "ExternalName":
            if not spec.get("clusterIP"):
                offset = self._digest(obj) % (self._network.num_addresses - 2) + 1
                spec["clusterIP"] = str(self._network.network_address + offset)
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        obj["status"] = {"loadBalancer": {}}

    def prepare_for_update(self, new, old):
        super().prepare_for_update(new, old)
        spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
        if spec.get("type") != "ExternalName" and old_spec.get("type") != "ExternalName":
            # initIPFamilyFields: the policy of the stored Service, the families of its IPs (the
            # cluster IPs themselves were patched in begin_update)
            for key in ("ipFamilies", "ipFamilyPolicy"):
                if not spec.get(key) and old_spec.get(key):
                    spec[key] = json_copy(old_spec[key])
        drop_type_dependent_node_ports(new, old)

    def validate_update(self, new, old):
        """ValidateServiceUpdate: what may not change (validateUpgradeDowngradeClusterIPs,
        validateServiceExternalTrafficFieldsUpdate), then ValidateService."""
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        return (serviceips.upgrade_downgrade_errors(spec, old_spec)
                + serviceips.health_check_node_port_errors(spec, old_spec) + self.validate(new))


class TokenSubresource(Subresource):
    """`serviceaccounts/<name>/token` (POST): a TokenRequest, answered by tokenrequest.py."""

    name = "token"
    verbs = ["create"]


class ServiceAccountStrategy(Strategy):
    printer = tables.PRINTERS["ServiceAccount"]
    subresources = (TokenSubresource(),)


class EventStrategy(Strategy):
    """Events never get GC finalizers (DefaultGarbageCollectionPolicy: Unsupported)."""

    default_gc_policy = UNSUPPORTED
    field_labels = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type")
    printer = tables.PRINTERS["Event"]

    def fields(self, obj):
        values = super().fields(obj)
        values["source"] = ((obj.get("source") or {}).get("component") or obj.get("reportingComponent") or "")
        return values

    def name_problems(self, name, prefix):
        from labkit.apiserver.validation import path_segment_problems
        return path_segment_problems(name, prefix)


# -- nodes and storage -------------------------------------------------------------------------

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _go_taint(taint: dict) -> RawJSON:
    """A core.Taint as Go's %#v prints it (what field.Duplicate shows of one)."""
    added = "(*v1.Time)(nil)" if taint.get("timeAdded") is None else "(*v1.Time)(0xc000000000)"
    return RawJSON(f'core.Taint{{Key:{go_quote(taint.get("key") or "")}, Value:{go_quote(taint.get("value") or "")}, '
                   f'Effect:{go_quote(taint.get("effect") or "")}, TimeAdded:{added}}}')


def validate_node_taints(taints: list) -> list[FieldError]:
    """pkg/apis/core/validation/validation.go validateNodeTaints, at the path ValidateNode and
    ValidateNodeUpdate give it (metadata.taints, not spec.taints): a label-name key, a label-value
    value, an effect of the three (validateTaintEffect, empty not allowed), unique by key and effect."""
    errors: list[FieldError] = []
    seen: dict[str, set[str]] = {}
    for i, taint in enumerate(taints):
        taint = taint if isinstance(taint, dict) else {}
        at = f"metadata.taints[{i}]"
        key, value, effect = taint.get("key") or "", taint.get("value") or "", taint.get("effect") or ""
        errors += [field_invalid(f"{at}.key", key, msg) for msg in qualified_name_problems(key)]
        problems = label_value_problems(value)
        if problems:
            errors.append(field_invalid(f"{at}.value", value, ";".join(problems)))
        if not effect:
            errors.append(field_required(f"{at}.effect"))
        elif effect not in TAINT_EFFECTS:
            errors.append(field_unsupported(f"{at}.effect", effect, list(TAINT_EFFECTS)))
        if key in seen.get(effect, ()):
            errors.append(FieldError("Duplicate value", at, "taints must be unique by key and effect pair",
                                     _go_taint(taint), True))
            continue
        seen.setdefault(effect, set()).add(key)
    return errors


class NodeStrategy(Strategy):
    """pkg/registry/core/node: cluster-scoped; a kubelet registers its Node with a status, so a
    create keeps it; normal updates keep the stored status."""

    field_labels = ("spec.unschedulable",)
    subresources = (StatusSubresource(),)
    printer = tables.PRINTERS["Node"]

    def prepare_for_create(self, obj):
        pass

    def validate(self, obj):
        # ValidateNode: the taints (the rest of what it checks is left to the generic metadata rules)
        return validate_node_taints((obj.get("spec") or {}).get("taints") or [])

    def validate_update(self, new, old):
        # nodeStrategy.ValidateUpdate is ValidateNode and then ValidateNodeUpdate, and both
        # validate the taints: a bad taint in an update is reported twice, as kube-apiserver does
        return self.validate(new) + self.validate(new)


# ValidatePersistentVolumeSpec's order of the volume sources (the first one counts, each later one
# is "more than 1 volume type", flexVolume excepted: it is counted without that test), and the
# field each such error names (cephfs as "cephFS")
VOLUME_SOURCES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "glusterfs", "flocker", "nfs", "rbd",
                  "quobyte", "cephfs", "iscsi", "cinder", "fc", "flexVolume", "azureFile", "vsphereVolume",
                  "photonPersistentDisk", "portworxVolume", "azureDisk", "scaleIO", "local", "storageos", "csi")
FORBIDDEN_NAMES = {"cephfs": "cephFS"}


PV_ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]   # sets.List: sorted


def _validate_nfs(nfs: dict, path: str) -> list[FieldError]:
    """validateNFSVolumeSource."""
    errors = []
    if not nfs.get("server"):
        errors.append(field_required(f"{path}.server"))
    if not nfs.get("path"):
        errors.append(field_required(f"{path}.path"))
    if not str(nfs.get("path") or "").startswith("/"):
        errors.append(field_invalid(f"{path}.path", nfs.get("path") or "", "must be an absolute path"))
    return errors


class PersistentVolumeStrategy(Strategy):
    """pkg/registry/core/persistentvolume: phase Pending and lastPhaseTransitionTime on create
    (PersistentVolumeLastPhaseTransitionTime, GA in v1.31); a status update that changes the phase
    stamps the transition. Validation is ValidatePersistentVolumeSpec's (pkg/apis/core/validation/
    validation.go), in its order: the access modes, the capacity (storage only), the reclaim
    policy, exactly one volume source (the NFS source's fields checked: validateNFSVolumeSource;
    the other sources only counted), the class name, the volume mode. An update may not change the
    volume source (ValidatePersistentVolumeUpdate; kube-apiserver's message goes on with a go-cmp
    diff of the two sources, whose layout go-cmp keeps deliberately unstable: labkit leaves it out)
    or the volume mode."""

    subresources = (StatusSubresource(),)
    printer = tables.PRINTERS["PersistentVolume"]

    def prepare_for_create(self, obj):
        obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": now_rfc3339()}

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = []
        modes = spec.get("accessModes") or []
        if not modes:
            errors.append(field_required("spec.accessModes"))
        errors += [field_unsupported("spec.accessModes", mode, PV_ACCESS_MODES) for mode in modes
                   if mode not in PV_ACCESS_MODES]
        if "ReadWriteOncePod" in modes and any(m in PV_ACCESS_MODES and m != "ReadWriteOncePod" for m in modes):
            errors.append(field_forbidden("spec.accessModes", "may not use ReadWriteOncePod with other access modes"))
        capacity = spec.get("capacity")
        if not capacity:
            errors.append(field_required("spec.capacity"))
        if "storage" not in (capacity or {}) or len(capacity) > 1:
            errors.append(field_unsupported("spec.capacity", capacity, ["storage"]))
        policy = spec.get("persistentVolumeReclaimPolicy")
        if policy and policy not in ("Retain", "Delete", "Recycle"):
            errors.append(field_unsupported("spec.persistentVolumeReclaimPolicy", policy, ["Delete", "Recycle", "Retain"]))
        sources = 0
        for name in VOLUME_SOURCES:
            if spec.get(name) is None:
                continue
            if sources and name != "flexVolume":
                errors.append(field_forbidden(f"spec.{FORBIDDEN_NAMES.get(name, name)}",
                                              "may not specify more than 1 volume type"))
                continue
            sources += 1
            if name == "nfs":
                errors += _validate_nfs(spec["nfs"], "spec.nfs")
        if not sources:
            errors.append(field_required("spec", "must specify a volume type"))
        class_name = spec.get("storageClassName")
        if class_name:
            errors += [field_invalid("spec.storageClassName", class_name, problem)
                       for problem in dns1123_subdomain_problems(class_name)]
        mode = spec.get("volumeMode")
        if mode is not None and mode not in ("Block", "Filesystem"):
            errors.append(field_unsupported("spec.volumeMode", mode, ["Block", "Filesystem"]))
        return errors

    def validate_update(self, new, old):
        errors = self.validate(new)
        source = [{k: (o.get("spec") or {}).get(k) for k in VOLUME_SOURCES} for o in (new, old)]
        if source[0] != source[1]:
            errors.append(field_forbidden("spec.persistentvolumesource",
                                          "spec.persistentvolumesource is immutable after creation"))
        # ValidateImmutableField(newPv.Spec.VolumeMode, oldPv.Spec.VolumeMode, field.NewPath("volumeMode"))
        mode = (new.get("spec") or {}).get("volumeMode")
        if mode != (old.get("spec") or {}).get("volumeMode"):
            errors.append(field_invalid("volumeMode", mode, "field is immutable"))
        return errors


class PersistentVolumeStatusSubresource(StatusSubresource):
    def prepare_for_update(self, new, old):
        new = super().prepare_for_update(new, old)
        if (new.get("status") or {}).get("phase") != (old.get("status") or {}).get("phase"):
                new.setdefault("status", {})["lastPhaseTransitionTime"] = now_rfc3339()
        return new


PersistentVolumeStrategy.subresources = (PersistentVolumeStatusSubresource(),)


class PersistentVolumeClaimStrategy(Strategy):
    """pkg/registry/core/persistentvolumeclaim: the status starts empty (phase Pending, a default),
    access modes and a storage request are required; the spec is immutable but for the requested
    size (and the volume attributes class)."""

    subresources = (StatusSubresource(),)
    printer = tables.PRINTERS["PersistentVolumeClaim"]

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = []
        if not spec.get("accessModes"):
            errors.append(field_required("spec.accessModes", "at least 1 access mode is required"))
        if not ((spec.get("resources") or {}).get("requests") or {}).get("storage"):
            errors.append(field_required("spec.resources[storage]"))
        return errors

    def validate_update(self, new, old):
        errors = self.validate(new)
        a, b = json_copy(new.get("spec") or {}), json_copy(old.get("spec") or {})
        for spec in (a, b):
            spec.get("resources", {}).pop("requests", None)
            spec.pop("volumeAttributesClassName", None)
            if not b.get("volumeName"):
                spec.pop("volumeName", None)      # binding fills it in
        if a != b:
            errors.append(field_forbidden("spec", "spec is immutable after creation except resources.requests and "
                                                  "volumeAttributesClassName for bound claims"))
        return errors


class EndpointsStrategy(Strategy):
    printer = tables.PRINTERS["Endpoints"]

    def validate(self, obj):
        errors = []
        for i, subset in enumerate(obj.get("subsets") or []):
            if not subset.get("addresses") and not subset.get("notReadyAddresses"):
                errors.append(field_required(f"subsets[{i}]", "must specify `addresses` or `notReadyAddresses`"))
            for j, port in enumerate(subset.get("ports") or []):
                if not 1 <= port.get("port", 0) <= 65535:
                    errors.append(field_invalid(f"subsets[{i}].ports[{j}].port", port.get("port", 0),
                                                "must be between 1 and 65535, inclusive"))
        return errors
