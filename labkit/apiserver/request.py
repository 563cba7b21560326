"""The request, its user and its request info: the bottom of the request pipeline, which every
stage reads (what kube-apiserver keeps in staging/src/k8s.io/apiserver/pkg/endpoints/request:
requestinfo.go `RequestInfoFactory.NewRequestInfo`, and the user of
pkg/authentication/user/user.go `user.Info`). It imports nothing of the pipeline above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labkit.apiserver.authorizer import Attributes
from labkit.apiserver.errors import ApiError, bad_request
from labkit.apiserver.selectors import FieldSelector
from labkit.apiserver.trace import Trace
from labkit.apiserver.validation import path_segment_problems

NO_BODY = object()


@dataclass
class User:
    name: str
    groups: list[str] = field(default_factory=lambda: ["system:authenticated"])
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)    # user.Info's Extra

    def info(self) -> dict:
        """authentication/v1 UserInfo: what SelfSubjectReview, audit events and a CSR's spec show."""
        info = {"username": self.name}
        if self.uid:
            info["uid"] = self.uid
        info["groups"] = list(self.groups)
        if self.extra:
            info["extra"] = {k: list(v) for k, v in self.extra.items()}
        return info


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)     # lower-case names
    body: bytes | None = None
    obj: Any = NO_BODY                # an already decoded body (in-process callers)
    user: User = field(default_factory=lambda: User("anonymous"))
    source: str = "127.0.0.1"
    trace: Trace = field(default_factory=Trace)      # each pipeline stage's decision (trace.py)
    impersonator: User | None = None  # the authenticated user when `user` is an impersonated one
    # the Impersonate-* headers (lower-case names, repeated ones repeated), applied inside the audit
    impersonation: list[tuple[str, str]] = field(default_factory=list)
    # a request of labkit's in-process controllers, which the authorizer does not check (authorizer.py)
    trusted: bool = False
    certificate: bytes | None = None  # the client certificate (DER) the TLS connection presented
    # what the filters and the handler record for the audit (upstream keeps them in the context):
    audit: Any = None                 # the request's audit.RequestAudit, set by the audit filter
    audit_object: Any = None          # the object the audit event records as the request object
    deadline: float | None = None     # time.monotonic() when the request's time is up (filters/deadline.py)
    uri: str = ""                     # the request-target as sent (path and query, still encoded), over HTTP


NAMESPACE_SUBRESOURCE_NAMES = {"status", "finalize"}       # requestinfo.go namespaceSubresources


def request_attributes(request: Request) -> Attributes:
    """The authorizer's attributes of a request, from its URL and method alone, as
    RequestInfoFactory.NewRequestInfo (endpoints/request/requestinfo.go) parses them before
    anything is routed: /api/<version>/... and /apis/<group>/<version>/... with at least a
    resource are resource requests (`watch` as a path prefix or `?watch=true` make a watch, GET
    and DELETE without a name a list or deletecollection); a namespace's own URL is in that
    namespace; a list or watch whose field selector fixes metadata.name names that object.
    Everything else is a non-resource request of the lower-case method on the path."""
    user, method = request.user, request.method.upper()
    parts = [p for p in request.path.strip("/").split("/") if p]
    non_resource = Attributes(user.name, user.groups, method.lower(), path=request.path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    rest = parts[1:]
    group = ""
    if parts[0] == "apis":
        if len(rest) < 3:
            return non_resource
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    verb = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete"}.get(method, "")
    if rest and rest[0] == "watch":
        verb, rest = "watch", rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCE_NAMES:
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        verb = "watch" if request.query.get("watch", "").lower() in ("true", "1") else "list"
        selector = request.query.get("fieldSelector")
        if selector:
            try:
                selected = FieldSelector.parse(selector).single_value("metadata.name")
            except ApiError:
                selected = None
            if selected and not path_segment_problems(selected):
                name = selected
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(user.name, user.groups, verb, namespace, group, version, resource, subresource, name)


MAX_DEPTH = 200


def check_depth(doc, limit: int = MAX_DEPTH):
    """Refuse documents nested deeper than any Kubernetes object is (what is deeper would only
    exhaust the stack of whatever walks it)."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise bad_request(f"the request body is nested more than {limit} levels deep")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return doc


