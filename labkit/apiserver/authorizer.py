"""Who may do what: the one place the server decides, used for every request, for impersonation
(http.py) and by the access reviews (SelfSubjectAccessReview, SubjectAccessReview,
LocalSubjectAccessReview, SelfSubjectRulesReview), so that `kubectl auth can-i` always says
what the server does.

The chain is kube-apiserver's with `--authorization-mode=RBAC` (pkg/kubeapiserver/authorizer
config.go; staging/src/k8s.io/apiserver/pkg/authorization/union/union.go): first the
privileged-group authorizer (authorizerfactory/builtin.go privilegedGroupAuthorizer: any user in
system:masters is allowed, with no reason), then RBAC (rbac.py). The first that allows or denies
decides; when none does the request is forbidden with the reasons joined by newlines. There is
no Node authorizer.

`require` is the authorization filter (endpoints/filters/authorization.go WithAuthorization):
it writes the audit annotations `authorization.k8s.io/decision` (allow / forbid) and
`authorization.k8s.io/reason`, a trace step naming the binding and role that allowed or saying
that none did, and raises the 403 of handlers/responsewriters/errors.go Forbidden.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

from labkit.apiserver.errors import go_quote
from labkit.apiserver.rbac import RBACAuthorizer, Source

PRIVILEGED_GROUP = "system:masters"       # user.SystemPrivilegedGroup
DECISION_ANNOTATION = "authorization.k8s.io/decision"
REASON_ANNOTATION = "authorization.k8s.io/reason"

# labkit's in-process controllers and node stand-in run as the users kube-controller-manager's
# controllers and the kubelet use, but are not authorized: upstream, a controller's informers
# list and watch as system:kube-controller-manager and its writes go as its own ServiceAccount
# under the bootstrap role system:controller:<name> (--use-service-account-credentials), and
# the kubelet is authorized by the Node authorizer; labkit reconstructs neither split.
TRUSTED_DETAIL = ("a request of labkit's in-process controllers, which labkit does not authorize (upstream the "
                  "controllers' writes are authorized by RBAC under their system:controller:* roles)")

# the user and attributes of the API request being served (upstream: the request context),
# for the RBAC storage's escalation checks
current_request: contextvars.ContextVar = contextvars.ContextVar("current_request", default=None)


@dataclass
class Attributes:
    """authorizer.Attributes: a resource request (resource set) or a non-resource one (path)."""
    user: str
    groups: list[str]
    verb: str
    namespace: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


@dataclass
class Decision:
    allowed: bool
    reason: str = ""
    denied: bool = False        # an explicit deny (no other authorizer may allow)
    authorizer: str = ""        # which authorizer allowed
    source: Source | None = None
    rule: dict | None = None


@dataclass
class Rules:
    """What a user may do in a namespace (SelfSubjectRulesReview's status)."""
    resource_rules: list[dict] = field(default_factory=list)
    non_resource_rules: list[dict] = field(default_factory=list)
    incomplete: bool = False
    evaluation_error: str = ""


class Authorizer:
    """The union: privileged group, then RBAC over `store` (no store: the privileged group only)."""

    def __init__(self, store=None):
        self.rbac = RBACAuthorizer(store) if store is not None else None

    def authorize(self, attributes: Attributes) -> Decision:
        if PRIVILEGED_GROUP in attributes.groups:
            return Decision(True, "", authorizer="privileged group")
        if self.rbac is None:
            return Decision(False)
        decision = self.rbac.authorize(attributes)
        return Decision(decision.allowed, decision.reason, authorizer="RBAC" if decision.allowed else "",
                        source=decision.source, rule=decision.rule)

    def rules(self, user: str, groups: list[str], namespace: str) -> Rules:
        """The union rule resolver: RBAC's rules (the privileged-group authorizer lists none;
        system:masters holds cluster-admin through its bootstrap binding)."""
        if self.rbac is None:
            return Rules()
        resource_rules, non_resource_rules, error = self.rbac.rules_for(user, groups, namespace)
        return Rules(resource_rules, non_resource_rules, False, error)


def forbidden_message(a: Attributes) -> str:
    """responsewriters forbiddenMessage."""
    q = go_quote
    if not a.resource:
        return f"User {q(a.user)} cannot {a.verb} path {q(a.path)}"
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    if a.namespace:
        return (f"User {q(a.user)} cannot {a.verb} resource {q(resource)} in API group {q(a.group)} "
                f"in the namespace {q(a.namespace)}")
    return f"User {q(a.user)} cannot {a.verb} resource {q(resource)} in API group {q(a.group)} at the cluster scope"


def _sanitize(text: str) -> str:
    # responsewriters: sanitizer = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def forbidden_error(a: Attributes, reason: str):
    """responsewriters.Forbidden: NewForbidden(group resource, name, message[: reason])."""
    from labkit.apiserver.errors import forbidden
    message = _sanitize(forbidden_message(a))
    if reason:
        message += f": {reason}"
    return forbidden(a.resource, a.group, a.name, message)


def _describe(decision: Decision) -> tuple[str, str, dict]:
    """(authorizer name, a sentence, data) for the trace."""
    if decision.authorizer == "privileged group":
        return ("privileged group", "the user is in the group system:masters, which kube-apiserver's first "
                "authorizer allows everything without consulting RBAC", {})
    if decision.allowed and decision.source is not None:
        binding, ref = decision.source.binding, decision.source.binding.get("roleRef") or {}
        data = {"binding": {"kind": binding.get("kind"), "name": binding["metadata"]["name"],
                            "namespace": binding["metadata"].get("namespace", "")},
                "role": {"kind": ref.get("kind"), "name": ref.get("name")}, "subject": decision.source.subject,
                "rule": decision.rule}
        return "RBAC", f"allowed by {decision.source}", data
    if decision.reason:
        return "RBAC", ("no rule of any binding that applies to the user allows it, and some bindings point "
                        f"at roles that do not exist ({decision.reason})"), {}
    return "RBAC", "no rule of any ClusterRoleBinding, or RoleBinding in the request's namespace, that applies "\
                   "to the user allows it (RBAC has no opinion, so the request is forbidden)", {}


def require(authorizer: Authorizer, attributes: Attributes, trace=None) -> Decision:
    """WithAuthorization: allow, or raise the 403. With a trace, record the decision there and
    in the audit annotations."""
    decision = authorizer.authorize(attributes)
    if trace is not None:
        name, detail, data = _describe(decision)
        trace.annotations[DECISION_ANNOTATION] = "allow" if decision.allowed else "forbid"
        trace.annotations[REASON_ANNOTATION] = decision.reason
        trace.add("authorization", name, "allowed" if decision.allowed else "denied", detail, **data)
    if not decision.allowed:
        raise forbidden_error(attributes, decision.reason)
    return decision
