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
import json

from labkit.apiserver import crd, tables
from labkit.apiserver.admission.configkinds import admissionregistration_types
from labkit.apiserver.admission.limitranger import limit_range_type
from labkit.apiserver.admission.resourcequota import resource_quota_type
from labkit.apiserver.certificates import CertificateSigningRequestStrategy
from labkit.apiserver.podvalidation import validate_pod_containers
from labkit.apiserver.policykinds import policy_types
from labkit.apiserver.storagekinds import storage_types
from labkit.apiserver.errors import (FieldError, RawJSON, field_forbidden, field_invalid, field_required, field_unsupported)
from labkit.apiserver.resources import (DELETE_DEPENDENTS, NAMESPACE_FINALIZER, NO_COLLECTION_DELETE, ORPHAN_DEPENDENTS,
                                        RESET_META_FOR_STATUS, UNSUPPORTED, ResourceType, ScaleSubresource,
                                        StatusSubresource, Strategy, Subresource)
from labkit.apiserver.selectors import LabelSelector
from labkit.apiserver.validation import dns1123_label_problems, path_segment_problems, validate_finalizer_name_list


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
    """`namespaces/<name>/finalize` (PUT only, upstream FinalizeREST with
    namespaceFinalizeStrategy): the body's spec and metadata are applied, only the status is kept
    (PrepareForUpdate); the `kubernetes.io/metadata.name` label is set as on every namespace write
    (Canonicalize).

    Anyone allowed to update it may add or remove spec finalizers, also while the namespace is
    Terminating; the namespace controller removes `kubernetes` this way once the namespace is
    empty."""

    name = "finalize"
    verbs = ["update"]

    def prepare_for_update(self, new: dict, old: dict) -> dict:
        if old.get("status") is not None:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
        new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = new["metadata"].get("name", "")
        return new

    def validate(self, obj: dict) -> list[FieldError]:
        # ValidateNamespaceFinalizeUpdate (the metadata rules run for every update)
        return validate_finalizer_name_list((obj.get("spec") or {}).get("finalizers") or [], "spec.finalizers",
                                            index=True)


class BindingSubresource(Subresource):
    """`pods/<name>/binding` (POST, what the scheduler uses): assigns spec.nodeName once."""

    name = "binding"
    verbs = ["create"]


class LegacyBindingStrategy(Strategy):
    """`POST /api/v1/namespaces/<ns>/bindings`, the older way to bind a Pod (LegacyBindingREST in
    pkg/registry/core/pod/storage/storage.go, served as `bindings` by storage_core.go): the Binding's
    own metadata.name names the Pod, and it does what `pods/<name>/binding` does. Nothing is stored
    as a Binding: like the reviews, it is answered on create (only POST is served, in OpenAPI too)."""

    virtual = True
    binds_pods = True


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

    def validate(self, obj):
        # ValidateNamespace: each spec finalizer, reported at `spec.finalizers`
        return validate_finalizer_name_list((obj.get("spec") or {}).get("finalizers") or [], "spec.finalizers",
                                            index=False)

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


def qos_class(spec: dict) -> str:
    """pkg/apis/core/helper/qos GetPodQOS (container-level resources): BestEffort without any cpu
    or memory request or limit; Guaranteed when every container limits both and requests equal
    limits; Burstable otherwise."""
    from labkit.quantity import QuantityError, parse

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
        errors = validate_pod_containers(spec)
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
        errors += validate_pod_containers((template or {}).get("spec") or {}, "spec.template.spec")
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
            errors += validate_pod_containers(spec["template"].get("spec") or {}, "spec.template.spec")
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
        return errors + crd.version_problems(obj)



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
    """apiextensions-apiserver pkg/registry/customresource/strategy.go, with the version's
    structural schema (crd.py): pruning, defaults, validation, and the shape for apply."""

    builtin = False
    standard_finalizer_names = False
    allow_unconditional_update = False
    strategic_merge_patch = False

    def __init__(self, status: bool, printer_columns: list[dict], scale: dict | None = None,
                 schema: dict | None = None):
        self.schema = schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        subresources = [StatusSubresource(status_only=True)] if status else []
        if scale is not None:
            subresources.append(ScaleSubresource(scale.get("specReplicasPath", ".spec.replicas"),
                                                 scale.get("statusReplicasPath", ".status.replicas"),
                                                 scale.get("labelSelectorPath"), selector_is_string=True))
        self.subresources = tuple(subresources)
        self.generation = True
        self.printer = tables.custom_resource_printer(printer_columns)

    def prune(self, obj: dict, unknown: list[str]) -> dict:
        return crd.prune(obj, self.schema, "", unknown, root=True)

    def default(self, obj: dict) -> None:
        crd.default(obj, self.schema)

    def validate(self, obj):
        return crd.validate_resource(obj, self.schema)

    def schema_root(self, rt):
        from labkit.apiserver import schema
        return schema.CustomResourceNode(self.schema)

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


# -- nodes and storage -------------------------------------------------------------------------

class NodeStrategy(Strategy):
    """pkg/registry/core/node: cluster-scoped; a kubelet registers its Node with a status, so a
    create keeps it; normal updates keep the stored status."""

    field_labels = ("spec.unschedulable",)
    subresources = (StatusSubresource(),)
    printer = tables.PRINTERS["Node"]

    def prepare_for_create(self, obj):
        pass


VOLUME_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "hostPath", "glusterfs", "nfs", "rbd", "iscsi",
                  "cinder", "cephfs", "fc", "flocker", "flexVolume", "azureFile", "vsphereVolume", "quobyte",
                  "azureDisk", "photonPersistentDisk", "portworxVolume", "scaleIO", "local", "storageos", "csi")


class PersistentVolumeStrategy(Strategy):
    """pkg/registry/core/persistentvolume: phase Pending and lastPhaseTransitionTime on create
    (PersistentVolumeLastPhaseTransitionTime, GA in v1.31), a capacity, access modes and exactly
    one volume source required; a status update that changes the phase stamps the transition."""

    subresources = (StatusSubresource(),)
    printer = tables.PRINTERS["PersistentVolume"]

    def prepare_for_create(self, obj):
        from labkit.apiserver.registry import now_rfc3339
        obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": now_rfc3339()}

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = []
        if not spec.get("accessModes"):
            errors.append(field_required("spec.accessModes"))
        if not (spec.get("capacity") or {}).get("storage"):
            errors.append(field_required("spec.capacity", "must specify a storage capacity") if not spec.get("capacity")
                          else field_required("spec.capacity[storage]"))
        sources = [k for k in VOLUME_SOURCES if spec.get(k) is not None]
        if not sources:
            errors.append(field_required("spec", "must specify a volume type"))
        elif len(sources) > 1:
            errors.append(field_forbidden(f"spec.{sources[1]}", "may not specify more than 1 volume type"))
        policy = spec.get("persistentVolumeReclaimPolicy")
        if policy not in (None, "Retain", "Delete", "Recycle"):
            errors.append(field_unsupported("spec.persistentVolumeReclaimPolicy", policy, ["Delete", "Recycle", "Retain"]))
        return errors


class PersistentVolumeStatusSubresource(StatusSubresource):
    def prepare_for_update(self, new, old):
        new = super().prepare_for_update(new, old)
        if (new.get("status") or {}).get("phase") != (old.get("status") or {}).get("phase"):
            from labkit.apiserver.registry import now_rfc3339
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
        a, b = copy.deepcopy(new.get("spec") or {}), copy.deepcopy(old.get("spec") or {})
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


class EndpointSliceStrategy(Strategy):
    """pkg/registry/discovery/endpointslice: addressType is required and immutable."""

    printer = tables.PRINTERS["EndpointSlice"]

    def validate(self, obj):
        kind = obj.get("addressType")
        if not kind:
            return [field_required("addressType")]
        if kind not in ("IPv4", "IPv6", "FQDN"):
            return [field_unsupported("addressType", kind, ["FQDN", "IPv4", "IPv6"])]
        return []

    def validate_update(self, new, old):
        return self.validate(new) + _immutable(new, old, "addressType")


# -- batch/v1 ----------------------------------------------------------------------------------

JOB_DELETE_WARNING = ("child pods are preserved by default when jobs are deleted; set propagationPolicy=Background "
                      "to remove them or set propagationPolicy=Orphan to suppress this warning")


def _restart_policy(template: dict | None, path: str, allowed: list[str]) -> list[FieldError]:
    policy = ((template or {}).get("spec") or {}).get("restartPolicy", "")
    return [] if policy in allowed else [field_unsupported(path, policy, allowed)]


class JobStrategy(Strategy):
    """pkg/registry/batch/job: a DELETE without policy orphans the pods (OrphanDependents, with a
    warning); the selector and the pods' labels are generated from the Job's UID and name
    (batch.kubernetes.io/controller-uid, batch.kubernetes.io/job-name and their legacy names)
    unless manualSelector; pods must not restart Always; the template is immutable."""

    default_gc_policy = ORPHAN_DEPENDENTS
    subresources = (StatusSubresource(),)
    generation = True
    printer = tables.PRINTERS["Job"]

    def delete_warning(self, options: dict) -> str | None:
        if options.get("propagationPolicy") is None and options.get("orphanDependents") is None:
            return JOB_DELETE_WARNING
        return None

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {}
        spec = obj.setdefault("spec", {})
        if not spec.get("manualSelector"):
            meta = obj["metadata"]
            labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
            for key in ("job-name", "batch.kubernetes.io/job-name"):
                labels.setdefault(key, meta.get("name", ""))
            for key in ("controller-uid", "batch.kubernetes.io/controller-uid"):
                labels.setdefault(key, meta.get("uid", ""))
            selector = spec.setdefault("selector", {})
            selector.setdefault("matchLabels", {}).setdefault("batch.kubernetes.io/controller-uid", meta.get("uid", ""))

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = _validate_workload({"spec": {"selector": spec.get("selector"), "template": spec.get("template")}},
                                    True)
        for key in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
            value = spec.get(key)
            if value is not None and value < 0:
                errors.append(field_invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
        errors += _restart_policy(spec.get("template"), "spec.template.spec.restartPolicy", ["OnFailure", "Never"])
        return errors

    def validate_update(self, new, old):
        errors = self.validate(new)
        if not (new.get("spec") or {}).get("suspend"):
            errors += _immutable(new, old, "spec.template")
        return errors + _immutable(new, old, "spec.selector") + _immutable(new, old, "spec.completions")


class CronJobStrategy(Strategy):
    """pkg/registry/batch/cronjob: DeleteDependents for batch/v1; the schedule must parse as a
    standard cron line (or a descriptor) and the time zone must exist."""

    default_gc_policy = DELETE_DEPENDENTS
    subresources = (StatusSubresource(),)
    generation = True
    printer = tables.PRINTERS["CronJob"]

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {}

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = []
        name = obj["metadata"].get("name", "")
        if len(name) > 52:
            errors.append(field_invalid("metadata.name", name, "must be no more than 52 characters"))
        schedule = spec.get("schedule", "")
        if not schedule:
            errors.append(field_required("spec.schedule"))
        else:
            problem = cron_problem(schedule)
            if problem:
                errors.append(field_invalid("spec.schedule", schedule, problem))
        zone = spec.get("timeZone")
        if zone is not None:
            try:
                import zoneinfo
                zoneinfo.ZoneInfo(zone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                errors.append(field_invalid("spec.timeZone", zone, f"unknown time zone {zone}"))
        policy = spec.get("concurrencyPolicy")
        if policy not in ("Allow", "Forbid", "Replace"):
            errors.append(field_unsupported("spec.concurrencyPolicy", policy or "", ["Allow", "Forbid", "Replace"]))
        template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
        errors += validate_pod_containers((template or {}).get("spec") or {}, "spec.jobTemplate.spec.template.spec")
        errors += _restart_policy(template, "spec.jobTemplate.spec.template.spec.restartPolicy",
                                  ["OnFailure", "Never"])
        return errors


CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 6))
CRON_NAMES = {3: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
              4: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]}


def cron_problem(schedule: str) -> str | None:
    """What robfig/cron's standard parser (cron.ParseStandard) says about a schedule, or None."""
    import re
    if "TZ=" in schedule:
        return "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
    if schedule.startswith("@"):
        if schedule in ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"):
            return None
        if schedule.startswith("@every "):
            return None if re.fullmatch(r"@every (\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+", schedule) else \
                f"failed to parse duration {schedule}"
        return f"unrecognized descriptor: {schedule}"
    fields = schedule.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
    for i, (text, (what, low, high)) in enumerate(zip(fields, CRON_FIELDS)):
        for part in text.split(","):
            m = re.fullmatch(r"(\*|\?|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/(\d+))?", part)
            if not m:
                return f"failed to parse int from {part}: strconv.Atoi: parsing {part!r}: invalid syntax"
            span = m.group(1)
            if span in ("*", "?"):
                continue
            for value in span.split("-"):
                names = CRON_NAMES.get(i, [])
                number = names.index(value.lower()) + (1 if i == 3 else 0) if value.lower() in names else None
                if number is None:
                    if not value.isdigit():
                        return f'failed to parse int from {value}: strconv.Atoi: parsing "{value}": invalid syntax'
                    number = int(value)
                if number < low:
                    return f"beginning of range ({number}) below minimum ({low}): {part}"
                if number > high:
                    return f"end of range ({number}) above maximum ({high}): {part}"
    return None


# -- apps/v1: DaemonSets and StatefulSets ---------------------------------------------------------

TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


class DaemonSetStrategy(Strategy):
    """pkg/registry/apps/daemonset: DeleteDependents for apps/v1; the template generation (the
    deprecated.daemonset.template.generation annotation in apps/v1) starts at 1 and follows
    template changes; pods must restart Always; the selector is immutable."""

    default_gc_policy = DELETE_DEPENDENTS
    subresources = (StatusSubresource(),)
    generation = True
    printer = tables.PRINTERS["DaemonSet"]

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                         "numberReady": 0}
        obj["metadata"].setdefault("annotations", {})[TEMPLATE_GENERATION] = "1"

    def prepare_for_update(self, new, old):
        super().prepare_for_update(new, old)
        annotations = new["metadata"].setdefault("annotations", {})
        generation = int((old["metadata"].get("annotations") or {}).get(TEMPLATE_GENERATION) or 1)
        if (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get("template"):
            generation += 1
        annotations[TEMPLATE_GENERATION] = str(generation)

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = _validate_workload(obj, True)
        errors += _restart_policy(spec.get("template"), "spec.template.spec.restartPolicy", ["Always"])
        kind = (spec.get("updateStrategy") or {}).get("type")
        if kind not in ("RollingUpdate", "OnDelete"):
            errors.append(field_unsupported("spec.updateStrategy.type", kind or "", ["OnDelete", "RollingUpdate"]))
        return errors

    def validate_update(self, new, old):
        return self.validate(new) + _immutable(new, old, "spec.selector")


class StatefulSetStrategy(Strategy):
    """pkg/registry/apps/statefulset: DeleteDependents for apps/v1, a scale subresource; only
    replicas, ordinals, template, updateStrategy, persistentVolumeClaimRetentionPolicy and
    minReadySeconds may change."""

    default_gc_policy = DELETE_DEPENDENTS
    subresources = (StatusSubresource(), ScaleSubresource())
    generation = True
    printer = tables.PRINTERS["StatefulSet"]
    MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
               "minReadySeconds")

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {"replicas": 0, "availableReplicas": 0}

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = _validate_workload(obj, True)
        errors += _restart_policy(spec.get("template"), "spec.template.spec.restartPolicy", ["Always"])
        policy = spec.get("podManagementPolicy")
        if policy not in ("OrderedReady", "Parallel"):
            errors.append(field_unsupported("spec.podManagementPolicy", policy or "", ["OrderedReady", "Parallel"]))
        return errors

    def validate_update(self, new, old):
        errors = self.validate(new)
        a = {k: v for k, v in (new.get("spec") or {}).items() if k not in self.MUTABLE}
        b = {k: v for k, v in (old.get("spec") or {}).items() if k not in self.MUTABLE}
        if a != b:
            errors.append(field_forbidden("spec", "updates to statefulset spec for fields other than 'replicas', "
                                          "'ordinals', 'template', 'updateStrategy', "
                                          "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
        return errors


# -- rbac.authorization.k8s.io/v1 -----------------------------------------------------------------

def _validate_rules(rules, namespaced: bool) -> list[FieldError]:
    errors = []
    for i, rule in enumerate(rules or []):
        path = f"rules[{i}]"
        if not rule.get("verbs"):
            errors.append(field_required(f"{path}.verbs", "verbs must contain at least one value"))
        if rule.get("nonResourceURLs"):
            if namespaced:
                errors.append(field_invalid(f"{path}.nonResourceURLs", rule["nonResourceURLs"],
                                            "namespaced rules cannot apply to non-resource URLs"))
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                errors.append(field_invalid(f"{path}.nonResourceURLs", rule["nonResourceURLs"],
                                            "rules cannot apply to both regular resources and non-resource URLs"))
            continue
        if not rule.get("apiGroups"):
            errors.append(field_required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
        if not rule.get("resources"):
            errors.append(field_required(f"{path}.resources", "resource rules must supply at least one resource"))
    return errors


class RBACStrategy(Strategy):
    def name_problems(self, name, prefix):
        # pkg/apis/rbac/validation ValidateRBACName = path.IsValidPathSegmentName (system:... names)
        return path_segment_problems(name, prefix)


class RoleStrategy(RBACStrategy):
    printer = tables.PRINTERS["Role"]

    def validate(self, obj):
        return _validate_rules(obj.get("rules"), True)


class ClusterRoleStrategy(RBACStrategy):
    printer = tables.PRINTERS["ClusterRole"]

    def validate(self, obj):
        return [] if obj.get("aggregationRule") else _validate_rules(obj.get("rules"), False)


class RoleBindingStrategy(RBACStrategy):
    """A binding's roleRef names a Role or ClusterRole (a ClusterRoleBinding: a ClusterRole) and
    cannot change; subjects are Users, Groups or ServiceAccounts (with a namespace)."""

    printer = tables.PRINTERS["RoleBinding"]
    role_kinds = ["ClusterRole", "Role"]
    namespaced = True

    def validate(self, obj):
        errors = []
        ref = obj.get("roleRef") or {}
        if ref.get("apiGroup") != "rbac.authorization.k8s.io":
            errors.append(field_unsupported("roleRef.apiGroup", ref.get("apiGroup", ""),
                                            ["rbac.authorization.k8s.io"]))
        if ref.get("kind") not in self.role_kinds:
            errors.append(field_unsupported("roleRef.kind", ref.get("kind", ""), self.role_kinds))
        if not ref.get("name"):
            errors.append(field_required("roleRef.name"))
        for i, subject in enumerate(obj.get("subjects") or []):
            path = f"subjects[{i}]"
            if not subject.get("name"):
                errors.append(field_required(f"{path}.name"))
            kind = subject.get("kind")
            if kind not in ("ServiceAccount", "User", "Group"):
                errors.append(field_unsupported(f"{path}.kind", kind or "", ["ServiceAccount", "User", "Group"]))
            elif kind == "ServiceAccount" and not self.namespaced and not subject.get("namespace"):
                errors.append(field_required(f"{path}.namespace"))
        return errors

    def validate_update(self, new, old):
        errors = self.validate(new)
        if new.get("roleRef") != old.get("roleRef"):
            errors.append(field_invalid("roleRef", new.get("roleRef"), "cannot change roleRef"))
        return errors


class ClusterRoleBindingStrategy(RoleBindingStrategy):
    printer = tables.PRINTERS["ClusterRoleBinding"]
    role_kinds = ["ClusterRole"]
    namespaced = False


class LeaseStrategy(Strategy):
    printer = tables.PRINTERS["Lease"]


# -- autoscaling: HorizontalPodAutoscalers (stored as autoscaling/v2) ------------------------------

HPA_METRICS = "autoscaling.alpha.kubernetes.io/metrics"
HPA_BEHAVIOR = "autoscaling.alpha.kubernetes.io/behavior"
HPA_CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"
HPA_CURRENT_METRICS = "autoscaling.alpha.kubernetes.io/current-metrics"


class HorizontalPodAutoscalerStrategy(Strategy):
    subresources = (StatusSubresource(),)
    printer = tables.PRINTERS["HorizontalPodAutoscaler"]

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = []
        ref = spec.get("scaleTargetRef") or {}
        for key in ("kind", "name"):
            if not ref.get(key):
                errors.append(field_required(f"spec.scaleTargetRef.{key}"))
        if (spec.get("minReplicas") or 1) < 1:
            errors.append(field_invalid("spec.minReplicas", spec.get("minReplicas"),
                                        "must be greater than or equal to 1"))
        if spec.get("maxReplicas", 0) < (spec.get("minReplicas") or 1):
            errors.append(field_invalid("spec.maxReplicas", spec.get("maxReplicas", 0),
                                        "must be greater than or equal to `minReplicas`"))
        return errors


def hpa_v1_to_v2(obj: dict) -> dict:
    """Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler: the CPU target
    becomes a Resource metric; the other metrics, the behavior and the status travel in annotations."""
    import json
    out = copy.deepcopy(obj)
    out["apiVersion"], out["kind"] = "autoscaling/v2", "HorizontalPodAutoscaler"
    spec = out.setdefault("spec", {})
    annotations = out["metadata"].get("annotations") or {}
    metrics = json.loads(annotations.pop(HPA_METRICS, "[]") or "[]")
    metrics = [_metric_v1_to_v2(m) for m in metrics]
    target = spec.pop("targetCPUUtilizationPercentage", None)
    if target is not None:
        metrics.insert(0, {"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": target}}})
    if metrics:
        spec["metrics"] = metrics
    if HPA_BEHAVIOR in annotations:
        spec["behavior"] = json.loads(annotations.pop(HPA_BEHAVIOR))
    status = out.setdefault("status", {})
    current = status.pop("currentCPUUtilizationPercentage", None)
    current_metrics = json.loads(annotations.pop(HPA_CURRENT_METRICS, "[]") or "[]")
    if current is not None:
        current_metrics.insert(0, {"type": "Resource", "resource": {"name": "cpu", "current": {
            "averageUtilization": current}}})
    if current_metrics:
        status["currentMetrics"] = current_metrics
    if HPA_CONDITIONS in annotations:
        status["conditions"] = json.loads(annotations.pop(HPA_CONDITIONS))
    if not annotations:
        out["metadata"].pop("annotations", None)
    return out


def hpa_v2_to_v1(obj: dict) -> dict:
    """Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler."""
    import json
    out = copy.deepcopy(obj)
    out["apiVersion"], out["kind"] = "autoscaling/v1", "HorizontalPodAutoscaler"
    spec = out.setdefault("spec", {})
    annotations = dict(out["metadata"].get("annotations") or {})
    others = []
    for metric in spec.pop("metrics", None) or []:
        target = (metric.get("resource") or {}).get("target") or {}
        if metric.get("type") == "Resource" and metric["resource"].get("name") == "cpu" and \
                target.get("type") == "Utilization" and "targetCPUUtilizationPercentage" not in spec:
            spec["targetCPUUtilizationPercentage"] = target.get("averageUtilization")
        else:
            others.append(_metric_v2_to_v1(metric))
    if others:
        annotations[HPA_METRICS] = json.dumps(others, separators=(",", ":"))
    if spec.get("behavior"):
        annotations[HPA_BEHAVIOR] = json.dumps(spec.pop("behavior"), separators=(",", ":"))
    status = out.setdefault("status", {})
    other_current = []
    for metric in status.pop("currentMetrics", None) or []:
        current = (metric.get("resource") or {}).get("current") or {}
        if metric.get("type") == "Resource" and metric["resource"].get("name") == "cpu" and \
                "averageUtilization" in current and "currentCPUUtilizationPercentage" not in status:
            status["currentCPUUtilizationPercentage"] = current["averageUtilization"]
        else:
            other_current.append(metric)
    if other_current:
        annotations[HPA_CURRENT_METRICS] = json.dumps(other_current, separators=(",", ":"))
    if status.get("conditions"):
        annotations[HPA_CONDITIONS] = json.dumps(status.pop("conditions"), separators=(",", ":"))
    status.setdefault("currentReplicas", 0)
    status.setdefault("desiredReplicas", 0)
    if annotations:
        out["metadata"]["annotations"] = annotations
    return out


def _metric_v1_to_v2(metric: dict) -> dict:
    resource = metric.get("resource")
    if metric.get("type") == "Resource" and resource is not None:
        target = {"type": "Utilization", "averageUtilization": resource["targetAverageUtilization"]} \
            if "targetAverageUtilization" in resource else {"type": "AverageValue",
                                                            "averageValue": resource.get("targetAverageValue")}
        return {"type": "Resource", "resource": {"name": resource.get("name"), "target": target}}
    return metric


def _metric_v2_to_v1(metric: dict) -> dict:
    resource = metric.get("resource")
    if metric.get("type") == "Resource" and resource is not None:
        target = resource.get("target") or {}
        shown = {"name": resource.get("name")}
        if target.get("type") == "Utilization":
            shown["targetAverageUtilization"] = target.get("averageUtilization")
        else:
            shown["targetAverageValue"] = target.get("averageValue")
        return {"type": "Resource", "resource": shown}
    return metric


# -- events.k8s.io/v1: a view of core Events ------------------------------------------------------

# (core/v1 field, events.k8s.io/v1 field): pkg/apis/events/v1/conversion.go
EVENT_FIELDS = (("involvedObject", "regarding"), ("message", "note"), ("source", "deprecatedSource"),
                ("firstTimestamp", "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp"),
                ("count", "deprecatedCount"), ("reportingComponent", "reportingController"))


def event_core_to_events(obj: dict) -> dict:
    out = {("%s" % dict(EVENT_FIELDS).get(k, k)): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = "events.k8s.io/v1", "Event"
    return out


def event_events_to_core(obj: dict) -> dict:
    back = {v: k for k, v in EVENT_FIELDS}
    out = {back.get(k, k): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


class EventsV1Strategy(EventStrategy):
    """events.k8s.io/v1 Events: what a new-style event must carry (ValidateEventCreate)."""

    def validate(self, obj):
        errors = []
        for core, shown in (("eventTime", "eventTime"), ("reportingComponent", "reportingController"),
                            ("reportingInstance", "reportingInstance"), ("action", "action"), ("reason", "reason")):
            if not obj.get(core):
                errors.append(field_required(shown))
        if obj.get("type") not in ("Normal", "Warning"):
            errors.append(field_unsupported("type", obj.get("type", ""), ["Normal", "Warning"]))
        return errors


# -- access reviews (create-only, nothing stored) ------------------------------------------------

class ReviewStrategy(Strategy):
    """A kind that is a question to the server: created, answered, never stored (the access
    reviews of pkg/registry/authorization and authentication). `review` answers it."""

    virtual = True

    def review(self, obj: dict, user, authorizer, namespace: str | None) -> dict:
        raise NotImplementedError


def _decide(authorizer, user: str, groups: list[str], spec: dict, namespace: str | None = None) -> dict:
    from labkit.apiserver.authorizer import Attributes
    resource = spec.get("resourceAttributes")
    if resource is not None:
        attributes = Attributes(user, groups, resource.get("verb", ""), namespace or resource.get("namespace", ""),
                                resource.get("group", ""), resource.get("version", ""), resource.get("resource", ""),
                                resource.get("subresource", ""), resource.get("name", ""))
    else:
        attrs = spec.get("nonResourceAttributes") or {}
        attributes = Attributes(user, groups, attrs.get("verb", ""), path=attrs.get("path", ""))
    decision = authorizer.authorize(attributes)
    status = {"allowed": decision.allowed}
    if decision.denied:
        status["denied"] = True
    if decision.reason:
        status["reason"] = decision.reason
    return status


def _review_errors(obj: dict, subject: bool, local: bool = False) -> list[FieldError]:
    """pkg/apis/authorization/validation: ValidateSelfSubjectAccessReview, ValidateSubjectAccessReview
    and ValidateLocalSubjectAccessReview."""
    spec = obj.get("spec") or {}
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    errors = []
    if resource is not None and non_resource is not None:
        errors.append(field_invalid("spec.nonResourceAttributes", non_resource,
                                    "cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        errors.append(field_invalid("spec.resourceAttributes", None,
                                    "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
    if subject and not spec.get("user") and not spec.get("groups"):
        errors.append(field_invalid("spec.user", spec.get("user", ""), "at least one of user or group must be specified"))
    for selector in ("fieldSelector", "labelSelector"):
        attributes = (resource or {}).get(selector)
        if attributes is None:
            continue
        path = f"spec.resourceAttributes.{selector}"
        if attributes.get("rawSelector") and attributes.get("requirements"):
            errors.append(field_invalid(f"{path}.rawSelector", attributes["rawSelector"],
                                        "may not specified at the same time as requirements"))
        if not attributes.get("rawSelector") and not attributes.get("requirements"):
            errors.append(field_required(f"{path}.requirements",
                                         f"when {path} is specified, requirements or rawSelector is required"))
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields" and not (local and k == "namespace")}
    if meta:
        errors.append(field_invalid("metadata", _go_object_meta(obj["metadata"]),
                                    "must be empty except for namespace" if local else "must be empty"))
    if local:
        if resource is not None and resource.get("namespace", "") != obj["metadata"].get("namespace", ""):
            errors.append(field_invalid("spec.resourceAttributes.namespace", resource.get("namespace", ""),
                                        "must match metadata.namespace"))
        if non_resource is not None:
            errors.append(field_invalid("spec.nonResourceAttributes", non_resource, "disallowed on this kind of request"))
    return errors


# metav1.ObjectMeta's fields in declaration order; creationTimestamp has no omitempty effect
OBJECT_META_FIELDS = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
                      "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                      "annotations", "ownerReferences", "finalizers", "managedFields")


def _go_object_meta(meta: dict) -> RawJSON:
    """ObjectMeta as json.Marshal writes it in a field error."""
    fields = [f'"{k}":' + json.dumps(meta.get(k), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
              for k in OBJECT_META_FIELDS if k in meta or k == "creationTimestamp"]
    return RawJSON("{" + ",".join(fields) + "}")


class SelfSubjectAccessReviewStrategy(ReviewStrategy):
    """`kubectl auth can-i`: may the requesting user do this?"""

    def validate(self, obj):
        return _review_errors(obj, subject=False)

    def review(self, obj, user, authorizer, namespace):
        return dict(obj, status=_decide(authorizer, user.name, user.groups, obj.get("spec") or {}))


class SubjectAccessReviewStrategy(ReviewStrategy):
    """May the user named in the spec, with exactly the groups named there, do this?
    (pkg/registry/authorization/subjectaccessreview/rest.go with
    authorizationutil.AuthorizationAttributesFrom: no group is added, not even
    system:authenticated.)"""

    def validate(self, obj):
        return _review_errors(obj, subject=True)

    def review(self, obj, user, authorizer, namespace):
        spec = obj.get("spec") or {}
        return dict(obj, status=_decide(authorizer, spec.get("user", ""), list(spec.get("groups") or []), spec,
                                        namespace))


class LocalSubjectAccessReviewStrategy(SubjectAccessReviewStrategy):
    def validate(self, obj):
        return _review_errors(obj, subject=True, local=True)


class SelfSubjectRulesReviewStrategy(ReviewStrategy):
    """`kubectl auth can-i --list`: everything the requesting user may do in a namespace."""

    def review(self, obj, user, authorizer, namespace):
        rules = authorizer.rules(user.name, user.groups, (obj.get("spec") or {}).get("namespace", ""))
        status = {"resourceRules": rules.resource_rules, "nonResourceRules": rules.non_resource_rules,
                  "incomplete": rules.incomplete}
        if rules.evaluation_error:
            status["evaluationError"] = rules.evaluation_error
        return dict(obj, status=status)


class TokenReviewStrategy(ReviewStrategy):
    """authentication.k8s.io/v1 TokenReview: whether a bearer token authenticates, as whom and for
    which audiences (answered by the server's token authenticators: authn.Authenticator.review)."""

    def review(self, obj, user, authorizer, namespace):
        raise NotImplementedError("the API answers TokenReviews with its authenticator")


class SelfSubjectReviewStrategy(ReviewStrategy):
    """`kubectl auth whoami`: the requesting user's name, UID, groups and extra."""

    def review(self, obj, user, authorizer, namespace):
        return dict(obj, status={"userInfo": user.info()})


# -- the catalogue ---------------------------------------------------------------------------

def builtin_types() -> list[ResourceType]:
    rt = ResourceType
    hpa = HorizontalPodAutoscalerStrategy()
    return [
        rt("", "v1", "namespaces", "Namespace", False, NamespaceStrategy(), "namespace", ["ns"],
           verbs=NO_COLLECTION_DELETE),
        rt("", "v1", "pods", "Pod", True, PodStrategy(), "pod", ["po"], ["all"]),
        rt("", "v1", "bindings", "Binding", True, LegacyBindingStrategy(), "binding", verbs=["create"]),
        rt("", "v1", "replicationcontrollers", "ReplicationController", True, ReplicationControllerStrategy(),
           "replicationcontroller", ["rc"], ["all"]),
        rt("", "v1", "configmaps", "ConfigMap", True, ConfigMapStrategy(), "configmap", ["cm"]),
        rt("", "v1", "secrets", "Secret", True, SecretStrategy(), "secret"),
        rt("", "v1", "services", "Service", True, ServiceStrategy(), "service", ["svc"], ["all"],
           verbs=NO_COLLECTION_DELETE + ["deletecollection"]),
        rt("", "v1", "serviceaccounts", "ServiceAccount", True, ServiceAccountStrategy(), "serviceaccount", ["sa"]),
        rt("", "v1", "events", "Event", True, EventStrategy(), "event", ["ev"]),
        limit_range_type(),
        resource_quota_type(),
        rt("apps", "v1", "deployments", "Deployment", True, DeploymentStrategy(), "deployment", ["deploy"], ["all"]),
        rt("apps", "v1", "replicasets", "ReplicaSet", True, ReplicaSetStrategy(), "replicaset", ["rs"], ["all"]),
        rt("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
           CustomResourceDefinitionStrategy(), "customresourcedefinition", ["crd", "crds"], ["api-extensions"]),
        rt("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, APIServiceStrategy(), "apiservice",
           categories=["api-extensions"]),
        rt("", "v1", "nodes", "Node", False, NodeStrategy(), "node", ["no"]),
        rt("", "v1", "persistentvolumes", "PersistentVolume", False, PersistentVolumeStrategy(), "persistentvolume",
           ["pv"]),
        rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, PersistentVolumeClaimStrategy(),
           "persistentvolumeclaim", ["pvc"]),
        rt("", "v1", "endpoints", "Endpoints", True, EndpointsStrategy(), "endpoints", ["ep"]),
        rt("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True, EndpointSliceStrategy(),
           "endpointslice"),
        rt("apps", "v1", "daemonsets", "DaemonSet", True, DaemonSetStrategy(), "daemonset", ["ds"], ["all"]),
        rt("apps", "v1", "statefulsets", "StatefulSet", True, StatefulSetStrategy(), "statefulset", ["sts"], ["all"]),
        rt("batch", "v1", "jobs", "Job", True, JobStrategy(), "job", [], ["all"]),
        rt("batch", "v1", "cronjobs", "CronJob", True, CronJobStrategy(), "cronjob", ["cj"], ["all"]),
        rt("rbac.authorization.k8s.io", "v1", "roles", "Role", True, RoleStrategy(), "role"),
        rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, RoleBindingStrategy(),
           "rolebinding"),
        rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, ClusterRoleStrategy(),
           "clusterrole"),
        rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False,
           ClusterRoleBindingStrategy(), "clusterrolebinding"),
        rt("coordination.k8s.io", "v1", "leases", "Lease", True, LeaseStrategy(), "lease"),
        rt("events.k8s.io", "v1", "events", "Event", True, EventsV1Strategy(), "event", ["ev"],
           stored_as=("", "v1", "Event"), to_storage=event_events_to_core, from_storage=event_core_to_events),
        rt("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, hpa,
           "horizontalpodautoscaler", ["hpa"], ["all"]),
        rt("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, hpa,
           "horizontalpodautoscaler", ["hpa"], ["all"], stored_as=("autoscaling", "v2", "HorizontalPodAutoscaler"),
           to_storage=hpa_v1_to_v2, from_storage=hpa_v2_to_v1),
        rt("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
           SelfSubjectAccessReviewStrategy(), verbs=["create"]),
        rt("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False,
           SelfSubjectRulesReviewStrategy(), verbs=["create"]),
        rt("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False,
           SubjectAccessReviewStrategy(), verbs=["create"]),
        rt("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", True,
           LocalSubjectAccessReviewStrategy(), verbs=["create"]),
        rt("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False,
           SelfSubjectReviewStrategy(), verbs=["create"]),
        rt("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, TokenReviewStrategy(),
           verbs=["create"]),
        *admissionregistration_types(),
        *policy_types(),
        *storage_types(),
        rt("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False,
           CertificateSigningRequestStrategy(), "certificatesigningrequest", ["csr"]),
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
                                          subresources.get("scale"), (version.get("schema") or {}).get("openAPIV3Schema"))
        types.append(ResourceType(
            spec.get("group", ""), version["name"], names.get("plural", ""), names.get("kind", ""),
            spec.get("scope") == "Namespaced", strategy, names.get("singular") or str(names.get("kind", "")).lower(),
            list(names.get("shortNames") or []), list(names.get("categories") or [])))
    return types

