"""The LimitRanger admission plugin (plugin/pkg/admission/limitranger/admission.go, v1.34) and
the LimitRange kind it reads (core/v1; pkg/apis/core/v1/defaults.go SetDefaults_LimitRangeItem,
pkg/apis/core/validation ValidateLimitRange).

The plugin acts on Pods when they are created (not on updates: containers cannot change, nor on
subresources; DefaultLimitRangerActions.SupportsAttributes), with every LimitRange of the Pod's
namespace, in the order they are listed:
- mutating (MutateLimit, mergePodResourceRequirements): each container and init container gets
  the `default` limits and `defaultRequest` requests of the Container items for the resources it
  does not set, and the Pod is annotated `kubernetes.io/limit-ranger: LimitRanger plugin set:
  cpu, memory request for container web; cpu limit for container web`;
- validating (PodValidateLimitFunc): Container items' min, max and maxLimitRequestRatio hold for
  every container and init container, Pod items' for the Pod's aggregate requests and limits
  (the larger of the regular containers' sum and each init container); every violation is
  reported, joined as utilerrors.NewAggregate joins them (upstream walks Go maps, in no fixed
  order; labkit sorts by resource name), in a 403.

LimitRange items of type PersistentVolumeClaim are served and validated, but claims are not
checked against them (no lab creates claims with storage requests to police).
"""

from __future__ import annotations

from fractions import Fraction

from labkit.apiserver import defaults
from labkit.apiserver.admission import Attributes, forbidden_by
from labkit.apiserver.errors import FieldError, field_forbidden, field_invalid, field_required, field_unsupported
from labkit.quantity import QuantityError, canonical, format_quantity, parse
from labkit.apiserver.resources import ResourceType, Strategy

LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger"
LIMIT_TYPES = ["Container", "PersistentVolumeClaim", "Pod"]
MAX_MILLI_VALUE = (2 ** 63 - 1) // 1000        # resource.MaxMilliValue


def _q(value) -> Fraction:
    try:
        return parse(str(value))[0]
    except QuantityError:
        return Fraction(0)


def _s(value) -> str:
    """Quantity.String(): the canonical form."""
    try:
        return canonical(str(value))
    except QuantityError:
        return str(value)


def _value(q: Fraction) -> int:
    return -((-q.numerator) // q.denominator)        # Quantity.Value() rounds up


def _milli(q: Fraction) -> int:
    q = q * 1000
    return -((-q.numerator) // q.denominator)


def _observed(req, lim, enforced) -> tuple[int, int, int]:
    """requestLimitEnforcedValues: milli-units when none of them overflows, else units."""
    r, l, e = _value(_q(req or 0)), _value(_q(lim or 0)), _value(_q(enforced))
    if r <= MAX_MILLI_VALUE and l <= MAX_MILLI_VALUE and e <= MAX_MILLI_VALUE:
        return _milli(_q(req or 0)), _milli(_q(lim or 0)), _milli(_q(enforced))
    return r, l, e


# -- defaults and the kind ---------------------------------------------------------------------------

@defaults.defaulter("V1LimitRangeItem")
def limit_range_item(item: dict) -> None:
    # SetDefaults_LimitRangeItem: a Container item's default limit falls back to max, its default
    # request to the default limit, then to min
    if item.get("type") != "Container":
        return
    default = item.setdefault("default", {})
    request = item.setdefault("defaultRequest", {})
    for key, value in (item.get("max") or {}).items():
        default.setdefault(key, value)
    for key, value in default.items():
        request.setdefault(key, value)
    for key, value in (item.get("min") or {}).items():
        request.setdefault(key, value)
    if not default:
        del item["default"]
    if not request:
        del item["defaultRequest"]


class LimitRangeStrategy(Strategy):
    def validate(self, obj):
        """ValidateLimitRange (the checks between min, max, default, defaultRequest and the ratio)."""
        errors: list[FieldError] = []
        for i, item in enumerate((obj.get("spec") or {}).get("limits") or []):
            path = f"spec.limits[{i}]"
            kind = item.get("type", "")
            if not kind:
                errors.append(field_required(f"{path}.type"))
            elif kind not in LIMIT_TYPES:
                errors.append(field_unsupported(f"{path}.type", kind, LIMIT_TYPES))
            if kind == "Pod":
                for key in ("default", "defaultRequest"):
                    if item.get(key):
                        errors.append(field_forbidden(f"{path}.{key}", "may not be specified when `type` is 'Pod'"))
            lists = {key: item.get(key) or {} for key in ("min", "max", "default", "defaultRequest",
                                                          "maxLimitRequestRatio")}
            for name in sorted(set().union(*lists.values())):
                lo, hi = lists["min"].get(name), lists["max"].get(name)
                dflt, dreq = lists["default"].get(name), lists["defaultRequest"].get(name)
                ratio = lists["maxLimitRequestRatio"].get(name)
                if lo is not None and hi is not None and _q(lo) > _q(hi):
                    errors.append(field_invalid(f"{path}.min[{name}]", _s(lo),
                                                f"min value {_s(lo)} is greater than max value {_s(hi)}"))
                if dreq is not None and lo is not None and _q(lo) > _q(dreq):
                    errors.append(field_invalid(f"{path}.defaultRequest[{name}]", _s(dreq),
                                                f"min value {_s(lo)} is greater than default request value {_s(dreq)}"))
                if dreq is not None and hi is not None and _q(dreq) > _q(hi):
                    errors.append(field_invalid(f"{path}.defaultRequest[{name}]", _s(dreq),
                                                f"default request value {_s(dreq)} is greater than max value {_s(hi)}"))
                if dreq is not None and dflt is not None and _q(dreq) > _q(dflt):
                    errors.append(field_invalid(f"{path}.defaultRequest[{name}]", _s(dreq),
                                                f"default request value {_s(dreq)} is greater than default limit value "
                                                f"{_s(dflt)}"))
                if dflt is not None and lo is not None and _q(lo) > _q(dflt):
                    errors.append(field_invalid(f"{path}.default[{name}]", _s(lo),
                                                f"min value {_s(lo)} is greater than default value {_s(dflt)}"))
                if dflt is not None and hi is not None and _q(dflt) > _q(hi):
                    errors.append(field_invalid(f"{path}.default[{name}]", _s(hi),
                                                f"default value {_s(dflt)} is greater than max value {_s(hi)}"))
                if ratio is not None and _q(ratio) < 1:
                    errors.append(field_invalid(f"{path}.maxLimitRequestRatio[{name}]", _s(ratio),
                                                f"ratio {_s(ratio)} is less than 1"))
        return errors


def limit_range_type() -> ResourceType:
    return ResourceType("", "v1", "limitranges", "LimitRange", True, LimitRangeStrategy(), "limitrange", ["limits"])


# -- the plugin -------------------------------------------------------------------------------------

def _applies(attrs: Attributes) -> bool:
    rt = attrs.rt
    return ((rt.group, rt.resource) == ("", "pods") and not attrs.subresource and attrs.operation == "CREATE"
            and isinstance(attrs.obj, dict))


def _merge(container: dict, requests: dict, limits: dict, prefix: str, notes: list[str]) -> None:
    """mergeContainerResources."""
    resources = container.setdefault("resources", {})
    set_limits = [k for k in limits if k not in (resources.get("limits") or {})]
    set_requests = [k for k in requests if k not in (resources.get("requests") or {})]
    for key in set_limits:
        resources.setdefault("limits", {})[key] = limits[key]
    for key in set_requests:
        resources.setdefault("requests", {})[key] = requests[key]
    name = container.get("name", "")
    if set_requests:
        notes.append(", ".join(sorted(set_requests)) + f" request for {prefix} {name}")
    if set_limits:
        notes.append(", ".join(sorted(set_limits)) + f" limit for {prefix} {name}")


def _min(kind: str, name: str, enforced, requests: dict, limits: dict) -> str | None:
    req, lim = requests.get(name), limits.get(name)
    r, l, e = _observed(req, lim, enforced)
    if req is None:
        return f"minimum {name} usage per {kind} is {_s(enforced)}.  No request is specified"
    if r < e:
        return f"minimum {name} usage per {kind} is {_s(enforced)}, but request is {_s(req)}"
    if lim is not None and l < e:
        return f"minimum {name} usage per {kind} is {_s(enforced)}, but limit is {_s(lim)}"
    return None


def _max(kind: str, name: str, enforced, requests: dict, limits: dict) -> str | None:
    req, lim = requests.get(name), limits.get(name)
    r, l, e = _observed(req, lim, enforced)
    if lim is None:
        return f"maximum {name} usage per {kind} is {_s(enforced)}.  No limit is specified"
    if l > e:
        return f"maximum {name} usage per {kind} is {_s(enforced)}, but limit is {_s(lim)}"
    if req is not None and r > e:
        return f"maximum {name} usage per {kind} is {_s(enforced)}, but request is {_s(req)}"
    return None


def _ratio(kind: str, name: str, enforced, requests: dict, limits: dict) -> str | None:
    req, lim = requests.get(name), limits.get(name)
    r, l, _ = _observed(req, lim, enforced)
    if req is None or r == 0:
        return (f"{name} max limit to request ratio per {kind} is {_s(enforced)}, but no request is specified or "
                "request is 0")
    if lim is None or l == 0:
        return (f"{name} max limit to request ratio per {kind} is {_s(enforced)}, but no limit is specified or "
                "limit is 0")
    observed = l / r
    shown = observed
    ceiling = float(_value(_q(enforced)))
    if _value(_q(enforced)) <= MAX_MILLI_VALUE:
        observed, ceiling = observed * 1000, float(_milli(_q(enforced)))
    if observed > ceiling:
        return f"{name} max limit to request ratio per {kind} is {_s(enforced)}, but provided ratio is {shown:f}"
    return None


def _pod_totals(spec: dict, key: str) -> dict:
    """resourcehelper.PodRequests / PodLimits for container-level resources: the regular
    containers' sum, raised to any init container's value (restartable init containers add up);
    each total keeps the format of the first quantity added (Quantity.Add)."""
    total: dict[str, Fraction] = {}
    formats: dict[str, str] = {}

    def values(c):
        out = {}
        for name, text in ((c.get("resources") or {}).get(key) or {}).items():
            try:
                out[name], fmt = parse(str(text))
            except QuantityError:
                continue
            formats.setdefault(name, fmt)
        return out
    for c in spec.get("containers") or []:
        for name, value in values(c).items():
            total[name] = total.get(name, Fraction(0)) + value
    sidecars: dict[str, Fraction] = {}
    for c in spec.get("initContainers") or []:
        for name, value in values(c).items():
            if c.get("restartPolicy") == "Always":
                sidecars[name] = sidecars.get(name, Fraction(0)) + value
                total[name] = total.get(name, Fraction(0)) + value
            else:
                total[name] = max(total.get(name, Fraction(0)), sidecars.get(name, Fraction(0)) + value)
    return {name: format_quantity(value, formats[name]) for name, value in total.items()}


class LimitRanger:
    def __init__(self, store):
        self.store = store

    def _ranges(self, namespace: str) -> list[dict]:
        return self.store.list("/limitranges", namespace)[0]

    def admit(self, attrs: Attributes) -> None:
        if not _applies(attrs):
            return
        pod = attrs.obj
        spec = pod.setdefault("spec", {})
        for limit_range in self._ranges(attrs.namespace):
            # defaultContainerResourceRequirements: the Container items' defaults, later items winning
            requests, limits = {}, {}
            for item in (limit_range.get("spec") or {}).get("limits") or []:
                if item.get("type") == "Container":
                    requests.update(item.get("defaultRequest") or {})
                    limits.update(item.get("default") or {})
            notes: list[str] = []
            for container in spec.get("containers") or []:
                _merge(container, requests, limits, "container", notes)
            for container in spec.get("initContainers") or []:
                _merge(container, requests, limits, "init container", notes)
            if notes:
                pod.setdefault("metadata", {}).setdefault("annotations", {})[LIMIT_RANGER_ANNOTATION] = (
                    "LimitRanger plugin set: " + "; ".join(notes))

    def validate(self, attrs: Attributes) -> None:
        if not _applies(attrs):
            return
        spec = attrs.obj.get("spec") or {}
        for limit_range in self._ranges(attrs.namespace):
            problems: list[str] = []
            for item in (limit_range.get("spec") or {}).get("limits") or []:
                kind = item.get("type")
                checks = [(fn, item.get(key) or {}) for fn, key in ((_min, "min"), (_max, "max"),
                                                                    (_ratio, "maxLimitRequestRatio"))]
                if kind == "Container":
                    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
                        resources = container.get("resources") or {}
                        for fn, bounds in checks:
                            for name in sorted(bounds):
                                problem = fn(kind, name, bounds[name], resources.get("requests") or {},
                                             resources.get("limits") or {})
                                if problem:
                                    problems.append(problem)
                elif kind == "Pod":
                    requests, limits = _pod_totals(spec, "requests"), _pod_totals(spec, "limits")
                    for fn, bounds in checks:
                        for name in sorted(bounds):
                            problem = fn(kind, name, bounds[name], requests, limits)
                            if problem:
                                problems.append(problem)
            if problems:
                raise forbidden_by(attrs, problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")
