"""rbac.authorization.k8s.io/v1: Roles, ClusterRoles and their bindings
(pkg/registry/rbac/<kind>/strategy.go).
"""

from __future__ import annotations

from labkit.apiserver import tables
from labkit.apiserver.errors import FieldError, field_invalid, field_required, field_unsupported
from labkit.apiserver.resources import Strategy
from labkit.apiserver.validation import dns1123_subdomain_problems, path_segment_problems


# -- rbac.authorization.k8s.io/v1 -----------------------------------------------------------------

def _validate_rules(rules, namespaced: bool) -> list[FieldError]:
    errors = []
    for i, rule in enumerate(rules or []):
        path = f"rules[{i}]"
        if not rule.get("verbs"):
            errors.append(field_required(f"{path}.verbs", "verbs must contain at least one value"))
        if rule.get("nonResourceURLs"):
            if namespaced:
                errors.append(field_invalid(f"{path}.nonResourceURLs", rule["nonResourceURLs"],
                                            "namespaced rules cannot apply to non-resource URLs"))
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                errors.append(field_invalid(f"{path}.nonResourceURLs", rule["nonResourceURLs"],
                                            "rules cannot apply to both regular resources and non-resource URLs"))
            continue
        if not rule.get("apiGroups"):
            errors.append(field_required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
        if not rule.get("resources"):
            errors.append(field_required(f"{path}.resources", "resource rules must supply at least one resource"))
    return errors


class RBACStrategy(Strategy):
    def name_problems(self, name, prefix):
        # pkg/apis/rbac/validation ValidateRBACName = path.IsValidPathSegmentName (system:... names)
        return path_segment_problems(name, prefix)


class RoleStrategy(RBACStrategy):
    printer = tables.PRINTERS["Role"]

    def validate(self, obj):
        return _validate_rules(obj.get("rules"), True)


class ClusterRoleStrategy(RBACStrategy):
    printer = tables.PRINTERS["ClusterRole"]

    def validate(self, obj):
        return [] if obj.get("aggregationRule") else _validate_rules(obj.get("rules"), False)


class RoleBindingStrategy(RBACStrategy):
    """A binding's roleRef names a Role or ClusterRole (a ClusterRoleBinding: a ClusterRole) and
    cannot change; subjects are Users, Groups or ServiceAccounts (with a namespace)."""

    printer = tables.PRINTERS["RoleBinding"]
    role_kinds = ["ClusterRole", "Role"]
    namespaced = True

    def validate(self, obj):
        errors = []
        ref = obj.get("roleRef") or {}
        if ref.get("apiGroup") != "rbac.authorization.k8s.io":
            errors.append(field_unsupported("roleRef.apiGroup", ref.get("apiGroup", ""),
                                            ["rbac.authorization.k8s.io"]))
        if ref.get("kind") not in self.role_kinds:
            errors.append(field_unsupported("roleRef.kind", ref.get("kind", ""), self.role_kinds))
        if not ref.get("name"):
            errors.append(field_required("roleRef.name"))
        for i, subject in enumerate(obj.get("subjects") or []):
            errors += self._validate_subject(subject, f"subjects[{i}]")
        return errors

    def _validate_subject(self, subject: dict, path: str) -> list[FieldError]:
        """pkg/apis/rbac/validation/validation.go `validateRoleBindingSubject`: a ServiceAccount's
        name is a DNS subdomain and its apiGroup empty (a ClusterRoleBinding's names its namespace);
        a User's or Group's apiGroup is rbac.authorization.k8s.io (the v1 defaulter sets it when
        empty, pkg/apis/rbac/v1/defaults.go `SetDefaults_Subject`)."""
        errors = []
        name, kind, group = subject.get("name") or "", subject.get("kind"), subject.get("apiGroup") or ""
        if not name:
            errors.append(field_required(f"{path}.name"))
        if kind == "ServiceAccount":
            if name:
                errors += [field_invalid(f"{path}.name", name, m) for m in dns1123_subdomain_problems(name)]
            if group:
                errors.append(field_unsupported(f"{path}.apiGroup", group, [""]))
            if not self.namespaced and not subject.get("namespace"):
                errors.append(field_required(f"{path}.namespace"))
        elif kind in ("User", "Group"):
            if not name:
                errors.append(field_invalid(f"{path}.name", name, f"{kind.lower()} name cannot be empty"))
            if group != "rbac.authorization.k8s.io":
                errors.append(field_unsupported(f"{path}.apiGroup", group, ["rbac.authorization.k8s.io"]))
        else:
            errors.append(field_unsupported(f"{path}.kind", kind or "", ["ServiceAccount", "User", "Group"]))
        return errors

    def validate_update(self, new, old):
        errors = self.validate(new)
        if new.get("roleRef") != old.get("roleRef"):
            errors.append(field_invalid("roleRef", new.get("roleRef"), "cannot change roleRef"))
        return errors


class ClusterRoleBindingStrategy(RoleBindingStrategy):
    printer = tables.PRINTERS["ClusterRoleBinding"]
    role_kinds = ["ClusterRole"]
    namespaced = False
