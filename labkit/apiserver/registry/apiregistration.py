"""apiregistration.k8s.io/v1: APIServices (kube-aggregator pkg/registry/apiservice).
"""

from __future__ import annotations

from labkit.apiserver import tables
from labkit.apiserver.errors import field_invalid, field_required
from labkit.apiserver.resources import RESET_META_FOR_STATUS, StatusSubresource, Strategy


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
