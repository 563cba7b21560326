"""scheduling.k8s.io/v1 PriorityClass and policy/v1 PodDisruptionBudget: their defaults,
strategies, validation and printers, and the two system priority classes the server creates when
it starts.

PriorityClass (pkg/registry/scheduling/priorityclass/strategy.go, storage/storage.go;
pkg/apis/scheduling/validation/validation.go ValidatePriorityClass and
ValidatePriorityClassUpdate; pkg/apis/scheduling/v1/defaults.go SetDefaults_PriorityClass):
cluster-scoped; `preemptionPolicy` defaults to PreemptLowerPriority; a name starting `system-`
must be one of the two system classes with exactly their value and globalDefault false; any other
class may not go above 1000000000 (HighestUserDefinablePriority); value and preemptionPolicy are
immutable; the system classes cannot be deleted (REST.Delete). Which class is the global
default, and the resolution of a Pod's class, is the Priority admission plugin's business
(admission/priority.py).

The system classes (pkg/apis/scheduling/v1/helpers.go systemPriorityClasses) are created by
kube-apiserver's post-start hook `scheduling/bootstrap-system-priority-classes`
(pkg/registry/scheduling/rest/storage_scheduling.go AddSystemPriorityClasses): `ensure_system_classes`.

PodDisruptionBudget (pkg/registry/policy/poddisruptionbudget/strategy.go;
pkg/apis/policy/validation/validation.go ValidatePodDisruptionBudgetSpec): namespaced, with a
status subresource; create resets the status and sets generation 1, a spec change bumps the
generation; minAvailable and maxUnavailable are non-negative integers or percentages up to 100%
and not both set; unhealthyPodEvictionPolicy is IfHealthyBudget or AlwaysAllow. The status is
the disruption controller's (not reconstructed: it keeps the zeros a fresh budget has).
"""

from __future__ import annotations

import re

from labkit.apiserver import defaults, tables
from labkit.apiserver.errors import (ApiError, FieldError, RawJSON, field_forbidden, field_invalid, field_required,
                                     field_unsupported, forbidden)
from labkit.apiserver.resources import ResourceType, StatusSubresource, Strategy
from labkit.apiserver.selectors import LabelSelector

# pkg/apis/scheduling/types.go
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
HIGHEST_USER_DEFINABLE_PRIORITY = 1000000000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS = 0
PREEMPTION_POLICIES = ["Never", "PreemptLowerPriority"]

# pkg/apis/scheduling/v1/helpers.go systemPriorityClasses, in upstream's order
SYSTEM_PRIORITY_CLASSES = (
    {"name": "system-node-critical", "value": SYSTEM_CRITICAL_PRIORITY + 1000,
     "description": "Used for system critical pods that must not be moved from their current node."},
    {"name": "system-cluster-critical", "value": SYSTEM_CRITICAL_PRIORITY,
     "description": "Used for system critical pods that must run in the cluster, but can be moved to another "
                    "node if necessary."},
)

UNHEALTHY_POD_EVICTION_POLICIES = ["AlwaysAllow", "IfHealthyBudget"]
_PERCENT = re.compile(r"^[0-9]+%$")


# -- defaults ------------------------------------------------------------------------------------

@defaults.defaulter("V1PriorityClass")
def priority_class(obj: dict) -> None:
    # SetDefaults_PriorityClass
    if obj.get("preemptionPolicy") is None:
        obj["preemptionPolicy"] = "PreemptLowerPriority"


# -- PriorityClass ---------------------------------------------------------------------------------

def _known_system_class_problem(name: str, value, global_default) -> str | None:
    """IsKnownSystemPriorityClass (pkg/apis/scheduling/v1/helpers.go): None when it is one."""
    for spc in SYSTEM_PRIORITY_CLASSES:
        if spc["name"] == name:
            if spc["value"] != value:
                return f"value of {name} PriorityClass must be {spc['value']}"
            if bool(global_default):
                return f"globalDefault of {name} PriorityClass must be false"
            return None
    return f"{name} is not a known system priority class"


def _priority_class_row(obj):
    return [tables._name(obj), obj.get("value", 0), bool(obj.get("globalDefault", False)), tables.age(obj),
            obj.get("preemptionPolicy") or ""]


# pkg/printers/internalversion/printers.go priorityClassColumnDefinitions
PRIORITY_CLASS_PRINTER = ([tables.NAME, tables._col("Value", "integer"), tables._col("Global-Default", "boolean"),
                           tables.AGE, tables._col("PreemptionPolicy")], _priority_class_row)


class PriorityClassStrategy(Strategy):
    printer = PRIORITY_CLASS_PRINTER

    def validate(self, obj):
        errors: list[FieldError] = []
        name = obj["metadata"].get("name", "")
        value = obj.get("value", 0)
        if not isinstance(value, int) or isinstance(value, bool):
            value = 0
        if name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
            problem = _known_system_class_problem(name, value, obj.get("globalDefault"))
            if problem:
                errors.append(field_forbidden("metadata.name", f"priority class names with "
                                              f"'{SYSTEM_PRIORITY_CLASS_PREFIX}' prefix are reserved for system use "
                                              f"only. error: {problem}"))
        elif value > HIGHEST_USER_DEFINABLE_PRIORITY:
            errors.append(field_forbidden("value", "maximum allowed value of a user defined priority is "
                                          f"{HIGHEST_USER_DEFINABLE_PRIORITY}"))
        policy = obj.get("preemptionPolicy")
        if policy is not None:
            # ValidatePreemptionPolicy (pkg/apis/core/validation)
            if policy == "":
                errors.append(field_required("preemptionPolicy"))
            elif policy not in PREEMPTION_POLICIES:
                errors.append(field_unsupported("preemptionPolicy", policy, PREEMPTION_POLICIES))
        return errors

    def validate_update(self, new, old):
        errors = self.validate(new)
        if new.get("value", 0) != old.get("value", 0):
            errors.append(field_forbidden("value", "may not be changed in an update."))
        if new.get("preemptionPolicy") != old.get("preemptionPolicy"):
            errors.append(field_invalid("preemptionPolicy", new.get("preemptionPolicy"),
                                        "field is immutable"))
        return errors

    def delete(self, registry, rt, namespace, name, options, dry_run):
        # priorityclass/storage/storage.go REST.Delete
        if any(spc["name"] == name for spc in SYSTEM_PRIORITY_CLASSES):
            raise forbidden("priorityclasses", "scheduling.k8s.io", name,
                            "this is a system priority class and cannot be deleted")
        return registry.generic_delete(rt, namespace, name, options, dry_run)


def ensure_system_classes(client) -> None:
    """AddSystemPriorityClasses: create the system classes that are missing (a class a previous
    run left behind stays as it is)."""
    for spc in SYSTEM_PRIORITY_CLASSES:
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": spc["name"]}, "value": spc["value"], "description": spc["description"]}
        try:
            client.create("scheduling.k8s.io/v1", "priorityclasses", body)
        except ApiError as exc:
            if exc.code != 409:
                raise


# -- PodDisruptionBudget ---------------------------------------------------------------------------

def _go_int_or_string(value) -> str:
    if isinstance(value, str):
        return f'intstr.IntOrString{{Type:1, IntVal:0, StrVal:"{value}"}}'
    return f'intstr.IntOrString{{Type:0, IntVal:{value}, StrVal:""}}'


def _spec_value(spec: dict) -> RawJSON:
    """How field.Invalid renders the internal PodDisruptionBudgetSpec (%#v of a struct of
    pointers): the pointers' addresses are not reproducible, so their targets are shown."""
    def ptr(type_: str, value, render) -> str:
        return f"(*{type_})(nil)" if value is None else f"&{render(value)}"
    selector = spec.get("selector")
    return RawJSON("policy.PodDisruptionBudgetSpec{"
                   f"MinAvailable:{ptr('intstr.IntOrString', spec.get('minAvailable'), _go_int_or_string)}, "
                   f"Selector:{ptr('v1.LabelSelector', selector, lambda s: 'v1.LabelSelector{...}')}, "
                   f"MaxUnavailable:{ptr('intstr.IntOrString', spec.get('maxUnavailable'), _go_int_or_string)}, "
                   "UnhealthyPodEvictionPolicy:"
                   f"{ptr('policy.UnhealthyPodEvictionPolicyType', spec.get('unhealthyPodEvictionPolicy'), repr)}}}")


def _int_or_percent_problems(value, path: str) -> list[FieldError]:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent (pkg/apis/apps/validation)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return [field_invalid(path, value, "must be an integer or percentage (e.g '5%')")]
    if isinstance(value, str):
        shown = RawJSON(_go_int_or_string(value))      # %#v of the IntOrString struct
        if not _PERCENT.match(value):
            return [field_invalid(path, shown, "a valid percent string must be a numeric string followed by an "
                                  "ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")]
        if int(value[:-1]) > 100:
            return [field_invalid(path, shown, "must not be greater than 100%")]
        return []
    if value < 0:
        return [field_invalid(path, value, "must be greater than or equal to 0")]
    return []


def _pdb_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    shown = [str(spec[key]) if spec.get(key) is not None else "N/A" for key in ("minAvailable", "maxUnavailable")]
    return [tables._name(obj), *shown, status.get("disruptionsAllowed", 0), tables.age(obj)]


# printers.go podDisruptionBudgetColumnDefinitions
PDB_PRINTER = ([tables.NAME, tables._col("Min Available"), tables._col("Max Unavailable"),
                tables._col("Allowed Disruptions", "integer"), tables.AGE], _pdb_row)

FRESH_PDB_STATUS = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}


class PodDisruptionBudgetStatusSubresource(StatusSubresource):
    def validate(self, obj):
        # ValidatePodDisruptionBudgetStatusUpdate: the counts are not negative
        status = obj.get("status") or {}
        return [field_invalid(f"status.{key}", status[key], "must be greater than or equal to 0")
                for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")
                if isinstance(status.get(key), int) and status[key] < 0]


class PodDisruptionBudgetStrategy(Strategy):
    generation = True
    subresources = (PodDisruptionBudgetStatusSubresource(),)
    printer = PDB_PRINTER

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = dict(FRESH_PDB_STATUS)

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors: list[FieldError] = []
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            errors.append(field_invalid("spec", _spec_value(spec), "minAvailable and maxUnavailable cannot be both set"))
        for key in ("minAvailable", "maxUnavailable"):
            if spec.get(key) is not None:
                errors += _int_or_percent_problems(spec[key], f"spec.{key}")
        selector = spec.get("selector")
        if selector is not None:
            try:
                LabelSelector.from_label_selector(selector)
            except ValueError as exc:
                errors.append(field_invalid("spec.selector", selector, str(exc)))
        policy = spec.get("unhealthyPodEvictionPolicy")
        if policy is not None and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
            errors.append(field_unsupported("spec.unhealthyPodEvictionPolicy", policy, UNHEALTHY_POD_EVICTION_POLICIES))
        return errors

    def validate_update(self, new, old):
        return self.validate(new)


def policy_types() -> list[ResourceType]:
    rt = ResourceType
    return [
        rt("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, PriorityClassStrategy(),
           "priorityclass", ["pc"]),
        rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, PodDisruptionBudgetStrategy(),
           "poddisruptionbudget", ["pdb"]),
    ]
