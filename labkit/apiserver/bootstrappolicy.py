"""The default RBAC policy, reconciled when the server starts, as kube-apiserver's post-start
hook `rbac/bootstrap-roles` does (pkg/registry/rbac/rest/storage_rbac.go
PolicyData.EnsureRBACPolicy, with pkg/registry/rbac/reconciliation ReconcileRoleOptions and
ReconcileRoleBindingOptions, Confirm=true, nothing removed):

- a missing default ClusterRole or ClusterRoleBinding is created;
- an existing one whose annotation rbac.authorization.kubernetes.io/autoupdate is "false" is
  left alone (computeReconciledRole / computeReconciledRoleBinding: Protected);
- otherwise it gets the default labels and annotations it lacks (its own values win), the
  default rules it does not cover (added broken down, validation.Covers), the aggregation
  selectors it lacks and the subjects it lacks; a binding whose roleRef differs is deleted
  and created again (RequiresRecreate). Extra rules and subjects stay.

The data is upstream's (data/bootstrap-policy.yaml says where it comes from). Then, as kubeadm
v1.29+ does at `kubeadm init` (EnsureAdminClusterRoleBinding), the ClusterRoleBinding
`kubeadm:cluster-admins` grants the group of the admin kubeconfig the ClusterRole cluster-admin.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

from labkit.apiserver.errors import ApiError
from labkit.apiserver.escalation import covers
from labkit.apiserver.rbac import GROUP
from labkit.jsondata import json_copy

POLICY_FILE = Path(__file__).with_name("data") / "bootstrap-policy.yaml"
API_VERSION = f"{GROUP}/v1"
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
# kubeadm's constants.ClusterAdminsGroupAndClusterRoleBinding
KUBEADM_ADMINS = "kubeadm:cluster-admins"


def _metadata(name: str, labels: dict | None = None) -> dict:
    # policy.go addDefaultMetadata: the bootstrapping label and the autoupdate annotation
    return {"name": name, "labels": {**BOOTSTRAP_LABELS, **(labels or {})}, "annotations": {AUTOUPDATE: "true"}}


def _subject(s: dict) -> dict:
    subject = {"kind": s["kind"], "name": s["name"]}
    if s["kind"] == "ServiceAccount":
        subject["namespace"] = s["namespace"]
    else:
        subject["apiGroup"] = GROUP
    return subject


def _binding(name: str, role: str, subjects: list[dict]) -> dict:
    binding = {"apiVersion": API_VERSION, "kind": "ClusterRoleBinding", "metadata": _metadata(name),
               "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role}}
    if subjects:
        binding["subjects"] = [_subject(s) for s in subjects]
    return binding


@lru_cache(maxsize=1)
def _policy() -> tuple[list[dict], list[dict]]:
    # libyaml's loader where PyYAML has it: the file is large, and the pure-Python one takes ~10x as long
    data = yaml.load(POLICY_FILE.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    roles = []
    for entry in data["clusterRoles"]:
        role = {"apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": _metadata(entry["name"], entry.get("labels"))}
        if entry.get("aggregationRule"):
            role["aggregationRule"] = entry["aggregationRule"]
        if entry.get("rules"):
            role["rules"] = entry["rules"]
        roles.append(role)
    bindings = [_binding(b["name"], b["role"], b.get("subjects") or []) for b in data["clusterRoleBindings"]]
    bindings += [_binding(f"system:controller:{name}", f"system:controller:{name}",
                          [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}])
                 for name in data["controllerRoleBindings"]]
    return roles, bindings


def cluster_roles() -> list[dict]:
    return json_copy(_policy()[0])


def cluster_role_bindings() -> list[dict]:
    return json_copy(_policy()[1])


def admin_binding() -> dict:
    """kubeadm's ClusterRoleBinding for the admin kubeconfig's group (no bootstrapping metadata)."""
    return {"apiVersion": API_VERSION, "kind": "ClusterRoleBinding", "metadata": {"name": KUBEADM_ADMINS},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": KUBEADM_ADMINS}]}


def _merge_metadata(existing: dict, expected: dict) -> bool:
    changed = False
    for key in ("labels", "annotations"):
        merged = {**(expected["metadata"].get(key) or {}), **(existing["metadata"].get(key) or {})}
        if merged != (existing["metadata"].get(key) or {}):
            existing["metadata"][key] = merged
            changed = True
    return changed


def reconcile_role(existing: dict, expected: dict) -> bool:
    """computeReconciledRole: whether `existing` was changed to cover `expected`."""
    changed = _merge_metadata(existing, expected)
    _, missing = covers(existing.get("rules") or [], expected.get("rules") or [])
    if missing:
        existing["rules"] = list(existing.get("rules") or []) + missing
        changed = True
    want = (expected.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
    if want:
        have = (existing.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        extra = [s for s in want if s not in have]
        if extra:
            existing["aggregationRule"] = {"clusterRoleSelectors": have + extra}
            changed = True
    return changed


def reconcile_binding(existing: dict, expected: dict) -> bool:
    """computeReconciledRoleBinding (the roleRef is the caller's business)."""
    changed = _merge_metadata(existing, expected)
    subjects = list(existing.get("subjects") or [])
    extra = [s for s in expected.get("subjects") or [] if s not in subjects]
    if extra:
        existing["subjects"] = subjects + extra
        changed = True
    return changed


def _protected(obj: dict) -> bool:
    return (obj["metadata"].get("annotations") or {}).get(AUTOUPDATE) == "false"


def ensure(client) -> None:
    """EnsureRBACPolicy, then kubeadm's admin binding; `client` must be privileged."""
    for role in cluster_roles():
        existing = client.get_or_none(API_VERSION, "clusterroles", role["metadata"]["name"])
        if existing is None:
            _create(client, "clusterroles", role)
        elif not _protected(existing) and reconcile_role(existing, role):
            client.update(API_VERSION, "clusterroles", existing)
    for binding in cluster_role_bindings() + [admin_binding()]:
        name = binding["metadata"]["name"]
        existing = client.get_or_none(API_VERSION, "clusterrolebindings", name)
        if existing is None:
            _create(client, "clusterrolebindings", binding)
        elif name == KUBEADM_ADMINS or _protected(existing):
            continue        # kubeadm creates its binding once; it does not reconcile it
        elif existing.get("roleRef") != binding["roleRef"]:
            client.delete(API_VERSION, "clusterrolebindings", name)
            _create(client, "clusterrolebindings", binding)
        elif reconcile_binding(existing, binding):
            client.update(API_VERSION, "clusterrolebindings", existing)


def _create(client, resource: str, obj: dict) -> None:
    try:
        client.create(API_VERSION, resource, obj)
    except ApiError as exc:
        if exc.code != 409:
            raise
