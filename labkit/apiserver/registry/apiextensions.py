"""apiextensions.k8s.io/v1: CustomResourceDefinitions and the custom resources they serve
(apiextensions-apiserver pkg/registry/customresourcedefinition and customresource).
"""

from __future__ import annotations


from labkit.apiserver import crd, tables
from labkit.apiserver.errors import field_invalid, field_required, field_unsupported
from labkit.apiserver.resources import RESET_META_FOR_STATUS, ScaleSubresource, StatusSubresource, Strategy
from labkit.jsondata import json_copy


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
                new["status"] = json_copy(old["status"])
            else:
                new.pop("status", None)
        new["metadata"]["generation"] = old["metadata"].get("generation", 1)
        comparable = [k for k in set(new) | set(old) if k not in ("metadata", "status")] if self.has_status() else \
            [k for k in set(new) | set(old) if k != "metadata"]
        if any(new.get(k) != old.get(k) for k in comparable):
            new["metadata"]["generation"] += 1
