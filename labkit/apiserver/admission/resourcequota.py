"""ResourceQuota (v1.34): the kind, what objects are charged, and the ResourceQuota admission plugin.

The kind (pkg/registry/core/resourcequota/strategy.go; pkg/apis/core/validation
ValidateResourceQuota): namespaced, short name `quota`, with a status subresource; a create drops
the status; every spec.hard value must be a valid, non-negative quantity. `kubectl get quota`
prints `REQUEST` and `LIMIT` as `name: used/hard` pairs (pkg/printers/internalversion
printResourceQuota: resources sorted, those named `limits.*` under LIMIT).

What is charged (pkg/quota/v1/evaluator/core and pkg/quota/v1/generic):
- every object of a resource counts for `count/<resource>[.<group>]`; the legacy names `pods`
  (only Pods that are not Succeeded or Failed), `services`, `configmaps`, `secrets`,
  `persistentvolumeclaims`, `replicationcontrollers`, `resourcequotas`;
  `services.loadbalancers` and `services.nodeports` for Services of those types;
- a Pod that is not terminal (PodUsageFunc, QuotaV1Pod): its aggregate requests as `cpu` and
  `requests.cpu`, `memory` and `requests.memory`, `ephemeral-storage` and
  `requests.ephemeral-storage`, its limits as `limits.cpu`, `limits.memory`,
  `limits.ephemeral-storage`, hugepages and extended resources as `requests.<name>`
  (podComputeUsageHelper over resourcehelper.PodRequests/PodLimits: init and sidecar containers
  and pod-level resources as the scheduler counts them);
- a PersistentVolumeClaim its `requests.storage`.
Scopes (podMatchesScopeFunc): Terminating / NotTerminating (activeDeadlineSeconds set or not),
BestEffort / NotBestEffort (QoS class), PriorityClass (scopeSelector In, NotIn, Exists,
DoesNotExist on spec.priorityClassName); a quota with scopes counts only Pods.

The admission plugin (staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go,
quotaEvaluator.checkQuotas;
validating phase, last of the chain before AlwaysDeny): on CREATE of a namespaced object, for
every quota of the namespace that tracks one of the object's resources:
- a Pod must name cpu and memory in every container when the quota tracks them (the evaluator's
  Constraints): `failed quota: NAME: must specify limits.cpu for: web; requests.memory for: web`;
- the quota's status must know the usage of what it limits (the resource quota controller writes
  it): `status unknown for quota: NAME, resources: requests.cpu`;
- used + requested must stay within hard: `exceeded quota: NAME, requested: pods=1, used: pods=2,
  limited: pods=2` (prettyPrint: resource=quantity, sorted, comma-separated, only the exceeded
  resources);
- then the new usage is written to the quota's status.used (unless dry run), so that the next
  request sees it before the controller recalculates. Updates are not charged (a Pod's resources
  do not change here; PVC resizes are not reconstructed).
The resource quota controller (labkit.controllers.resourcequota) recalculates status.hard and
status.used from the objects.
"""

from __future__ import annotations

from fractions import Fraction

from labkit.apiserver import tables
from labkit.apiserver.admission import Attributes, forbidden_by
from labkit.apiserver.errors import field_invalid
from labkit.apiserver.resources import ResourceType, StatusSubresource, Strategy
from labkit.quantity import DECIMAL, Quantity, QuantityError, format_quantity

QUOTA_KEY = "/resourcequotas"

# pkg/quota/v1/evaluator/core/registry.go legacyObjectCountAliases, and the services and
# persistentvolumeclaims evaluators' own names
LEGACY_COUNT_NAMES = {("", "configmaps"): "configmaps", ("", "resourcequotas"): "resourcequotas",
                      ("", "replicationcontrollers"): "replicationcontrollers", ("", "secrets"): "secrets",
                      ("", "services"): "services", ("", "persistentvolumeclaims"): "persistentvolumeclaims"}
# pkg/quota/v1/install/registry.go ignoredResources: never charged, never checked
IGNORED_RESOURCES = {("", "events"), ("", "bindings"), ("", "componentstatuses"), ("authentication.k8s.io", "tokenreviews"),
                     ("authentication.k8s.io", "selfsubjectreviews"), ("authorization.k8s.io", "subjectaccessreviews"),
                     ("authorization.k8s.io", "selfsubjectaccessreviews"),
                     ("authorization.k8s.io", "localsubjectaccessreviews"),
                     ("authorization.k8s.io", "selfsubjectrulesreviews")}
POD_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass")
# pods.go validationSet: "it was a mistake, but if a quota tracks cpu or memory related resources,
# the incoming pod is required to have those values set"
VALIDATION_SET = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")


def count_name(group: str, resource: str) -> str:
    """ObjectCountQuotaResourceNameFor: count/<resource>[.<group>]."""
    return f"count/{resource}.{group}" if group else f"count/{resource}"


# -- usage ---------------------------------------------------------------------------------------

def _quantity(value) -> Quantity:
    try:
        return Quantity.parse(value)
    except (QuantityError, ValueError):
        return Quantity.of(0)


def _terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_compute_usage(pod: dict) -> dict[str, Quantity]:
    """podComputeUsageHelper over PodRequests and PodLimits."""
    from labkit.pods import pod_from_dict, pod_limits, pod_requests
    body = {"kind": "Pod", "metadata": {"name": (pod.get("metadata") or {}).get("name") or "pod"},
            "spec": pod.get("spec") or {}}
    try:
        parsed = pod_from_dict(body, defaulting=False, validation=False)
    except Exception:       # a stored Pod is valid; anything else is charged nothing but its count
        return {"pods": Quantity.of(1)}
    result = {"pods": Quantity.of(1)}
    for name, q in pod_requests(parsed).items():
        if name in ("cpu", "memory", "ephemeral-storage"):
            result[name] = result[f"requests.{name}"] = q
        elif name.startswith("hugepages-"):
            result[name] = result[f"requests.{name}"] = q
        elif "/" in name:      # an extended resource: only requests.<name> is quota'd
            result[f"requests.{name}"] = q
    for name, q in pod_limits(parsed).items():
        if name in ("cpu", "memory", "ephemeral-storage"):
            result[f"limits.{name}"] = q
    return result


def usage(group: str, resource: str, obj: dict) -> dict[str, Quantity]:
    """The evaluator's Usage of one object."""
    result = {count_name(group, resource): Quantity.of(1)}
    legacy = LEGACY_COUNT_NAMES.get((group, resource))
    if legacy:
        result[legacy] = Quantity.of(1)
    if (group, resource) == ("", "pods") and not _terminal(obj):
        result.update(pod_compute_usage(obj))
    elif (group, resource) == ("", "services"):
        spec = obj.get("spec") or {}
        if spec.get("type") == "LoadBalancer":
            result["services.loadbalancers"] = Quantity.of(1)
        if spec.get("type") in ("NodePort", "LoadBalancer"):
            result["services.nodeports"] = Quantity.of(len(spec.get("ports") or []))
    elif (group, resource) == ("", "persistentvolumeclaims"):
        storage = ((((obj.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage"))
        if storage is not None:
            result["requests.storage"] = _quantity(storage)
    return result


def _best_effort(pod: dict) -> bool:
    spec = pod.get("spec") or {}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = c.get("resources") or {}
        if any(k in ("cpu", "memory") for part in ("requests", "limits") for k in (resources.get(part) or {})):
            return False
    return not any(k in ("cpu", "memory") for part in ("requests", "limits")
                   for k in ((spec.get("resources") or {}).get(part) or {}))


def _scope_matches(selector: dict, pod: dict) -> bool:
    """podMatchesScopeFunc."""
    spec = pod.get("spec") or {}
    name = selector.get("scopeName")
    if name in ("Terminating", "NotTerminating"):
        return (spec.get("activeDeadlineSeconds") is not None) == (name == "Terminating")
    if name in ("BestEffort", "NotBestEffort"):
        return _best_effort(pod) == (name == "BestEffort")
    if name == "PriorityClass":
        value, operator = spec.get("priorityClassName") or "", selector.get("operator")
        values = selector.get("values") or []
        return {"Exists": bool(value), "DoesNotExist": not value, "In": value in values,
                "NotIn": value not in values}.get(operator, False)
    return False


def scope_selectors(quota: dict) -> list[dict]:
    """getScopeSelectorsFromQuota: spec.scopes as Exists selectors, then spec.scopeSelector's."""
    spec = quota.get("spec") or {}
    selectors = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or []]
    return selectors + list((spec.get("scopeSelector") or {}).get("matchExpressions") or [])


def matches(quota: dict, group: str, resource: str, obj: dict) -> bool:
    """The evaluator's Matches (generic.Matches): the quota's scopes select the object (scoped
    quotas select Pods only)."""
    selectors = scope_selectors(quota)
    if not selectors:
        return True
    if (group, resource) != ("", "pods"):
        return False
    return all(_scope_matches(s, obj) for s in selectors)


def _tracked(hard: dict, group: str, resource: str) -> list[str]:
    """MatchingResources: the quota's hard names this kind of object is charged for."""
    names = {count_name(group, resource)}
    if (group, resource) in LEGACY_COUNT_NAMES:
        names.add(LEGACY_COUNT_NAMES[(group, resource)])
    if (group, resource) == ("", "pods"):
        names |= {"pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
                  "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage"}
        return [n for n in hard if n in names or n.startswith(("hugepages-", "requests.hugepages-"))
                or (n.startswith("requests.") and "/" in n)]
    if (group, resource) == ("", "services"):
        names |= {"services.loadbalancers", "services.nodeports"}
    if (group, resource) == ("", "persistentvolumeclaims"):
        names.add("requests.storage")
    return [n for n in hard if n in names]


def pretty(values: dict[str, Quantity]) -> str:
    """prettyPrint: `name=quantity`, sorted by name, comma-separated."""
    return ",".join(f"{k}={format_quantity(values[k].value, values[k].format)}" for k in sorted(values))


def as_text(values: dict[str, Quantity]) -> dict[str, str]:
    return {k: format_quantity(v.value, v.format) for k, v in values.items()}


# -- the kind ------------------------------------------------------------------------------------

def _quota_row(obj):
    status = obj.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    request, limit = [], []
    for name in sorted(hard):
        column = limit if name.split(".")[0] == "limits" and "." in name else request
        column.append(f"{name}: {used.get(name, '0')}/{hard[name]}")
    return [tables._name(obj), tables.age(obj), ", ".join(request), ", ".join(limit)]


# printers.go resourceQuotaColumnDefinitions
QUOTA_PRINTER = ([tables.NAME, tables.AGE,
                  tables._col("Request", description="Request represents a minimum amount of cpu/memory that a "
                                                     "container may consume."),
                  tables._col("Limit", description="Limits control the maximum amount of cpu/memory that a "
                                                   "container may use independent of contention on the node.")],
                 _quota_row)


def _quantity_errors(values: dict, path: str) -> list:
    errors = []
    for name, value in (values or {}).items():
        try:
            q = Quantity.parse(value)
        except (QuantityError, ValueError) as exc:
            errors.append(field_invalid(f"{path}[{name}]", value, str(exc)))
            continue
        if q.value < 0:
            errors.append(field_invalid(f"{path}[{name}]", value, "must be greater than or equal to 0"))
    return errors


class ResourceQuotaStatusSubresource(StatusSubresource):
    def validate(self, obj):
        status = obj.get("status") or {}
        return _quantity_errors(status.get("hard"), "status.hard") + _quantity_errors(status.get("used"),
                                                                                          "status.used")


class ResourceQuotaStrategy(Strategy):
    subresources = (ResourceQuotaStatusSubresource(),)
    printer = QUOTA_PRINTER

    def validate(self, obj):
        """ValidateResourceQuotaSpec: the hard values are quantities, none negative."""
        return _quantity_errors((obj.get("spec") or {}).get("hard"), "spec.hard")


def resource_quota_type() -> ResourceType:
    return ResourceType("", "v1", "resourcequotas", "ResourceQuota", True, ResourceQuotaStrategy(),
                        "resourcequota", ["quota"])


# -- the plugin ----------------------------------------------------------------------------------

class ResourceQuota:
    def __init__(self, store):
        self.store = store

    def validate(self, attrs: Attributes) -> None:
        rt = attrs.rt
        if attrs.operation != "CREATE" or attrs.subresource or not rt.namespaced or not attrs.namespace:
            return
        if (rt.group, rt.resource) in IGNORED_RESOURCES:
            return
        with self.store.lock:
            quotas = self.store.list(QUOTA_KEY, attrs.namespace)[0]
            if not quotas:
                return
            self._check(attrs, rt.group, rt.resource, quotas)

    def _check(self, attrs: Attributes, group: str, resource: str, quotas: list[dict]) -> None:
        """quotaEvaluator.checkQuotas: first every matching quota's constraints and usage stats,
        then used + requested against hard, quota by quota."""
        obj = attrs.obj
        interesting = []
        for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
            name = quota["metadata"]["name"]
            status = quota.get("status") or {}
            tracked = _tracked(status.get("hard") or {}, group, resource)
            if not tracked or not matches(quota, group, resource, obj):
                continue
            if (group, resource) == ("", "pods"):
                missing = self._missing(obj, tracked)
                if missing:
                    raise forbidden_by(attrs, f"failed quota: {name}: must specify {missing}")
            if any(n not in (status.get("used") or {}) for n in tracked):      # hasUsageStats
                raise forbidden_by(attrs, f"status unknown for quota: {name}, resources: {','.join(sorted(tracked))}")
            interesting.append((quota, tracked))
        delta = usage(group, resource, obj)
        updates = []
        for quota, tracked in interesting:
            name = quota["metadata"]["name"]
            hard = quota["status"]["hard"]
            requested = {n: delta[n] for n in tracked if n in delta}
            if not requested:
                continue
            used = {n: _quantity(v) for n, v in quota["status"]["used"].items()}
            new_usage = dict(used)
            for n, q in requested.items():
                new_usage[n] = used[n].add(q) if n in used else q
            exceeded = [n for n in requested if new_usage[n].value > _quantity(hard[n]).value]
            if exceeded:
                raise forbidden_by(attrs, f"exceeded quota: {name}, requested: "
                                          f"{pretty({n: requested[n] for n in exceeded})}, used: "
                                          f"{pretty({n: used[n] for n in exceeded})}, "
                                          f"limited: {pretty({n: _quantity(hard[n]) for n in exceeded})}")
            updates.append((quota, new_usage))
        if attrs.dry_run:
            return
        for quota, new_usage in updates:        # the evaluator writes the reserved usage to the status
            quota = dict(quota, status=dict(quota["status"], used=as_text(new_usage)))
            self.store.put(QUOTA_KEY, quota["metadata"]["namespace"], quota["metadata"]["name"], quota)

    @staticmethod
    def _missing(pod: dict, tracked: list[str]) -> str:
        """podEvaluator.Constraints: each container (regular, then init) must name the cpu and
        memory resources the quota tracks."""
        required = set(tracked) & set(VALIDATION_SET)
        if not required:
            return ""
        if (pod.get("spec") or {}).get("resources"):      # pod-level resources set (PodLevelResources)
            return ""
        missing: dict[str, set[str]] = {}
        spec = pod.get("spec") or {}
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            resources = c.get("resources") or {}
            have = {"pods"}
            for name in (resources.get("requests") or {}):
                if name in ("cpu", "memory"):
                    have |= {name, f"requests.{name}"}
            for name in (resources.get("limits") or {}):
                if name in ("cpu", "memory"):
                    have.add(f"limits.{name}")
            for name in required - have:
                missing.setdefault(name, set()).add(c.get("name", ""))
        return "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))


def _zero() -> Quantity:
    return Quantity(Fraction(0), DECIMAL)


def calculate_usage(quota: dict, objects: dict[tuple[str, str], list[dict]]) -> dict[str, str]:
    """What the resource quota controller writes to status.used (syncResourceQuota,
    quota.CalculateUsage): for every hard resource some evaluator matches, the sum over the
    namespace's objects that the quota's scopes select, zero included."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    used: dict[str, Quantity] = {}
    for (group, resource), items in objects.items():
        tracked = _tracked(hard, group, resource)
        for name in tracked:
            used.setdefault(name, _zero())
        for obj in items:
            if not matches(quota, group, resource, obj):
                continue
            for name, q in usage(group, resource, obj).items():
                if name in tracked:
                    used[name] = used[name].add(q)
    return as_text(used)


def counted_kinds(hard: dict) -> list[tuple[str, str]]:
    """The (group, resource) pairs a quota's hard names charge: pods, the legacy names and count/."""
    kinds = set()
    for name in hard:
        if name.startswith("count/"):
            resource, _, group = name[len("count/"):].partition(".")
            kinds.add((group, resource))
        for key, legacy in LEGACY_COUNT_NAMES.items():
            if name == legacy:
                kinds.add(key)
        if name in ("services.loadbalancers", "services.nodeports"):
            kinds.add(("", "services"))
        if name == "requests.storage":
            kinds.add(("", "persistentvolumeclaims"))
        if _tracked({name: "0"}, "", "pods"):
            kinds.add(("", "pods"))
    return sorted(kinds)
