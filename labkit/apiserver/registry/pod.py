"""core/v1 Pods and Bindings: the Pod strategy, its status, binding, ephemeralcontainers and
resize subresources, the legacy `bindings` resource, and the container and pod-template validation the workload kinds share
(pkg/registry/core/pod/strategy.go, storage/storage.go; pkg/apis/core/validation).
"""

from __future__ import annotations

import json

from labkit.apiserver import tables
from labkit.apiserver.podresize import prepare_resize, validate_resize
from labkit.apiserver.podvalidation import POD_UPDATE_FORBIDDEN, validate_pod_containers
from labkit.apiserver.errors import FieldError, field_forbidden, field_invalid, field_required
from labkit.apiserver.resources import STATUS_VERBS, StatusSubresource, Strategy, Subresource
from labkit.apiserver.selectors import LabelSelector
from labkit.apiserver.validation import dns1123_label_problems
from labkit.jsondata import json_copy


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


def _pod_template_labels(template) -> dict:
    return ((template or {}).get("metadata") or {}).get("labels") or {}


def _merge_keys(selector: dict, keys, operator: str, labels: dict) -> None:
    """strategy.go applyLabelKeysToLabelSelector: for each key the Pod has a label of, the
    requirement `key <operator> (its value)` appended to the selector's matchExpressions."""
    for key in keys or []:
        if key in labels:
            selector.setdefault("matchExpressions", []).append(
                {"key": key, "operator": operator, "values": [labels[key]]})


def merge_label_keys(pod: dict) -> None:
    """What v1.34's Pod strategy does on create (strategy.go PrepareForCreate): the Pod's own label
    values are merged into the selectors that name their keys, so the stored Pod shows them.
    - mutateTopologySpreadConstraints: each topologySpreadConstraint's matchLabelKeys as `key In
      (value)` (features MatchLabelKeysInPodTopologySpread, beta since 1.27, and
      MatchLabelKeysInPodTopologySpreadSelectorMerge, beta and on by default in 1.34:
      pkg/features/kube_features.go);
    - mutatePodAffinity: each pod (anti-)affinity term's matchLabelKeys as `In`, mismatchLabelKeys
      as `NotIn` (MatchLabelKeysInPodAffinity, GA in 1.33).
    A constraint or term without labelSelector is left alone (a nil selector matches nothing).
    Only on create: an update merges nothing again."""
    spec = pod.get("spec") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for constraint in spec.get("topologySpreadConstraints") or []:
        if isinstance(constraint, dict) and isinstance(constraint.get("labelSelector"), dict):
            _merge_keys(constraint["labelSelector"], constraint.get("matchLabelKeys"), "In", labels)
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        preferred = terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        for term in (terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []) + \
                [(t or {}).get("podAffinityTerm") for t in preferred if isinstance(t, dict)]:
            if isinstance(term, dict) and isinstance(term.get("labelSelector"), dict):
                _merge_keys(term["labelSelector"], term.get("matchLabelKeys"), "In", labels)
                _merge_keys(term["labelSelector"], term.get("mismatchLabelKeys"), "NotIn", labels)


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


class EphemeralContainersSubresource(Subresource):
    """`pods/<name>/ephemeralcontainers` (EphemeralContainersREST in
    pkg/registry/core/pod/storage/storage.go; what `kubectl debug` patches), its kind the Pod
    itself. podEphemeralContainersStrategy (pkg/registry/core/pod/strategy.go):
    PrepareForUpdate keeps the stored Pod's spec, status and the metadata a status update keeps
    (dropNonEphemeralContainerUpdates, ResetObjectMetaForStatus) and takes only
    spec.ephemeralContainers from the request, bumping the generation when they change
    (updatePodGeneration); ValidateUpdate (ValidatePodEphemeralContainersUpdate in
    pkg/apis/core/validation/validation.go) refuses an existing ephemeral container removed or
    changed (upstream follows `may not be changed` with cmp.Diff's rendering of the change, left out here), and
    validates the new ones as validateEphemeralContainers does (the parts
    reconstructed here: a name that is a DNS-1123 label used by no other container, an image)."""

    name = "ephemeralcontainers"
    verbs = STATUS_VERBS

    def prepare_for_update(self, new: dict, old: dict) -> dict:
        result = json_copy(old)
        for key in ("resourceVersion", "managedFields"):     # what the request and its field manager set
            if key in new.get("metadata", {}):
                result["metadata"][key] = new["metadata"][key]
            else:
                result["metadata"].pop(key, None)
        containers = (new.get("spec") or {}).get("ephemeralContainers")
        spec = result.setdefault("spec", {})
        if containers:
            spec["ephemeralContainers"] = json_copy(containers)
        else:
            spec.pop("ephemeralContainers", None)
        if spec.get("ephemeralContainers") != (old.get("spec") or {}).get("ephemeralContainers"):
            result["metadata"]["generation"] = (old["metadata"].get("generation") or 1) + 1
        return result

    def validate_update(self, new: dict, old: dict) -> list[FieldError]:
        at = "spec.ephemeralContainers"
        errors: list[FieldError] = []
        spec = new.get("spec") or {}
        taken = {c.get("name") for key in ("containers", "initContainers") for c in spec.get(key) or []
                 if isinstance(c, dict)}
        for i, c in enumerate(spec.get("ephemeralContainers") or []):
            if not isinstance(c, dict):
                continue
            name = c.get("name") or ""
            if not name:
                errors.append(field_required(f"{at}[{i}].name"))
            else:
                errors += [field_invalid(f"{at}[{i}].name", name, msg) for msg in dns1123_label_problems(name)]
                if name in taken:
                    errors.append(FieldError("Duplicate value", f"{at}[{i}].name", "", name, True))
                taken.add(name)
            if not c.get("image"):
                errors.append(field_required(f"{at}[{i}].image"))
        now = {c.get("name"): c for c in spec.get("ephemeralContainers") or [] if isinstance(c, dict)}
        for was in (old.get("spec") or {}).get("ephemeralContainers") or []:
            if was.get("name") not in now:
                errors.append(field_forbidden(at, f"existing ephemeral containers {json.dumps(was.get('name'))} "
                                                  "may not be removed\n"))
            elif now[was.get("name")] != was:
                errors.append(field_forbidden(at, f"existing ephemeral containers {json.dumps(was.get('name'))} "
                                                  "may not be changed\n"))
        return errors


class ResizeSubresource(Subresource):
    """`pods/<name>/resize` (ResizeREST in pkg/registry/core/pod/storage/storage.go; what `kubectl
    patch pod NAME --subresource resize` writes), its kind the Pod itself, with podResizeStrategy
    (pkg/registry/core/pod/strategy.go) and ValidatePodResize: labkit.apiserver.podresize."""

    name = "resize"
    verbs = STATUS_VERBS

    def prepare_for_update(self, new: dict, old: dict) -> dict:
        return prepare_resize(new, old)

    def validate_update(self, new: dict, old: dict) -> list[FieldError]:
        return validate_resize(new, old, qos_class)


class PodStrategy(Strategy):
    """pkg/registry/core/pod/strategy.go: status and QoS class set on create, metadata.generation
    follows spec changes (v1.33+)."""

    return_deleted_object = True
    graceful_deletion = True
    generation = True
    field_labels = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                    "status.phase", "status.podIP", "status.nominatedNodeName")
    subresources = (PodStatusSubresource(), BindingSubresource(), EphemeralContainersSubresource(),
                    ResizeSubresource())
    printer = tables.PRINTERS["Pod"]

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}
        merge_label_keys(obj)

    @staticmethod
    def _validate_spec(obj):
        spec = obj.get("spec") or {}
        errors = validate_pod_containers(spec)
        grace = spec.get("terminationGracePeriodSeconds")
        if isinstance(grace, int) and grace < 0:
            errors.append(field_invalid("spec.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0"))
        return errors

    def validate(self, obj):
        errors = self._validate_spec(obj)
        # ValidatePodCreate: ephemeral containers are added to a running Pod through its
        # ephemeralcontainers subresource only
        if (obj.get("spec") or {}).get("ephemeralContainers"):
            errors.append(field_forbidden("spec.ephemeralContainers", "cannot be set on create"))
        return errors

    def validate_update(self, new, old):
        errors = self._validate_spec(new)
        mutable = json_copy(new.get("spec") or {})
        original = json_copy(old.get("spec") or {})
        # updatable: container images, activeDeadlineSeconds, tolerations (additions)
        for key in ("containers", "initContainers"):
            for a, b in zip(mutable.get(key) or [], original.get(key) or []):
                if isinstance(a, dict) and isinstance(b, dict):
                    a["image"] = b.get("image")
        for key in ("activeDeadlineSeconds", "tolerations"):
            mutable.pop(key, None)
            original.pop(key, None)
        if mutable != original:
            errors.append(field_forbidden("spec", POD_UPDATE_FORBIDDEN))
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
