"""The kinds the server serves, each with its *strategy*: what upstream's per-kind registry code
(pkg/registry/<group>/<kind>/strategy.go, storage.go) decides for that kind — what create and
update may change, validation, the default garbage-collection policy of DELETE, graceful
deletion, the Table printer, field selectors and subresources — and the catalogue of built-in
types (`builtin_types`) and of a CRD's custom resources (`custom_resource_types`).

Defaults are not a strategy's business: defaults.py applies upstream's to every decoded body.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress

from labkit.apiserver import tables
from labkit.apiserver.errors import (FieldError, field_forbidden, field_invalid, field_required, field_unsupported)
from labkit.apiserver.resources import (DELETE_DEPENDENTS, NAMESPACE_FINALIZER, NO_COLLECTION_DELETE, ORPHAN_DEPENDENTS,
                                        RESET_META_FOR_STATUS, UNSUPPORTED, ResourceType, ScaleSubresource,
                                        StatusSubresource, Strategy, Subresource)
from labkit.apiserver.selectors import LabelSelector
from labkit.apiserver.validation import (STANDARD_FINALIZERS, dns1123_label_problems, qualified_name_problems)


# -- subresources of particular kinds ----------------------------------------------------------

class NamespaceStatusSubresource(StatusSubresource):
    """`namespaces/<name>/status`: pkg/apis/core/validation ValidateNamespaceStatusUpdate — the
    phase must say what deletionTimestamp says (so the status cannot "unstick" a namespace)."""

    def validate(self, obj: dict) -> list[FieldError]:
        phase = (obj.get("status") or {}).get("phase", "")
        if not obj["metadata"].get("deletionTimestamp"):
            if phase != "Active":
                return [field_invalid("status.Phase", phase, "may only be 'Active' if `deletionTimestamp` is empty")]
        elif phase != "Terminating":
            return [field_invalid("status.Phase", phase,
                                  "may only be 'Terminating' if `deletionTimestamp` is not empty")]
        return []


class FinalizeSubresource(Subresource):
    """`namespaces/<name>/finalize` (PUT only, upstream FinalizeREST): applies `spec.finalizers`.

    Anyone allowed to update it may add or remove spec finalizers, also while the namespace is
    Terminating; the namespace controller removes `kubernetes` this way once the namespace is
    empty."""

    name = "finalize"
    verbs = ["update"]

    def prepare_for_update(self, new: dict, old: dict) -> dict:
        result = copy.deepcopy(old)
        finalizers = (new.get("spec") or {}).get("finalizers")
        spec = result.setdefault("spec", {})
        if finalizers:
            spec["finalizers"] = list(finalizers)
        else:
            spec.pop("finalizers", None)
        if not spec:
            result.pop("spec")
        result["metadata"]["resourceVersion"] = new.get("metadata", {}).get("resourceVersion")
        return result

    def validate(self, obj: dict) -> list[FieldError]:
        errors = []
        for f in (obj.get("spec") or {}).get("finalizers") or []:
            for msg in qualified_name_problems(f):
                errors.append(field_invalid("spec.finalizers", f, msg))
            if "/" not in f and f not in STANDARD_FINALIZERS:
                errors.append(field_invalid("spec.finalizers", f,
                                            "name is neither a standard finalizer name nor is it fully qualified"))
        return errors


class BindingSubresource(Subresource):
    """`pods/<name>/binding` (POST, what the scheduler uses): assigns spec.nodeName once."""

    name = "binding"
    verbs = ["create"]


# -- strategies ------------------------------------------------------------------------------

class NamespaceStrategy(Strategy):
    """pkg/registry/core/namespace/strategy.go and storage/storage.go: the namespace lifecycle.

    - create: `spec.finalizers` gets `kubernetes` (FinalizerKubernetes) appended if missing, the
      status is reset to phase Active, the `kubernetes.io/metadata.name` label is set;
    - normal updates cannot change `spec.finalizers` or `status` (PrepareForUpdate copies them
      back); the `finalize` subresource changes only spec.finalizers, `status` only the status;
    - DELETE (REST.Delete, `delete` below): the first one sets deletionTimestamp and phase
      Terminating in one update and adjusts the GC finalizers; later ones return the namespace
      unchanged while spec finalizers remain, then fall back to the generic Store.Delete;
    - the namespace is removed in the update that leaves both spec and metadata finalizers empty
      (ShouldDeleteNamespaceDuringUpdate), whichever of the main, status or finalize endpoints
      makes it.
    """

    return_deleted_object = True
    field_labels = ("status.phase",)
    subresources = (NamespaceStatusSubresource(), FinalizeSubresource())
    printer = tables.PRINTERS["Namespace"]

    def name_problems(self, name, prefix):
        return dns1123_label_problems(name, prefix)

    def prepare_for_create(self, obj):
        # namespaceStrategy.PrepareForCreate
        obj["status"] = {"phase": "Active"}
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        finalizers = list(spec.get("finalizers") or [])
        if NAMESPACE_FINALIZER not in finalizers:
            finalizers.append(NAMESPACE_FINALIZER)
        spec["finalizers"] = finalizers
        obj["spec"] = spec
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"].get("name", "")

    def prepare_for_update(self, new, old):
        new.setdefault("spec", {})
        old_finalizers = (old.get("spec") or {}).get("finalizers")
        if old_finalizers:
            new["spec"]["finalizers"] = list(old_finalizers)
        else:
            new["spec"].pop("finalizers", None)
        if not new["spec"]:
            new.pop("spec")
        new["status"] = copy.deepcopy(old.get("status") or {})
        new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = new["metadata"].get("name", "")

    def should_delete_during_update(self, new, old):
        # ShouldDeleteNamespaceDuringUpdate: the generic rule and no spec finalizers left
        return not (new.get("spec") or {}).get("finalizers")

    def delete(self, registry, rt, namespace, name, options, dry_run=False):
        """storage.go REST.Delete."""
        from labkit.apiserver.errors import conflict, invalid, not_found
        from labkit.apiserver.registry import now_rfc3339
        from labkit.apiserver.validation import validate_delete_options
        errors = validate_delete_options(options)
        if errors:
            raise invalid("DeleteOptions", "meta.k8s.io", "", errors)
        with registry.store.lock:
            current = registry.store.get(rt.storage_key, "", name)
            if current is None:
                raise not_found(rt.resource, rt.group, name)
            meta = current["metadata"]
            options = copy.deepcopy(options)
            preconditions = dict(options.get("preconditions") or {})
            # "ensure we have a UID precondition"
            if preconditions.get("uid") is None:
                preconditions["uid"] = meta.get("uid")
            elif preconditions["uid"] != meta.get("uid"):
                raise conflict(rt.resource, rt.group, name,
                               f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                               f"UID in object meta: {meta.get('uid')}")
            rv = preconditions.get("resourceVersion")
            if rv is not None and rv != meta.get("resourceVersion"):
                raise conflict(rt.resource, rt.group, name,
                               f"Precondition failed: ResourceVersion in precondition: {rv}, "
                               f"ResourceVersion in object meta: {meta.get('resourceVersion')}")
            options["preconditions"] = preconditions
            if not meta.get("deletionTimestamp"):
                # upon the first request to delete, switch the phase to start namespace termination
                updated = copy.deepcopy(current)
                umeta = updated["metadata"]
                umeta["deletionTimestamp"] = now_rfc3339()
                updated.setdefault("status", {})["phase"] = "Terminating"
                current_finalizers = list(umeta.get("finalizers") or [])
                should_have = {"orphan": _namespace_should_orphan(options, "orphan" in current_finalizers),
                               "foregroundDeletion": _namespace_should_foreground(
                                   options, "foregroundDeletion" in current_finalizers)}
                if any((f in current_finalizers) != want for f, want in should_have.items()):
                    finalizers = [f for f in current_finalizers if f not in should_have]
                    finalizers += [f for f in ("orphan", "foregroundDeletion") if should_have[f]]
                    if finalizers:
                        umeta["finalizers"] = finalizers
                    else:
                        umeta.pop("finalizers", None)
                if dry_run:
                    return 200, registry.present(rt, updated)
                return 200, registry.present(rt, registry.store.put(rt.storage_key, "", name, updated))
            # prior to final deletion, spec.finalizers must be empty
            if (current.get("spec") or {}).get("finalizers"):
                return 200, registry.present(rt, current)
        return registry.generic_delete(rt, namespace, name, options, dry_run)


def _namespace_should_orphan(options: dict, have: bool) -> bool:
    # storage.go shouldHaveOrphanFinalizer
    if options.get("orphanDependents") is not None:
        return bool(options["orphanDependents"])
    if options.get("propagationPolicy") is not None:
        return options["propagationPolicy"] == "Orphan"
    return have


def _namespace_should_foreground(options: dict, have: bool) -> bool:
    # storage.go shouldHaveDeleteDependentsFinalizer
    if options.get("orphanDependents") is not None:
        return options["orphanDependents"] is False
    if options.get("propagationPolicy") is not None:
        return options["propagationPolicy"] == "Foreground"
    return have


def _pod_template_labels(template) -> dict:
    return ((template or {}).get("metadata") or {}).get("labels") or {}


def _validate_containers(containers, path: str) -> list[FieldError]:
    errors = []
    if not containers:
        return [field_required(path)]
    names = set()
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            errors.append(field_invalid(f"{path}[{i}]", c, "must be an object"))
            continue
        name = c.get("name") or ""
        if not name:
            errors.append(field_required(f"{path}[{i}].name"))
        else:
            for msg in dns1123_label_problems(name):
                errors.append(field_invalid(f"{path}[{i}].name", name, msg))
            if name in names:
                errors.append(FieldError("Duplicate value", f"{path}[{i}].name", "", name, True))
            names.add(name)
        if not c.get("image"):
            errors.append(field_required(f"{path}[{i}].image"))
    return errors


def qos_class(spec: dict) -> str:
    """pkg/apis/core/helper/qos GetPodQOS (container-level resources): BestEffort without any cpu
    or memory request or limit; Guaranteed when every container limits both and requests equal
    limits; Burstable otherwise."""
    from labkit.apiserver.quantity import QuantityError, parse

    def amount(value):
        try:
            return parse(str(value))[0]
        except QuantityError:
            return 0

    requests: dict = {}
    limits: dict = {}
    guaranteed = True
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = c.get("resources") or {}
        for name, value in (resources.get("requests") or {}).items():
            if name in ("cpu", "memory") and amount(value) > 0:
                requests[name] = requests.get(name, 0) + amount(value)
        found = set()
        for name, value in (resources.get("limits") or {}).items():
            if name in ("cpu", "memory") and amount(value) > 0:
                found.add(name)
                limits[name] = limits.get(name, 0) + amount(value)
        if found != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(k) == v for k, v in requests.items()) and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


class PodStatusSubresource(StatusSubresource):
    """podStatusStrategy: the spec and the owner references stay ("old kubelets corrupt them"),
    a status without QoS class gets the stored one back."""

    def __init__(self):
        super().__init__(keeps=("spec", "metadata.ownerReferences"))

    def prepare_for_update(self, new, old):
        new = super().prepare_for_update(new, old)
        status = new.setdefault("status", {})
        if not status.get("qosClass") and (old.get("status") or {}).get("qosClass"):
            status["qosClass"] = old["status"]["qosClass"]
        return new


class PodStrategy(Strategy):
    """pkg/registry/core/pod/strategy.go: status and QoS class set on create, metadata.generation
    follows spec changes (v1.33+)."""

    return_deleted_object = True
    graceful_deletion = True
    generation = True
    field_labels = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                    "status.phase", "status.podIP", "status.nominatedNodeName")
    subresources = (PodStatusSubresource(), BindingSubresource())
    printer = tables.PRINTERS["Pod"]

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = _validate_containers(spec.get("containers"), "spec.containers")
        grace = spec.get("terminationGracePeriodSeconds")
        if isinstance(grace, int) and grace < 0:
            errors.append(field_invalid("spec.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0"))
        return errors

    def validate_update(self, new, old):
        errors = self.validate(new)
        mutable = copy.deepcopy(new.get("spec") or {})
        original = copy.deepcopy(old.get("spec") or {})
        # updatable: container images, activeDeadlineSeconds, tolerations (additions)
        for key in ("containers", "initContainers"):
            for a, b in zip(mutable.get(key) or [], original.get(key) or []):
                if isinstance(a, dict) and isinstance(b, dict):
                    a["image"] = b.get("image")
        for key in ("activeDeadlineSeconds", "tolerations"):
            mutable.pop(key, None)
            original.pop(key, None)
        if mutable != original:
            errors.append(field_forbidden("spec", "pod updates may not change fields other than "
                                          "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                                          "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
                                          "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to "
                                          "be set to 1 if it was previously negative)"))
        return errors

    def check_graceful_delete(self, obj, options):
        # CheckGracefulDelete: the request's period, else the pod's terminationGracePeriodSeconds;
        # 0 when the pod never ran on a node or already finished.
        period = options.get("gracePeriodSeconds")
        if period is None:
            period = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            if not isinstance(period, int):
                period = 30
        phase = (obj.get("status") or {}).get("phase")
        if not (obj.get("spec") or {}).get("nodeName") or phase in ("Succeeded", "Failed"):
            period = 0
        options["gracePeriodSeconds"] = period
        return True



def _validate_workload(obj: dict, require_selector: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    spec = obj.get("spec") or {}
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        errors.append(field_invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    selector = spec.get("selector")
    template = spec.get("template")
    if require_selector:
        if selector is None:
            errors.append(field_required("spec.selector"))
        else:
            try:
                parsed = LabelSelector.from_label_selector(selector)
            except ValueError as exc:
                errors.append(field_invalid("spec.selector", selector, str(exc)))
                parsed = None
            if parsed is not None and parsed.empty:
                errors.append(field_invalid("spec.selector", selector, "empty selector is invalid for deployment"))
            elif parsed is not None and not parsed.matches(_pod_template_labels(template)):
                errors.append(field_invalid("spec.template.metadata.labels", _pod_template_labels(template),
                                            "`selector` does not match template `labels`"))
    if template is None:
        if require_selector:
            errors.append(field_required("spec.template"))
    else:
        errors += _validate_containers(((template or {}).get("spec") or {}).get("containers"),
                                       "spec.template.spec.containers")
    return errors


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
            errors += _validate_containers((spec["template"].get("spec") or {}).get("containers"),
                                           "spec.template.spec.containers")
        replicas = spec.get("replicas")
        if isinstance(replicas, int) and replicas < 0:
            errors.append(field_invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
        return errors



class ReplicaSetStrategy(Strategy):
    """pkg/registry/apps/replicaset/strategy.go: DeleteDependents for apps/v1; the selector is
    immutable."""

    default_gc_policy = DELETE_DEPENDENTS
    subresources = (StatusSubresource(), ScaleSubresource())
    generation = True
    field_labels = ("status.replicas",)
    printer = tables.PRINTERS["ReplicaSet"]

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {"replicas": 0}

    def validate(self, obj):
        return _validate_workload(obj, True)

    def validate_update(self, new, old):
        return self.validate(new) + _immutable(new, old, "spec.selector")



class DeploymentStrategy(Strategy):
    """pkg/registry/apps/deployment/strategy.go: DeleteDependents for apps/v1; the generation
    follows changes of the spec and of the annotations (they are copied to the ReplicaSets); the
    selector is immutable; a status update keeps the spec and the labels."""

    default_gc_policy = DELETE_DEPENDENTS
    subresources = (StatusSubresource(keeps=("spec", "metadata.labels")), ScaleSubresource())
    generation = True
    printer = tables.PRINTERS["Deployment"]

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {}

    def prepare_for_update(self, new, old):
        super().prepare_for_update(new, old)
        if new["metadata"].get("generation") == old["metadata"].get("generation") and \
                (new["metadata"].get("annotations") or {}) != (old["metadata"].get("annotations") or {}):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1

    def validate(self, obj):
        errors = _validate_workload(obj, True)
        strategy = (obj.get("spec") or {}).get("strategy") or {}
        if strategy.get("type") == "Recreate" and strategy.get("rollingUpdate") is not None:
            errors.append(field_forbidden("spec.strategy.rollingUpdate",
                                          "may not be specified when strategy `type` is 'Recreate'"))
        elif strategy.get("type") not in ("Recreate", "RollingUpdate"):
            errors.append(field_unsupported("spec.strategy.type", strategy.get("type", ""),
                                            ["Recreate", "RollingUpdate"]))
        rolling = strategy.get("rollingUpdate") or {}
        if strategy.get("type") == "RollingUpdate" and rolling.get("maxSurge") in (0, "0%") \
                and rolling.get("maxUnavailable") in (0, "0%"):
            errors.append(field_invalid("spec.strategy.rollingUpdate.maxUnavailable", rolling.get("maxUnavailable"),
                                        "may not be 0 when `maxSurge` is 0"))
        return errors

    def validate_update(self, new, old):
        return self.validate(new) + _immutable(new, old, "spec.selector")


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
    """pkg/registry/core/service: the REST layer allocates a cluster IP (and node ports) on create
    — here a stable address from the service CIDR per namespace/name, the allocator's stand-in —
    and an update that leaves them out keeps the allocated ones (patchAllocatedValues), so
    `kubectl replace -f` of a manifest works; a set cluster IP cannot change."""

    return_deleted_object = True
    subresources = (StatusSubresource(),)
    printer = tables.PRINTERS["Service"]
    _network = ipaddress.ip_network("10.96.0.0/12")
    NODE_PORTS = (30000, 32767)

    def _digest(self, obj: dict, salt: str = "") -> int:
        text = f"{obj['metadata'].get('namespace')}/{obj['metadata'].get('name')}{salt}"
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        spec = obj.setdefault("spec", {})
        if spec.get("type") != "ExternalName":
            if not spec.get("clusterIP") and spec.get("clusterIPs"):
                spec["clusterIP"] = spec["clusterIPs"][0]
            if not spec.get("clusterIP"):
                offset = self._digest(obj) % (self._network.num_addresses - 2) + 1
                spec["clusterIP"] = str(self._network.network_address + offset)
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        if spec.get("type") in ("NodePort", "LoadBalancer"):
            low, high = self.NODE_PORTS
            used = {p.get("nodePort") for p in spec.get("ports") or []}
            for port in spec.get("ports") or []:
                if not port.get("nodePort"):
                    candidate = low + self._digest(obj, f"/{port.get('port')}/{port.get('protocol')}") % (high - low)
                    while candidate in used:
                        candidate = low + (candidate - low + 1) % (high - low)
                    port["nodePort"] = candidate
                    used.add(candidate)
        obj["status"] = {"loadBalancer": {}}

    def prepare_for_update(self, new, old):
        super().prepare_for_update(new, old)
        spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
        if spec.get("type") != "ExternalName" and old_spec.get("type") != "ExternalName":
            for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if not spec.get(key) and old_spec.get(key):
                    spec[key] = copy.deepcopy(old_spec[key])
        if spec.get("type") in ("NodePort", "LoadBalancer"):
            allocated = {(p.get("port"), p.get("protocol")): p.get("nodePort") for p in old_spec.get("ports") or []}
            for port in spec.get("ports") or []:
                if not port.get("nodePort") and allocated.get((port.get("port"), port.get("protocol"))):
                    port["nodePort"] = allocated[(port.get("port"), port.get("protocol"))]

    def validate_update(self, new, old):
        errors = self.validate(new)
        before, after = (old.get("spec") or {}).get("clusterIPs"), (new.get("spec") or {}).get("clusterIPs")
        if before and after and before[0] != after[0] and (old.get("spec") or {}).get("type") != "ExternalName":
            errors.append(field_invalid("spec.clusterIPs[0]", after, "may not change once set"))
        return errors


class ServiceAccountStrategy(Strategy):
    printer = tables.PRINTERS["ServiceAccount"]


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


CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


class CustomResourceDefinitionStrategy(Strategy):
    """apiextensions-apiserver pkg/registry/customresourcedefinition: the name must be
    <plural>.<group>; the cleanup finalizer makes deleting a CRD delete its custom resources."""

    subresources = (StatusSubresource(keeps=RESET_META_FOR_STATUS),)
    generation = True
    standard_finalizer_names = False
    printer = tables.PRINTERS["CustomResourceDefinition"]

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if CRD_CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CRD_CLEANUP_FINALIZER)
        spec = obj.get("spec") or {}
        names = dict(spec.get("names") or {})
        names.setdefault("singular", str(names.get("plural", "")).lower() if not names.get("kind") else str(names["kind"]).lower())
        names.setdefault("listKind", f"{names.get('kind', '')}List")
        spec["names"] = names
        now = obj["metadata"].get("creationTimestamp")
        obj["status"] = {
            "acceptedNames": names,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found",
                 "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
            "storedVersions": [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("storage")],
        }

    def validate(self, obj):
        errors = []
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        group = spec.get("group") or ""
        if not group:
            errors.append(field_required("spec.group"))
        elif "." not in group:
            errors.append(field_invalid("spec.group", group, "should be a domain with at least one dot"))
        if not names.get("plural"):
            errors.append(field_required("spec.names.plural"))
        if not names.get("kind"):
            errors.append(field_required("spec.names.kind"))
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            errors.append(field_unsupported("spec.scope", spec.get("scope") or "", ["Cluster", "Namespaced"]))
        expected = f"{names.get('plural', '')}.{group}"
        if obj["metadata"].get("name") != expected:
            errors.append(field_invalid("metadata.name", obj["metadata"].get("name"),
                                        'must be spec.names.plural+"."+spec.group'))
        versions = spec.get("versions") or []
        if not versions:
            errors.append(field_invalid("spec.versions", versions, "must have exactly one version marked as storage version"))
        elif sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
            errors.append(field_invalid("spec.versions", versions, "must have exactly one version marked as storage version"))
        for i, v in enumerate(versions):
            if not isinstance(v, dict) or not v.get("name"):
                errors.append(field_required(f"spec.versions[{i}].name"))
        return errors



class APIServiceStrategy(Strategy):
    """kube-aggregator's APIService: `<version>.<group>`; local services are always Available."""

    subresources = (StatusSubresource(keeps=RESET_META_FOR_STATUS),)
    standard_finalizer_names = False
    printer = tables.PRINTERS["APIService"]

    def name_problems(self, name, prefix):
        from labkit.apiserver.validation import path_segment_problems
        return path_segment_problems(name, prefix)     # `v1.` (the core group) is a valid name

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        spec = obj.get("spec") or {}
        if not spec.get("service"):
            obj["status"] = {"conditions": [{"type": "Available", "status": "True", "reason": "Local",
                                             "message": "Local APIServices are always available",
                                             "lastTransitionTime": obj["metadata"].get("creationTimestamp")}]}

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = []
        if not spec.get("version"):
            errors.append(field_required("spec.version"))
        expected = f"{spec.get('version', '')}.{spec.get('group', '')}"
        if obj["metadata"].get("name") != expected:
            errors.append(field_invalid("metadata.name", obj["metadata"].get("name"),
                                        f'must be `spec.version+"."+spec.group`: "{expected}"'))
        return errors


class CustomResourceStrategy(Strategy):
    """apiextensions-apiserver pkg/registry/customresource/strategy.go."""

    builtin = False
    standard_finalizer_names = False
    allow_unconditional_update = False
    strategic_merge_patch = False

    def __init__(self, status: bool, printer_columns: list[dict], scale: dict | None = None):
        subresources = [StatusSubresource(status_only=True)] if status else []
        if scale is not None:
            subresources.append(ScaleSubresource(scale.get("specReplicasPath", ".spec.replicas"),
                                                 scale.get("statusReplicasPath", ".status.replicas"),
                                                 scale.get("labelSelectorPath"), selector_is_string=True))
        self.subresources = tuple(subresources)
        self.generation = True
        self.printer = tables.custom_resource_printer(printer_columns)

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)

    def prepare_for_update(self, new, old):
        if self.has_status():
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        new["metadata"]["generation"] = old["metadata"].get("generation", 1)
        comparable = [k for k in set(new) | set(old) if k not in ("metadata", "status")] if self.has_status() else \
            [k for k in set(new) | set(old) if k != "metadata"]
        if any(new.get(k) != old.get(k) for k in comparable):
            new["metadata"]["generation"] += 1


# -- the catalogue ---------------------------------------------------------------------------

def builtin_types() -> list[ResourceType]:
    rt = ResourceType
    return [
        rt("", "v1", "namespaces", "Namespace", False, NamespaceStrategy(), "namespace", ["ns"],
           verbs=NO_COLLECTION_DELETE),
        rt("", "v1", "pods", "Pod", True, PodStrategy(), "pod", ["po"], ["all"]),
        rt("", "v1", "replicationcontrollers", "ReplicationController", True, ReplicationControllerStrategy(),
           "replicationcontroller", ["rc"], ["all"]),
        rt("", "v1", "configmaps", "ConfigMap", True, ConfigMapStrategy(), "configmap", ["cm"]),
        rt("", "v1", "secrets", "Secret", True, SecretStrategy(), "secret"),
        rt("", "v1", "services", "Service", True, ServiceStrategy(), "service", ["svc"], ["all"],
           verbs=NO_COLLECTION_DELETE + ["deletecollection"]),
        rt("", "v1", "serviceaccounts", "ServiceAccount", True, ServiceAccountStrategy(), "serviceaccount", ["sa"]),
        rt("", "v1", "events", "Event", True, EventStrategy(), "event", ["ev"]),
        rt("apps", "v1", "deployments", "Deployment", True, DeploymentStrategy(), "deployment", ["deploy"], ["all"]),
        rt("apps", "v1", "replicasets", "ReplicaSet", True, ReplicaSetStrategy(), "replicaset", ["rs"], ["all"]),
        rt("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
           CustomResourceDefinitionStrategy(), "customresourcedefinition", ["crd", "crds"], ["api-extensions"]),
        rt("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, APIServiceStrategy(), "apiservice",
           categories=["api-extensions"]),
    ]


def custom_resource_types(crd: dict) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition serves: one per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    types = []
    for version in spec.get("versions") or []:
        if not isinstance(version, dict) or not version.get("served", True) or not version.get("name"):
            continue
        subresources = version.get("subresources") or {}
        strategy = CustomResourceStrategy("status" in subresources, version.get("additionalPrinterColumns") or [],
                                          subresources.get("scale"))
        types.append(ResourceType(
            spec.get("group", ""), version["name"], names.get("plural", ""), names.get("kind", ""),
            spec.get("scope") == "Namespaced", strategy, names.get("singular") or str(names.get("kind", "")).lower(),
            list(names.get("shortNames") or []), list(names.get("categories") or [])))
    return types

