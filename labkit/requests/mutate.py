"""Near-misses of the requests lab's reference solutions (labs/requests/mutants/): the generators
that widen, narrow or swap one RBAC subject, role or binding, or one field of an admission
configuration, at a time; the live application of such a change; and the proofs of equivalence
by labkit's reconstruction (labkit.requests.reconstruct)."""

from __future__ import annotations

import copy
from typing import Callable, Iterator

from labkit.mutants import tree_edits
from labkit.requests import reconstruct

RBAC = "rbac.authorization.k8s.io/v1"
ADMISSION = "admissionregistration.k8s.io/v1"
RESOURCES = {"Role": (RBAC, "roles"), "ClusterRole": (RBAC, "clusterroles"), "RoleBinding": (RBAC, "rolebindings"),
             "ClusterRoleBinding": (RBAC, "clusterrolebindings"),
             "ValidatingWebhookConfiguration": (ADMISSION, "validatingwebhookconfigurations"),
             "MutatingWebhookConfiguration": (ADMISSION, "mutatingwebhookconfigurations"),
             "ValidatingAdmissionPolicy": (ADMISSION, "validatingadmissionpolicies"),
             "ValidatingAdmissionPolicyBinding": (ADMISSION, "validatingadmissionpolicybindings")}
SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation")


def ident(obj: dict) -> tuple:
    meta = obj.get("metadata") or {}
    return obj.get("kind"), meta.get("namespace") or "", meta.get("name")


def replace_in(objects: list[dict], old: dict | None, new: dict | None) -> list[dict]:
    """`objects` with `old` replaced by `new` (None: removed / added)."""
    out = [o for o in objects if old is None or ident(o) != ident(old)]
    return out + ([new] if new is not None else [])


def live_change(old: dict | None, new: dict | None) -> Callable:
    """apply(env): the same change made on the lab's API server (delete, then create: a
    binding's roleRef cannot be updated)."""
    def apply(env):
        c = env.lab.environment_module().client(env)
        if old is not None:
            api_version, resource = RESOURCES[old["kind"]]
            meta = old["metadata"]
            c.delete(api_version, resource, meta["name"], meta.get("namespace"))
        if new is not None:
            api_version, resource = RESOURCES[new["kind"]]
            obj = copy.deepcopy(new)
            for key in SERVER_FIELDS:
                obj["metadata"].pop(key, None)
            c.create(api_version, resource, obj, obj["metadata"].get("namespace"))
    return apply


def valid_binding(b: dict) -> bool:
    """What the server's validation lets through (pkg/apis/rbac/validation: a roleRef with kind
    Role or ClusterRole and a name, subjects with kind and name; a ClusterRoleBinding may not
    refer to a Role; a ServiceAccount subject of a ClusterRoleBinding needs its namespace)."""
    ref = b.get("roleRef") or {}
    if ref.get("kind") not in ("Role", "ClusterRole") or not ref.get("name") or \
            ref.get("apiGroup") != "rbac.authorization.k8s.io":
        return False
    if b["kind"] == "ClusterRoleBinding" and ref.get("kind") == "Role":
        return False
    for s in b.get("subjects") or []:
        if s.get("kind") not in ("User", "Group", "ServiceAccount") or not s.get("name"):
            return False
        if s.get("kind") == "ServiceAccount" and (s.get("apiGroup") or not (
                s.get("namespace") or b["kind"] == "RoleBinding")):
            return False
        if s.get("kind") in ("User", "Group") and s.get("apiGroup") != "rbac.authorization.k8s.io":
            return False
    return bool(b["metadata"].get("name"))


def binding_edits(binding: dict, *, namespaces, roles, subjects) -> Iterator[tuple[str, str, dict]]:
    """(name, change, mutated binding): every field of the binding dropped or swapped for a near
    value (other namespaces, other roles, other subject kinds and names), each extra subject
    added, and the binding made cluster-wide."""
    # metadata but the namespace is no part of what a binding grants; apiGroup is defaulted when
    # missing and any other value is refused (rbac/v1 defaults.go, rbac/validation ValidateRoleBinding)
    skip = lambda p: (p.startswith("metadata.") and p != "metadata.namespace") or p == "metadata" \
        or p.endswith(".apiGroup")  # noqa: E731
    alternatives = {"metadata.namespace": list(namespaces), "roleRef.name": list(roles),
                    "roleRef.kind": ["Role", "ClusterRole"], "subjects[].kind": ["User", "Group", "ServiceAccount"],
                    "subjects[].namespace": list(namespaces) + [""]}
    core = {k: v for k, v in binding.items() if k in ("metadata", "roleRef", "subjects")}
    for edit in tree_edits(core, alternatives=alternatives, skip=skip):
        mutated = {k: v for k, v in copy.deepcopy(binding).items() if k not in core}
        mutated.update(copy.deepcopy(edit.value))
        mutated["metadata"] = {**{k: v for k, v in binding["metadata"].items() if k != "namespace"},
                               **mutated.get("metadata", {})}
        if edit.path == "metadata.namespace" and edit.op == "drop":
            continue        # a RoleBinding always has a namespace
        name = f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else "")
        yield name, f"binding {edit.describe()}", mutated
    for s in subjects:
        mutated = copy.deepcopy(binding)
        mutated["subjects"] = list(mutated.get("subjects") or []) + [s]
        yield f"add-subject:{s['kind']}:{s.get('namespace', '')}:{s['name']}", \
            f"binding: the subject {s['kind']} {s['name']} added", mutated
    wide = copy.deepcopy(binding)
    wide["kind"] = "ClusterRoleBinding"
    wide["metadata"].pop("namespace", None)
    if (wide.get("roleRef") or {}).get("kind") == "Role":
        wide["roleRef"] = {**wide["roleRef"], "kind": "ClusterRole"}
    yield "cluster-wide", "the binding made a ClusterRoleBinding (of the ClusterRole of that name)", wide


def same_access(before: list[dict], after: list[dict], subjects, space: reconstruct.Space) -> bool:
    """Whether every one of `subjects` may do exactly the same with `after` as with `before`."""
    return all(reconstruct.access(before, s, space) == reconstruct.access(after, s, space) for s in subjects)


def subjects_of(objects: list[dict]) -> set:
    return {reconstruct.Subject.of(s, (b.get("metadata") or {}).get("namespace") or "")
            for b in objects if b.get("kind") in ("RoleBinding", "ClusterRoleBinding") for s in b.get("subjects") or []}
