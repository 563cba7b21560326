"""core/v1 Pods and Bindings: the Pod strategy, its status and binding subresources, the
legacy `bindings` resource, and the container and pod-template validation the workload kinds share
(pkg/registry/core/pod/strategy.go, storage/storage.go; pkg/apis/core/validation).
"""

from __future__ import annotations

import copy
import math

from labkit.apiserver import tables
from labkit.apiserver.errors import FieldError, field_forbidden, field_invalid, field_required, field_unsupported
from labkit.apiserver.resources import StatusSubresource, Strategy, Subresource
from labkit.apiserver.selectors import LabelSelector
from labkit.apiserver.validation import dns1123_label_problems


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
        errors += _validate_container_ports(c.get("ports") or [], f"{path}[{i}].ports")
        errors += _validate_resource_requirements(c.get("resources") or {}, f"{path}[{i}].resources")
    return errors


# pkg/apis/core/validation/validation.go supportedPortProtocols
PORT_PROTOCOLS = ("SCTP", "TCP", "UDP")
PORT_RANGE = "must be between 1 and 65535, inclusive"      # validation.IsValidPortNum's InclusiveRangeError
# pkg/apis/core/helper standardContainerResources (IsStandardContainerResourceName: also hugepages-*)
STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def _validate_container_ports(ports, path: str) -> list[FieldError]:
    """validateContainerPorts (pkg/apis/core/validation/validation.go): the container port is
    required and in 1-65535, a host port given is in 1-65535, the protocol one of SCTP, TCP, UDP."""
    errors = []
    for i, port in enumerate(ports if isinstance(ports, list) else []):
        if not isinstance(port, dict):
            continue
        at = f"{path}[{i}]"
        number = port.get("containerPort") or 0
        if not number:
            errors.append(field_required(f"{at}.containerPort"))
        elif isinstance(number, int) and not 1 <= number <= 65535:
            errors.append(field_invalid(f"{at}.containerPort", number, PORT_RANGE))
        host = port.get("hostPort") or 0
        if isinstance(host, int) and host and not 1 <= host <= 65535:
            errors.append(field_invalid(f"{at}.hostPort", host, PORT_RANGE))
        protocol = port.get("protocol")
        if not protocol:
            errors.append(field_required(f"{at}.protocol"))
        elif protocol not in PORT_PROTOCOLS:
            errors.append(field_unsupported(f"{at}.protocol", protocol, list(PORT_PROTOCOLS)))
    return errors


def _resource_name_problems(name: str, at: str) -> list[FieldError]:
    """validateContainerResourceName (pkg/apis/core/validation/validation.go), for the names of
    limits and requests: a name without a domain must be a standard container resource; a
    resource in a domain other than kubernetes.io must be an extended resource name (not
    requests.*)."""
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            return [field_invalid(at, name, "must be a standard resource type or fully qualified")]
        return []
    if not _native_resource(name) and name.startswith("requests."):
        return [field_invalid(at, name, "doesn't follow extended resource name standard")]
    return []


def _native_resource(name: str) -> bool:
    """IsNativeResource (pkg/apis/core/helper): no domain, or kubernetes.io or a subdomain of it."""
    if "/" not in name:
        return True
    domain = name.split("/", 1)[0]
    return domain == "kubernetes.io" or domain.endswith(".kubernetes.io")


def _overcommit_allowed(name: str) -> bool:
    """IsOvercommitAllowed (pkg/apis/core/helper): a native resource that is not hugepages-*;
    an extended resource (example.com/widget) can be neither overcommitted nor fractional."""
    return _native_resource(name) and not name.startswith("hugepages-")


def _integer_resource(name: str) -> bool:
    """IsIntegerResourceName (pkg/apis/core/helper): the standard integer resources (pods,
    services, ...: none of them a container resource) and every extended resource."""
    return not _native_resource(name) and not name.startswith("requests.")


def _quantity_problems(name: str, value, at: str) -> list[FieldError]:
    """ValidateResourceQuantityValue: not negative; a whole number for an integer resource
    (`value.MilliValue()%1000 != 0`: must be an integer). Upstream hands field.Invalid the
    Quantity itself, which field.Error renders with Go's %#v (a resource.Quantity{...} struct
    dump) [unsure of its exact fields for every input]; labkit writes the quantity's text."""
    from labkit.quantity import QuantityError, parse

    try:
        amount, _ = parse(str(value))
    except QuantityError:
        return []       # the decoder already refused an unparsable quantity
    errors = []
    if amount < 0:
        errors.append(field_invalid(at, str(value), "must be greater than or equal to 0"))
    milli = math.ceil(abs(amount) * 1000)          # MilliValue rounds away from zero
    if _integer_resource(name) and milli % 1000 != 0:
        errors.append(field_invalid(at, str(value), "must be an integer"))
    return errors


def _validate_resource_requirements(resources: dict, path: str) -> list[FieldError]:
    """ValidateContainerResourceRequirements -> validateResourceRequirements
    (pkg/apis/core/validation/validation.go): for each limit its name and quantity; for each
    request its name and quantity, then against the limit: a resource that cannot be
    overcommitted (an extended resource, hugepages) needs a limit (`Limit must be set for non
    overcommitable resources`) equal to the request (`must be equal to R limit of L`); any other
    request must not exceed its limit. Go ranges over the maps in random order; labkit sorts."""
    errors = []
    limits = resources.get("limits") if isinstance(resources.get("limits"), dict) else {}
    requests = resources.get("requests") if isinstance(resources.get("requests"), dict) else {}
    for name in sorted(limits):
        at = f"{path}.limits[{name}]"
        errors += _resource_name_problems(name, at)
        errors += _quantity_problems(name, limits[name], at)
    for name in sorted(requests):
        at = f"{path}.requests[{name}]"
        errors += _resource_name_problems(name, at)
        errors += _quantity_problems(name, requests[name], at)
        errors += _request_against_limit(name, requests[name], limits.get(name), path)
    return errors


def _request_against_limit(name: str, request, limit, path: str) -> list[FieldError]:
    from labkit.quantity import QuantityError, parse

    try:
        wanted = parse(str(request))[0]
        capped = None if limit is None else parse(str(limit))[0]
    except QuantityError:
        return []
    if capped is None:
        if not _overcommit_allowed(name):
            return [field_required(f"{path}.limits", "Limit must be set for non overcommitable resources")]
        return []
    if wanted != capped and not _overcommit_allowed(name):
        return [field_invalid(f"{path}.requests", str(request), f"must be equal to {name} limit of {limit}")]
    if wanted > capped:
        return [field_invalid(f"{path}.requests", str(request), f"must be less than or equal to {name} limit of {limit}")]
    return []


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
        errors = _validate_containers(spec.get("containers"), "spec.containers")
        for i, c in enumerate(spec.get("initContainers") or []):
            if isinstance(c, dict):     # validateInitContainers: the same resource requirements
                errors += _validate_resource_requirements(c.get("resources") or {},
                                                          f"spec.initContainers[{i}].resources")
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
