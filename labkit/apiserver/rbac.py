"""RBAC as kube-apiserver evaluates it: which rules a user holds, through which binding, and
whether one of them allows a request.

- rule matching: pkg/apis/rbac/v1/evaluation_helpers.go (VerbMatches, APIGroupMatches,
  ResourceMatches with `*` and `*/<subresource>`, ResourceNameMatches, NonResourceURLMatches with
  a trailing `*`) and plugin/pkg/auth/authorizer/rbac/rbac.go RuleAllows;
- rule resolution: pkg/registry/rbac/validation/rule.go DefaultRuleResolver.VisitRulesFor —
  every ClusterRoleBinding first, then the RoleBindings of the request's namespace; a binding
  applies through its first subject that matches (appliesTo / appliesToUser); the source of a
  rule is described as clusterRoleBindingDescriber / roleBindingDescriber write it;
- the authorizer: rbac.go RBACAuthorizer.Authorize — allowed by the first rule that allows
  (`RBAC: allowed by <source>`), else no opinion, with `RBAC: <errors>` only when bindings
  pointed at roles that could not be found. RBAC never denies.

The objects are read from the store's current state (what the authorizer's informers hold
upstream). ClusterRoleBindings are walked in name order (upstream's lister order is a map's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from labkit.apiserver.errors import go_quote

GROUP = "rbac.authorization.k8s.io"
ROLES = f"{GROUP}/roles"
ROLE_BINDINGS = f"{GROUP}/rolebindings"
CLUSTER_ROLES = f"{GROUP}/clusterroles"
CLUSTER_ROLE_BINDINGS = f"{GROUP}/clusterrolebindings"


# -- evaluation_helpers.go ------------------------------------------------------------------------

# VerbMatches and APIGroupMatches: an item equal to VerbAll ("*") or to the verb (group). Written as
# membership tests: the authorizer asks them for every rule of every request, and labs' judgements
# millions of times over a space of requests.
def verb_matches(rule: dict, verb: str) -> bool:
    verbs = rule.get("verbs") or ()
    if not isinstance(verbs, list):     # as stored, a list of strings; anything else: item by item
        return any(v == "*" or v == verb for v in verbs)
    return "*" in verbs or verb in verbs


def api_group_matches(rule: dict, group: str) -> bool:
    groups = rule.get("apiGroups") or ()
    if not isinstance(groups, list):
        return any(g == "*" or g == group for g in groups)
    return "*" in groups or group in groups


def resource_matches(rule: dict, combined: str, subresource: str) -> bool:
    for resource in rule.get("resources") or ():
        if resource == "*" or resource == combined:
            return True
        if subresource and len(resource) == len(subresource) + 2 and resource.startswith("*/") \
                and resource.endswith(subresource):
            return True
    return False


def resource_name_matches(rule: dict, name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return not names or name in names


def non_resource_url_matches(rule: dict, path: str) -> bool:
    for url in rule.get("nonResourceURLs") or ():
        if url == "*" or url == path:
            return True
        if url.endswith("*") and path.startswith(url.rstrip("*")):
            return True
    return False


def rule_allows(attributes, rule: dict) -> bool:
    """rbac.go RuleAllows: a resource request (one with a resource) or a non-resource one."""
    a = attributes
    if a.resource:
        combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        return (verb_matches(rule, a.verb) and api_group_matches(rule, a.group)
                and resource_matches(rule, combined, a.subresource) and resource_name_matches(rule, a.name))
    return verb_matches(rule, a.verb) and non_resource_url_matches(rule, a.path)


def rules_allow(attributes, rules: list[dict]) -> bool:
    return any(rule_allows(attributes, rule) for rule in rules)


# -- rule.go ----------------------------------------------------------------------------------------

class ResolutionError(Exception):
    """A binding whose role cannot be resolved (its message is the lister's or registry's error)."""


def aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as is, several as `[a, b]`, repeats once."""
    seen: list[str] = []
    for message in errors:
        if message not in seen:
            seen.append(message)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def describe_subject(subject: dict, binding_namespace: str) -> str:
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f"{kind} {go_quote(name + '/' + (subject.get('namespace') or binding_namespace))}"
    return f"{kind} {go_quote(name)}"


@dataclass
class Source:
    """Where a rule came from: a binding, its role and the subject that matched."""
    binding: dict
    subject: dict

    @property
    def namespaced(self) -> bool:
        return self.binding.get("kind") == "RoleBinding" or bool(self.binding["metadata"].get("namespace"))

    def __str__(self) -> str:
        meta, ref = self.binding["metadata"], self.binding.get("roleRef") or {}
        if self.namespaced:
            return (f"RoleBinding {go_quote(meta['name'] + '/' + meta['namespace'])} of {ref.get('kind', '')} "
                    f"{go_quote(ref.get('name', ''))} to {describe_subject(self.subject, meta['namespace'])}")
        return (f"ClusterRoleBinding {go_quote(meta['name'])} of {ref.get('kind', '')} {go_quote(ref.get('name', ''))} "
                f"to {describe_subject(self.subject, '')}")


def applies_to_user(user: str, groups: list[str], subject: dict, namespace: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return user == subject.get("name")
    if kind == "Group":
        return subject.get("name") in groups
    if kind == "ServiceAccount":
        # a subject without a namespace means the binding's own (serviceaccount.MatchesUsername)
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user == f"system:serviceaccount:{sa_namespace}:{subject.get('name', '')}"
    return False


Visitor = Callable[["Source | None", "dict | None", "str | None"], bool]


class RuleResolver:
    """DefaultRuleResolver over the store. `plural` chooses how a missing role is reported: the
    authorizer resolves through listers (`clusterrole.rbac.authorization.k8s.io "x" not found`),
    the escalation checks of the RBAC storage through the registry (`clusterroles....`)."""

    def __init__(self, store, plural: bool = False):
        self.store = store
        self.plural = plural

    def _objects(self, key: str, namespace: str | None = None) -> list[dict]:
        entries, _ = self.store.scan(key, namespace)
        return [obj for _, obj, _ in entries]

    def _get(self, key: str, namespace: str, name: str) -> dict | None:
        return self.store.get(key, namespace, name)

    def _missing(self, resource: str, name: str) -> ResolutionError:
        return ResolutionError(f"{resource + 's' if self.plural else resource}.{GROUP} {go_quote(name)} not found")

    def role_reference_rules(self, ref: dict, binding_namespace: str) -> list[dict]:
        """GetRoleReferenceRules."""
        kind, name = ref.get("kind"), ref.get("name", "")
        if kind == "Role":
            role = self._get(ROLES, binding_namespace, name)
            if role is None:
                raise self._missing("role", name)
            return list(role.get("rules") or [])
        if kind == "ClusterRole":
            role = self._get(CLUSTER_ROLES, "", name)
            if role is None:
                raise self._missing("clusterrole", name)
            return list(role.get("rules") or [])
        raise ResolutionError(f"unsupported role reference kind: {go_quote(kind or '')}")

    def visit_rules_for(self, user: str, groups: list[str], namespace: str, visitor: Visitor) -> None:
        """VisitRulesFor: visitor(source, rule, error) for each rule, stopping when it returns False."""
        scopes = [(self._objects(CLUSTER_ROLE_BINDINGS), "")]
        if namespace:
            scopes.append((self._objects(ROLE_BINDINGS, namespace), namespace))
        for bindings, binding_namespace in scopes:
            for binding in bindings:
                subject = next((s for s in binding.get("subjects") or []
                                if applies_to_user(user, groups, s, binding_namespace)), None)
                if subject is None:
                    continue
                try:
                    rules = self.role_reference_rules(binding.get("roleRef") or {}, binding_namespace)
                except ResolutionError as exc:
                    if not visitor(None, None, str(exc)):
                        return
                    continue
                source = Source(binding, subject)
                for rule in rules:
                    if not visitor(source, rule, None):
                        return

    def rules_for(self, user: str, groups: list[str], namespace: str) -> tuple[list[dict], list[str]]:
        """RulesFor: every rule that applies and the resolution errors met."""
        rules: list[dict] = []
        errors: list[str] = []

        def visit(source, rule, error):
            if rule is not None:
                rules.append(rule)
            if error is not None:
                errors.append(error)
            return True
        self.visit_rules_for(user, groups, namespace, visit)
        return rules, errors


@dataclass
class RBACDecision:
    allowed: bool
    reason: str = ""
    source: Source | None = None
    rule: dict | None = None


class RBACAuthorizer:
    def __init__(self, store):
        self.resolver = RuleResolver(store)

    def authorize(self, attributes) -> RBACDecision:
        """RBACAuthorizer.Authorize with authorizingVisitor."""
        found: dict = {}
        errors: list[str] = []

        def visit(source, rule, error):
            if rule is not None and rule_allows(attributes, rule):
                found.update(source=source, rule=rule)
                return False
            if error is not None:
                errors.append(error)
            return True
        self.resolver.visit_rules_for(attributes.user, attributes.groups, attributes.namespace, visit)
        if found:
            return RBACDecision(True, f"RBAC: allowed by {found['source']}", found["source"], found["rule"])
        return RBACDecision(False, f"RBAC: {aggregate(errors)}" if errors else "")

    def rules_for(self, user: str, groups: list[str], namespace: str) -> tuple[list[dict], list[dict], str]:
        """RBACAuthorizer.RulesFor: (resource rules, non-resource rules, evaluation error)."""
        rules, errors = self.resolver.rules_for(user, groups, namespace)
        resource_rules, non_resource_rules = [], []
        for rule in rules:
            if rule.get("resources"):
                info = {"verbs": list(rule.get("verbs") or [])}
                for key in ("apiGroups", "resources", "resourceNames"):
                    if rule.get(key):
                        info[key] = list(rule[key])
                resource_rules.append(info)
            if rule.get("nonResourceURLs"):
                non_resource_rules.append({"verbs": list(rule.get("verbs") or []),
                                           "nonResourceURLs": list(rule["nonResourceURLs"])})
        return resource_rules, non_resource_rules, aggregate(errors) if errors else ""
