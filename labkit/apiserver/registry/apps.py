"""apps/v1: ReplicaSets, Deployments, DaemonSets and StatefulSets
(pkg/registry/apps/<kind>/strategy.go).
"""

from __future__ import annotations

from labkit.apiserver import tables
from labkit.apiserver.errors import field_forbidden, field_invalid, field_unsupported
from labkit.apiserver.resources import DELETE_DEPENDENTS, ScaleSubresource, StatusSubresource, Strategy
from labkit.apiserver.registry.batch import _restart_policy
from labkit.apiserver.registry.core import _immutable
from labkit.apiserver.registry.pod import _validate_workload


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
