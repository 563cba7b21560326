"""Privilege-escalation prevention on the RBAC kinds: nobody creates or updates a Role,
ClusterRole, RoleBinding or ClusterRoleBinding that grants more than they hold, unless they
may `escalate` (roles) or `bind` (bindings).

- pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased/storage.go
  Storage.Create and Storage.Update: the checks run after mutating admission, before the
  object is validated and stored (on update: on the updated object, rest.WrapUpdatedObjectInfo);
- pkg/registry/rbac/escalation_check.go: EscalationAllowed (system:masters),
  RoleEscalationAuthorized (verb `escalate` on the roles/clusterroles of the request),
  BindingAuthorized (verb `bind` on the referenced role, in the binding's namespace);
- pkg/registry/rbac/helpers.go IsOnlyMutatingGCFields;
- pkg/registry/rbac/validation/rule.go ConfirmNoEscalation, with
  component-helpers/auth/rbac/validation/policy_comparator.go Covers / BreakdownRule,
  pkg/registry/rbac/validation/policy_compact.go CompactRules and
  pkg/apis/rbac/v1/evaluation_helpers.go CompactString for the message.

`check` is installed as one of the registry's write guards; it acts on requests that came
through the API (the request's user and attributes are in `authorizer.current_request`).
"""

from __future__ import annotations


from labkit.apiserver.authorizer import Attributes, current_request
from labkit.apiserver.errors import forbidden, go_quote, internal, not_found
from labkit.apiserver.rbac import GROUP, ResolutionError, RuleResolver, aggregate
from labkit.jsondata import json_copy

FULL_AUTHORITY = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                  {"verbs": ["*"], "nonResourceURLs": ["*"]}]
AGGREGATION_MESSAGE = "must have cluster-admin privileges to use the aggregationRule"


# -- policy_comparator.go ------------------------------------------------------------------------

def breakdown_rule(rule: dict) -> list[dict]:
    """BreakdownRule: one rule per group, resource, verb (and resource name); non-resource URLs per verb."""
    subrules = []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in rule.get("verbs") or []:
                if rule.get("resourceNames"):
                    for name in rule["resourceNames"]:
                        subrules.append({"apiGroups": [group], "resources": [resource], "verbs": [verb],
                                         "resourceNames": [name]})
                else:
                    subrules.append({"apiGroups": [group], "resources": [resource], "verbs": [verb]})
    for url in rule.get("nonResourceURLs") or []:
        for verb in rule.get("verbs") or []:
            subrules.append({"nonResourceURLs": [url], "verbs": [verb]})
    return subrules


def _has_all(owned, wanted) -> bool:
    return set(wanted) <= set(owned)


def _resource_covers_all(owned: list[str], wanted: list[str]) -> bool:
    if "*" in owned or _has_all(owned, wanted):
        return True
    for path in wanted:
        if path in owned:
            continue
        if "/" not in path:
            return False
        if "*/" + path.split("/", 1)[1] not in owned:
            return False
    return True


def _non_resource_url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def rule_covers(owner: dict, sub: dict) -> bool:
    """ruleCovers: `sub` has at most one verb, resource and resource name."""
    verbs = "*" in (owner.get("verbs") or []) or _has_all(owner.get("verbs") or [], sub.get("verbs") or [])
    groups = "*" in (owner.get("apiGroups") or []) or _has_all(owner.get("apiGroups") or [], sub.get("apiGroups") or [])
    resources = _resource_covers_all(owner.get("resources") or [], sub.get("resources") or [])
    urls = all(any(_non_resource_url_covers(o, p) for o in owner.get("nonResourceURLs") or [])
               for p in sub.get("nonResourceURLs") or [])
    if not sub.get("resourceNames"):
        names = not owner.get("resourceNames")
    else:
        names = not owner.get("resourceNames") or _has_all(owner["resourceNames"], sub["resourceNames"])
    return verbs and groups and resources and names and urls


def covers(owner_rules: list[dict], servant_rules: list[dict]) -> tuple[bool, list[dict]]:
    """Covers: whether the owner's rules cover the servant's, and the uncovered broken-down rules."""
    uncovered = [sub for rule in servant_rules for sub in breakdown_rule(rule)
                 if not any(rule_covers(owner, sub) for owner in owner_rules)]
    return not uncovered, uncovered


# -- policy_compact.go, evaluation_helpers.go ----------------------------------------------------------

def compact_rules(rules: list[dict]) -> list[dict]:
    """CompactRules: rules of one group and one resource, differing only in verbs, become one."""
    compacted, simple = [], {}
    for rule in rules:
        keys = {k for k, v in rule.items() if v}
        if keys == {"apiGroups", "resources", "verbs"} and len(rule["apiGroups"]) == 1 \
                and len(rule["resources"]) == 1:
            key = (rule["apiGroups"][0], rule["resources"][0])
            if key in simple:
                simple[key]["verbs"] = simple[key]["verbs"] + list(rule["verbs"])
            else:
                simple[key] = json_copy(rule)
        else:
            compacted.append(rule)
    return compacted + list(simple.values())


def _go_strings(values: list[str]) -> str:
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


def compact_string(rule: dict) -> str:
    """CompactString: {APIGroups:["" "apps"], Resources:["pods"], Verbs:["get"]}."""
    parts = [f"{label}:{_go_strings(rule[key])}" for label, key in
             (("APIGroups", "apiGroups"), ("Resources", "resources"), ("NonResourceURLs", "nonResourceURLs"),
              ("ResourceNames", "resourceNames"), ("Verbs", "verbs")) if rule.get(key)]
    return "{" + ", ".join(parts) + "}"


def confirm_no_escalation(resolver: RuleResolver, user: str, groups: list[str], namespace: str,
                          rules: list[dict]) -> str | None:
    """ConfirmNoEscalation: None when the user's rules in `namespace` cover `rules`, else the message."""
    owner_rules, errors = resolver.rules_for(user, groups, namespace)
    covered, missing = covers(owner_rules, rules)
    if covered:
        return None
    descriptions = sorted({compact_string(rule) for rule in compact_rules(missing)})
    message = (f"user {go_quote(user)} (groups={_go_strings(groups)}) is attempting to grant RBAC permissions "
               "not currently held:\n" + "\n".join(descriptions))
    if errors:
        # fmt %v of a []error holding the one aggregate error RulesFor returned
        message += f"; resolution errors: [{aggregate(errors)}]"
    return message


# -- helpers.go, escalation_check.go, policybased storage ---------------------------------------------

_META_GC_FIELDS = ("ownerReferences", "finalizers", "selfLink")


def only_gc_fields_change(new: dict, old: dict | None) -> bool:
    """IsOnlyMutatingGCFields: the update changes nothing but owner references and finalizers.
    (labkit's updated object already carries this request's managedFields and the expected
    resourceVersion, so these are compared from the stored object too.)"""
    if old is None:
        return False
    candidate = json_copy(new)
    meta = candidate.setdefault("metadata", {})
    for key in _META_GC_FIELDS + ("managedFields", "resourceVersion"):
        if key in old.get("metadata", {}):
            meta[key] = json_copy(old["metadata"][key])
        else:
            meta.pop(key, None)
    return candidate == old


def _authorized(authorizer, user, verb: str, group: str, resource: str, name: str, namespace: str) -> bool:
    return authorizer.authorize(Attributes(user.name, user.groups, verb, namespace, group, "*", resource,
                                           name=name)).allowed


class EscalationCheck:
    """The policybased storages' Create/Update checks, as a registry write guard."""

    def __init__(self, store, authorizer):
        self.resolver = RuleResolver(store, plural=True)
        self.authorizer = authorizer

    def __call__(self, operation: str, rt, obj: dict, old: dict | None) -> None:
        if rt.group != GROUP or operation not in ("CREATE", "UPDATE"):
            return
        request = current_request.get()
        if request is None:
            return          # not an API request: the server's own writes
        user, attributes = request
        if "system:masters" in user.groups:       # EscalationAllowed
            return
        namespace = attributes.namespace
        name = obj.get("metadata", {}).get("name", "")
        if operation == "UPDATE" and only_gc_fields_change(obj, old):
            return
        if rt.resource in ("roles", "clusterroles"):
            # RoleEscalationAuthorized: `escalate` on the resource and name of the request
            if _authorized(self.authorizer, user, "escalate", GROUP, attributes.resource, attributes.name, namespace):
                return
            message = confirm_no_escalation(self.resolver, user.name, user.groups, namespace, obj.get("rules") or [])
            if message:
                raise forbidden(rt.resource, rt.group, name, message)
            aggregation = [o for o in (obj, old) if o and ((o.get("aggregationRule") or {}).get("clusterRoleSelectors"))]
            if rt.resource == "clusterroles" and aggregation and \
                    confirm_no_escalation(self.resolver, user.name, user.groups, namespace, FULL_AUTHORITY):
                raise forbidden(rt.resource, rt.group, name, AGGREGATION_MESSAGE)
            return
        ref = obj.get("roleRef") or {}
        if ref.get("kind") in ("Role", "ClusterRole") and _authorized(
                self.authorizer, user, "bind", ref.get("apiGroup", ""),
                "roles" if ref["kind"] == "Role" else "clusterroles", ref.get("name", ""), namespace):
            return          # BindingAuthorized
        try:
            rules = self.resolver.role_reference_rules(ref, namespace)
        except ResolutionError as exc:
            if ref.get("kind") in ("Role", "ClusterRole"):     # the registry's NotFound, as is
                raise not_found("roles" if ref["kind"] == "Role" else "clusterroles", GROUP, ref.get("name", ""))
            raise internal(str(exc))     # a plain error from the storage: 500
        message = confirm_no_escalation(self.resolver, user.name, user.groups, namespace, rules)
        if message:
            raise forbidden(rt.resource, rt.group, name, message)
