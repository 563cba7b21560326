"""A Service's spec.clusterIP and spec.clusterIPs, as kube-apiserver v1.34 reconciles and checks
the pair on create and update (single-stack IPv4, labkit's only service family):

- pkg/registry/core/service/storage/storage.go patchAllocatedValues (an update that leaves
  them out keeps the allocated ones) and normalizeClusterIPs (clusterIPs follows a changed or
  cleared clusterIP when the update left clusterIPs as it was), both from beginCreate /
  beginUpdate, before anything else looks at them;
- pkg/registry/core/service/storage/alloc.go initIPFamilyFields, which runs
  validation.ValidateServiceClusterIPsRelatedFields before allocating (so a pair that does not
  match is refused with those errors alone, before the strategy and its validation);
- pkg/apis/core/validation/validation.go validateUpgradeDowngradeClusterIPs and
  validateServiceExternalTrafficFieldsUpdate (ValidateServiceUpdate's checks of what may not
  change).

Pure functions on the spec mappings; the embedded API server (registry/core.py) and `labkit
kube-proxy apply` (labkit/kubeproxy/cluster_state.py) both use them.
"""

from __future__ import annotations

from labkit.apiserver.errors import FieldError, field_forbidden, field_invalid, field_required


def needs_cluster_ip(spec: dict) -> bool:
    """storage.go needsClusterIP: every type but ExternalName."""
    return spec.get("type") != "ExternalName"


def _ips(spec: dict) -> list:
    ips = spec.get("clusterIPs")
    return list(ips) if isinstance(ips, list) else []


def patch_allocated_cluster_ips(spec: dict, old_spec: dict) -> None:
    """patchAllocatedValues (cluster IPs): an empty clusterIP or clusterIPs of an update takes the
    stored value, so resubmitting the manifest a Service was created from works."""
    if needs_cluster_ip(old_spec) and needs_cluster_ip(spec):
        if not spec.get("clusterIP") and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
        if not _ips(spec) and _ips(old_spec):
            spec["clusterIPs"] = _ips(old_spec)


def normalize_cluster_ips(spec: dict, old_spec: dict | None) -> None:
    """normalizeClusterIPs: on create, a clusterIP alone gives clusterIPs [clusterIP] (clusterIPs
    alone is left for validation to refuse); on update, a clusterIP changed or cleared while
    clusterIPs stayed as stored carries clusterIPs with it (sameClusterIPs compares the lists)."""
    ip = spec.get("clusterIP") or ""
    if old_spec is None:
        if ip and not _ips(spec):
            spec["clusterIPs"] = [ip]
        return
    old_ip = old_spec.get("clusterIP") or ""
    if _ips(old_spec) and not _ips(spec) and old_ip == ip:
        spec["clusterIPs"] = _ips(old_spec)
    if old_ip != ip:
        same = _ips(old_spec) == _ips(spec)
        if old_ip and not ip:
            if same:
                spec.pop("clusterIPs", None)
        elif same:
            spec["clusterIPs"] = [ip]


def cluster_ips_match_errors(spec: dict) -> list[FieldError]:
    """The first check of ValidateServiceClusterIPsRelatedFields: clusterIPs[0] is clusterIP, and
    no clusterIPs without a clusterIP (ExternalName is validated elsewhere)."""
    if not needs_cluster_ip(spec):
        return []
    ip, ips = spec.get("clusterIP") or "", _ips(spec)
    if ip:
        if not ips:
            return [field_required("spec.clusterIPs")]
        if ips[0] != ip:
            return [field_invalid("spec.clusterIPs", ips, "first value must match `clusterIP`")]
    elif ips:
        return [field_invalid("spec.clusterIPs", ips, "must be empty when `clusterIP` is not specified")]
    return []


def _headless(spec: dict) -> bool:
    """isHeadlessService."""
    return _ips(spec) == ["None"]


def upgrade_downgrade_errors(spec: dict, old_spec: dict) -> list[FieldError]:
    """validateUpgradeDowngradeClusterIPs: an allocated cluster IP may not change or go away."""
    if not needs_cluster_ip(spec) or not needs_cluster_ip(old_spec):
        return []
    if _headless(spec) and _headless(old_spec):
        return []
    new, old = _ips(spec), _ips(old_spec)
    value = spec.get("clusterIPs") if isinstance(spec.get("clusterIPs"), list) else None
    errors = []
    if len(old) == len(new):
        errors += [field_invalid(f"spec.clusterIPs[{i}]", value, "may not change once set")
                   for i, ip in enumerate(old) if ip != new[i]]
    elif len(old) > len(new):
        if not new:
            errors.append(field_invalid("spec.clusterIPs[0]", value, "primary clusterIP can not be unset"))
        elif new[0] != old[0]:
            errors.append(field_invalid("spec.clusterIPs[0]", value, "may not change once set"))
        if len(new) == 1 and spec.get("ipFamilyPolicy") != "SingleStack":
            errors.append(field_invalid("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"),
                                        "must be set to 'SingleStack' when releasing the secondary clusterIP"))
    elif old and new[0] != old[0]:
        errors.append(field_invalid("spec.clusterIPs[0]", value, "may not change once set"))
    return errors


def needs_health_check(spec: dict) -> bool:
    """pkg/api/service/util.go NeedsHealthCheck: LoadBalancer with externalTrafficPolicy Local."""
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def health_check_node_port_errors(spec: dict, old_spec: dict) -> list[FieldError]:
    """validateServiceExternalTrafficFieldsUpdate: a Service that needed a health-check node port
    and still does keeps the one it has."""
    if needs_health_check(old_spec) and needs_health_check(spec) and \
            (spec.get("healthCheckNodePort") or 0) != (old_spec.get("healthCheckNodePort") or 0):
        return [field_forbidden("spec.healthCheckNodePort", "field is immutable")]
    return []
