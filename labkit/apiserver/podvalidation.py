"""Validation of a Pod spec's containers and init containers, with kube-apiserver v1.34's texts.

One validator for every reader of Pods: the API server's Pod and pod-template strategies
(labkit/apiserver/registry/: pod.py, core.py, batch.py) and the labs' own Pod files (labkit.pods,
which the resources, numa and mounts commands read) give the same messages for the same mistakes.

pkg/apis/core/validation/validation.go, in the order ValidatePodSpec calls them:

* `validateContainers` (spec.containers): at least one; for each, `validateContainerCommon`
  (name required and a DNS-1123 label, image required, `validateContainerPorts`, the resource
  names and `ValidateContainerResourceRequirements`), then a name already used by an earlier
  container is `Duplicate value`, then `restartPolicy` is `Forbidden: may not be set for non-init
  containers`; then `checkHostPortConflicts` across all containers.
* `validateInitContainers` (spec.initContainers): the same common checks; `restartPolicy` may only
  be `Always` (`validateInitContainerRestartPolicy`, a sidecar); a name used by any regular
  container or earlier init container is `Duplicate value`; host ports are checked per init
  container (they run one by one), and upstream passes the list's path with the container as
  index 0, so a conflict is reported at `spec.initContainers[0].ports[j].hostPort` whichever init
  container it is in.
* `validateContainerPorts`: a port name is an IANA_SVC_NAME (apimachinery util/validation
  `IsValidPortName`: at most 15 characters, only a-z, 0-9 and '-', at least one letter, no '--',
  no '-' at either end) and unique within the container; containerPort is required and in
  1-65535 (`IsValidPortNum`); a hostPort that is set is in 1-65535; the protocol is required
  (defaulted to TCP) and one of SCTP, TCP, UDP.
* `validateContainerResourceName`: a name without a domain is a standard container resource
  (cpu, memory, ephemeral-storage, hugepages-*); outside kubernetes.io not `requests.*`.
* `ValidateContainerResourceRequirements` (validateResourceRequirements) on the defaulted requests
  and limits: no negative quantity; a request above its limit is `must be less than or equal to
  <resource> limit of <limit>` (reported on `...resources.requests`, as upstream does); a resource
  that cannot be overcommitted (hugepages, extended resources, `IsOvercommitAllowed`) needs a
  limit and a request equal to it; hugepages need cpu or memory. Upstream iterates Go maps; here
  resources are taken in name order.

* `ValidateSecurityContext` (the last of validateContainerCommon's checks reconstructed here):
  `allowPrivilegeEscalation: false` with `privileged: true`, or with `CAP_SYS_ADMIN` (spelt so) in
  `capabilities.add`, is `Invalid value` on `...securityContext`, the value printed as Go's %#v
  prints the internal core.SecurityContext (field.Error.ErrorBody's fallback for a struct): every
  field, a pointer as its type and address, which differ from one request to the next upstream.

Not reconstructed here: probes, lifecycle hooks, env, volume mounts, the rest of security contexts,
terminationMessagePolicy and imagePullPolicy (defaulted, so never empty in a stored Pod),
resizePolicy, ephemeral containers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from labkit.apiserver.errors import (FieldError, RawJSON, field_forbidden, field_invalid, field_required,
                                     field_unsupported)
from labkit.apiserver.validation import dns1123_label_problems
from labkit.quantity import Quantity, QuantityError
from labkit.jsondata import json_copy

# supportedPortProtocols
PORT_PROTOCOLS = ("SCTP", "TCP", "UDP")
PORT_RANGE = "must be between 1 and 65535, inclusive"      # IsValidPortNum's InclusiveRangeError(1, 65535)
# pkg/apis/core/helper standardContainerResources (IsStandardContainerResourceName: also hugepages-*)
STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")

# ValidatePodUpdate's Forbidden on spec (updatablePodSpecFields joined by ","); upstream follows it
# with a newline and go-cmp's diff of the two specs, which labkit does not print
POD_UPDATE_FORBIDDEN = ("pod updates may not change fields other than `spec.containers[*].image`,"
                        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
                        "set to 1 if it was previously negative)")

_PORT_NAME_CHARSET = re.compile(r"^[-a-z0-9]+$")
_PORT_NAME_LETTER = re.compile(r"[a-z]")

Requirements = Callable[[dict, str, int], "tuple[dict[str, Quantity], dict[str, Quantity]]"]


def port_name_problems(name: str) -> list[str]:
    """IsValidPortName (k8s.io/apimachinery/pkg/util/validation/validation.go)."""
    problems = []
    if len(name) > 15:
        problems.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARSET.match(name):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.search(name):
        problems.append("must contain at least one letter (a-z)")
    if "--" in name:
        problems.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def container_port_errors(ports, path: str) -> list[FieldError]:
    """validateContainerPorts."""
    errors: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(ports if isinstance(ports, list) else []):
        if not isinstance(port, dict):
            continue
        at = f"{path}[{i}]"
        name = port.get("name") or ""
        if name:
            problems = port_name_problems(name)
            if problems:
                errors += [field_invalid(f"{at}.name", name, msg) for msg in problems]
            elif name in names:
                errors.append(FieldError("Duplicate value", f"{at}.name", "", name, True))
            else:
                names.add(name)
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


def resource_name_errors(resources: dict, path: str) -> list[FieldError]:
    """validateContainerResourceName for the names of limits and requests."""
    errors = []
    for kind in ("limits", "requests"):
        values = resources.get(kind) if isinstance(resources, dict) else None
        for name in values if isinstance(values, dict) else ():
            at = f"{path}.{kind}[{name}]"
            if "/" not in name:
                if name not in STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
                    errors.append(field_invalid(at, name, "must be a standard resource type or fully qualified"))
            else:
                domain = name.split("/", 1)[0]
                native = domain == "kubernetes.io" or domain.endswith(".kubernetes.io")
                if not native and name.startswith("requests."):
                    errors.append(field_invalid(at, name, "doesn't follow extended resource name standard"))
    return errors


def overcommit_allowed(resource: str) -> bool:
    """IsOvercommitAllowed: a native resource (no domain, or kubernetes.io) that is not hugepages."""
    domain = resource.split("/")[0] if "/" in resource else ""
    native = not domain or domain == "kubernetes.io" or domain.endswith(".kubernetes.io")
    return native and not resource.startswith("hugepages-")


def integer_resource(resource: str) -> bool:
    """IsIntegerResourceName (pkg/apis/core/helper): every extended resource (a domain other than
    kubernetes.io, not requests.*); the standard integer resources (pods, services, …) are none
    of a container's."""
    domain = resource.split("/")[0] if "/" in resource else ""
    native = not domain or domain == "kubernetes.io" or domain.endswith(".kubernetes.io")
    return not native and not resource.startswith("requests.")


def _quantity_value_errors(at: str, resource: str, quantity: Quantity) -> list[FieldError]:
    """ValidateResourceQuantityValue: not negative; a whole number for an integer resource
    (`MilliValue()%1000 != 0`: must be an integer). Upstream hands field.Invalid the Quantity
    itself, which Go prints as a struct dump; labkit writes the quantity's text."""
    errors = []
    if quantity.value < 0:
        errors.append(field_invalid(at, str(quantity), "must be greater than or equal to 0"))
    if integer_resource(resource) and math.ceil(abs(quantity.value) * 1000) % 1000 != 0:
        errors.append(field_invalid(at, str(quantity), "must be an integer"))
    return errors


def requirement_errors(path: str, requests: dict[str, Quantity], limits: dict[str, Quantity]) -> list[FieldError]:
    """validateResourceRequirements on defaulted requests and limits (values, not names)."""
    errors: list[FieldError] = []
    for resource in sorted(limits):
        errors += _quantity_value_errors(f"{path}.limits[{resource}]", resource, limits[resource])
    for resource in sorted(requests):
        request = requests[resource]
        errors += _quantity_value_errors(f"{path}.requests[{resource}]", resource, request)
        limit = limits.get(resource)
        if limit is not None:
            if request.value != limit.value and not overcommit_allowed(resource):
                errors.append(field_invalid(f"{path}.requests", str(request),
                                            f"must be equal to {resource} limit of {limit}"))
            elif request.value > limit.value:
                errors.append(field_invalid(f"{path}.requests", str(request),
                                            f"must be less than or equal to {resource} limit of {limit}"))
        elif not overcommit_allowed(resource):
            errors.append(field_required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
    names = set(requests) | set(limits)
    if any(n.startswith("hugepages-") for n in names) and not names & {"cpu", "memory"}:
        errors.append(field_forbidden(path, "HugePages require cpu or memory"))
    return errors


def stored_requirements(container: dict, kind: str, index: int):
    """The requests and limits of a container as the API server holds it (decoded, so every
    quantity parses, and defaulted: a limit without a request is the request too)."""
    resources = container.get("resources") or {}

    def parsed(values) -> dict[str, Quantity]:
        out = {}
        for name, text in (values.items() if isinstance(values, dict) else ()):
            try:
                out[str(name)] = Quantity.parse(text)
            except QuantityError:
                pass            # refused when the body was decoded
        return out
    return parsed(resources.get("requests")), parsed(resources.get("limits"))


def _host_port_conflicts(containers: list, path: str, seen: set[str]) -> list[FieldError]:
    """AccumulateUniqueHostPorts: `<protocol>/<hostIP>/<hostPort>` once per host."""
    errors = []
    for ci, c in enumerate(containers):
        for pi, port in enumerate((c.get("ports") or []) if isinstance(c.get("ports"), list) else []):
            host = port.get("hostPort") if isinstance(port, dict) else 0
            if not host:
                continue
            key = f"{port.get('protocol') or ''}/{port.get('hostIP') or ''}/{host}"
            if key in seen:
                errors.append(FieldError("Duplicate value", f"{path}[{ci}].ports[{pi}].hostPort", "", key, True))
            else:
                seen.add(key)
    return errors


def with_defaults(spec: dict) -> dict:
    """A copy of a PodSpec's containers as the API server's defaulting leaves them
    (pkg/apis/core/v1/defaults.go): a port without protocol is TCP (SetDefaults_ContainerPort), a
    resource with a limit and no request is requested at its limit (SetDefaults_Pod). For readers
    of Pod files, which did not go through the API server's decoding and defaulting."""
    spec = json_copy(spec) if isinstance(spec, dict) else {}
    for kind in ("containers", "initContainers"):
        for c in spec.get(kind) if isinstance(spec.get(kind), list) else []:
            if not isinstance(c, dict):
                continue
            for port in c.get("ports") if isinstance(c.get("ports"), list) else []:
                if isinstance(port, dict) and not port.get("protocol"):
                    port["protocol"] = "TCP"
            resources = c.get("resources")
            if isinstance(resources, dict) and isinstance(resources.get("limits"), dict) and resources["limits"]:
                requests = resources.get("requests") if isinstance(resources.get("requests"), dict) else {}
                resources["requests"] = {**resources["limits"], **requests}
    return spec


# core.SecurityContext's fields in their declared order (pkg/apis/core/types.go), each a pointer
# (JSON name, Go type it points to)
SECURITY_CONTEXT_FIELDS = (
    ("Capabilities", "capabilities", "core.Capabilities"), ("Privileged", "privileged", "bool"),
    ("SELinuxOptions", "seLinuxOptions", "core.SELinuxOptions"),
    ("WindowsOptions", "windowsOptions", "core.WindowsSecurityContextOptions"),
    ("RunAsUser", "runAsUser", "int64"), ("RunAsGroup", "runAsGroup", "int64"), ("RunAsNonRoot", "runAsNonRoot", "bool"),
    ("ReadOnlyRootFilesystem", "readOnlyRootFilesystem", "bool"),
    ("AllowPrivilegeEscalation", "allowPrivilegeEscalation", "bool"), ("ProcMount", "procMount", "core.ProcMountType"),
    ("SeccompProfile", "seccompProfile", "core.SeccompProfile"), ("AppArmorProfile", "appArmorProfile", "core.AppArmorProfile"))


def _go_security_context(sc: dict) -> RawJSON:
    """%#v of a *core.SecurityContext as field.Error prints it (dereferenced): its pointers by
    address, here made up (upstream's are wherever the request's objects were allocated)."""
    parts = []
    for i, (name, key, kind) in enumerate(SECURITY_CONTEXT_FIELDS):
        address = "nil" if sc.get(key) is None else f"0xc000{0x4a2b10 + 8 * i:06x}"
        parts.append(f"{name}:(*{kind})({address})")
    return RawJSON("core.SecurityContext{" + ", ".join(parts) + "}")


def security_context_errors(sc, at: str) -> list[FieldError]:
    """ValidateSecurityContext's rules that tie allowPrivilegeEscalation to the privileges a
    container is given (pkg/apis/core/validation/validation.go): a privileged container, or one
    that adds CAP_SYS_ADMIN, can always escalate."""
    if not isinstance(sc, dict) or sc.get("allowPrivilegeEscalation") is not False:
        return []
    errors = []
    if sc.get("privileged") is True:
        errors.append(field_invalid(at, _go_security_context(sc), "cannot set `allowPrivilegeEscalation` to false and "
                                                                  "`privileged` to true"))
    capabilities = sc.get("capabilities")
    added = capabilities.get("add") if isinstance(capabilities, dict) else None
    for capability in added if isinstance(added, list) else []:
        if capability == "CAP_SYS_ADMIN":
            errors.append(field_invalid(at, _go_security_context(sc), "cannot set `allowPrivilegeEscalation` to false "
                                                                      "and `capabilities.Add` CAP_SYS_ADMIN"))
    return errors


def _common(c: dict, at: str, kind: str, index: int, requirements: Requirements,
            require_image: bool) -> list[FieldError]:
    """validateContainerCommon (the parts reconstructed here)."""
    errors: list[FieldError] = []
    name = c.get("name") or ""
    if not name:
        errors.append(field_required(f"{at}.name"))
    else:
        errors += [field_invalid(f"{at}.name", name, msg) for msg in dns1123_label_problems(name)]
    if require_image and not c.get("image"):
        errors.append(field_required(f"{at}.image"))
    errors += container_port_errors(c.get("ports") or [], f"{at}.ports")
    errors += resource_name_errors(c.get("resources") or {}, f"{at}.resources")
    requests, limits = requirements(c, kind, index)
    errors += requirement_errors(f"{at}.resources", requests, limits)
    errors += security_context_errors(c.get("securityContext"), f"{at}.securityContext")
    return errors


def validate_pod_containers(spec: dict, path: str = "spec", requirements: Requirements = stored_requirements,
                            require_image: bool = True) -> list[FieldError]:
    """validateContainers then validateInitContainers of a PodSpec at `path`. `requirements`
    gives a container's defaulted requests and limits as Quantities; `require_image=False` for
    the labs' Pod files, whose containers run host commands without an image."""
    errors: list[FieldError] = []
    containers = spec.get("containers")
    at = f"{path}.containers"
    if not containers:
        errors.append(field_required(at))
        containers = []
    elif not isinstance(containers, list):
        return [field_invalid(at, containers, "must be a list")]
    regular = [c for c in containers if isinstance(c, dict)]
    names: set[str] = set()
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            errors.append(field_invalid(f"{at}[{i}]", c, "must be an object"))
            continue
        errors += _common(c, f"{at}[{i}]", "containers", i, requirements, require_image)
        name = c.get("name") or ""
        if name in names:
            errors.append(FieldError("Duplicate value", f"{at}[{i}].name", "", name, True))
        else:
            names.add(name)
        if c.get("restartPolicy") is not None:
            errors.append(field_forbidden(f"{at}[{i}].restartPolicy", "may not be set for non-init containers"))
    errors += _host_port_conflicts(regular, at, set())

    init = spec.get("initContainers") or []
    at = f"{path}.initContainers"
    if not isinstance(init, list):
        return errors + [field_invalid(at, init, "must be a list")]
    names = {c.get("name") or "" for c in regular}
    for i, c in enumerate(init):
        if not isinstance(c, dict):
            errors.append(field_invalid(f"{at}[{i}]", c, "must be an object"))
            continue
        errors += _common(c, f"{at}[{i}]", "initContainers", i, requirements, require_image)
        policy = c.get("restartPolicy")
        if policy is not None and policy != "Always":
            errors.append(field_unsupported(f"{at}[{i}].restartPolicy", policy, ["Always"]))
        name = c.get("name") or ""
        if name in names:
            errors.append(FieldError("Duplicate value", f"{at}[{i}].name", "", name, True))
        elif name:
            names.add(name)
        errors += _host_port_conflicts([c], at, set())
    return errors
