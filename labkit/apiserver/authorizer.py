"""Who may do what: the one place the server decides, used for every request and by the access
review APIs (SelfSubjectAccessReview, SubjectAccessReview, SelfSubjectRulesReview), so that
`kubectl auth can-i` always says what the server does.

Today the embedded server authorizes every authenticated user for everything Kubernetes
serves — its users are the admin of the kubeconfig (in system:masters) and the controllers —
which is what kube-apiserver's privileged-group rule does for system:masters; labkit's own
administration API (/labkit/v1) is for system:masters only. Anyone may read the health and
version paths. A real authorizer (RBAC) replaces `Authorizer.authorize` and `Authorizer.rules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass
class Rules:
    """What a user may do in a namespace (SelfSubjectRulesReview's status)."""
    resource_rules: list[dict] = field(default_factory=list)
    non_resource_rules: list[dict] = field(default_factory=list)
    incomplete: bool = False
    evaluation_error: str = ""


# the bootstrap ClusterRole system:public-info-viewer, bound to system:authenticated and
# system:unauthenticated (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go)
PUBLIC_INFO_PATHS = ("/healthz", "/livez", "/readyz", "/version", "/version/")
ADMIN_PREFIX = "/labkit/"
# what the server serves outside resources and labkit's administration API
SERVED_PATHS = ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", *PUBLIC_INFO_PATHS]


class Authorizer:
    def authorize(self, attributes: Attributes) -> Decision:
        if "system:masters" in attributes.groups:
            return Decision(True)
        if attributes.path.startswith(ADMIN_PREFIX):
            return Decision(False, "labkit's administration API is for system:masters")
        if "system:authenticated" in attributes.groups:
            return Decision(True)
        if attributes.verb == "get" and not attributes.resource and attributes.path in PUBLIC_INFO_PATHS:
            return Decision(True)
        return Decision(False, "no rule allows unauthenticated requests")

    def rules(self, user: str, groups: list[str], namespace: str) -> Rules:
        if "system:masters" in groups:
            return Rules([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                         [{"verbs": ["*"], "nonResourceURLs": ["*"]}])
        if "system:authenticated" in groups:
            return Rules([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                         [{"verbs": ["*"], "nonResourceURLs": SERVED_PATHS}])
        return Rules([], [{"verbs": ["get"], "nonResourceURLs": list(PUBLIC_INFO_PATHS)}])


def require(authorizer: Authorizer, attributes: Attributes) -> None:
    """Raise the 403 kube-apiserver answers when the authorizer does not allow the request
    (endpoints/handlers/responsewriters: Forbidden and forbiddenMessage)."""
    decision = authorizer.authorize(attributes)
    if decision.allowed:
        return
    from labkit.apiserver.errors import forbidden
    a = attributes
    if not a.resource:
        message = f'User "{a.user}" cannot {a.verb} path "{a.path}"'
    else:
        resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        where = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
        message = f'User "{a.user}" cannot {a.verb} resource "{resource}" in API group "{a.group}" {where}'
    if decision.reason:
        message += f": {decision.reason}"
    raise forbidden(a.resource, a.group, a.name, message)
