"""autoscaling/v2 and v1: HorizontalPodAutoscalers, stored as autoscaling/v2
(pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go).
"""

from __future__ import annotations


from labkit.apiserver import tables
from labkit.apiserver.errors import field_invalid, field_required
from labkit.apiserver.resources import StatusSubresource, Strategy
from labkit.jsondata import json_copy


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
    out = json_copy(obj)
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
    out = json_copy(obj)
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
