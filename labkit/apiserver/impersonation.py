"""Impersonation (staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation.go, v1.34):
the Impersonate-User, Impersonate-Group, Impersonate-Extra-<key> and Impersonate-Uid headers
(kubectl --as, --as-group, --as-uid).

It runs inside the audit filter (WithAudit wraps WithImpersonation), so a refused impersonation
is audited like any request, under the authenticated user, and traced. What it does
(buildImpersonationRequests, WithImpersonation):
- each header is one request to act as something: the user (a ServiceAccount when the name is
  system:serviceaccount:NS:NAME), each group, each value of each extra key (the key from the
  header name, lower-cased and path-unescaped), the UID; groups, extras or a UID without a user
  are a 500 answered in plain text (responsewriters.InternalError: `Internal Server Error:
  "URI": requested [...] without impersonating a user`);
- each request is authorized with verb `impersonate` on users, serviceaccounts (in their
  namespace), groups, userextras/<key> or uids (authentication.k8s.io), in that order; the first
  refusal is the request's 403 (responsewriters.Forbidden);
- the new user: the name, the groups asked for (a ServiceAccount asked for without groups gets
  system:serviceaccounts and system:serviceaccounts:NS), system:authenticated added unless a
  group asked for is system:authenticated or system:unauthenticated — for system:anonymous,
  system:unauthenticated added instead unless asked for — the extras and the UID;
- the audit event records it as impersonatedUser from then on (audit.LogImpersonatedUser: the
  RequestReceived stage, already written, does not have it).
"""

from __future__ import annotations

from urllib.parse import unquote

from labkit.apiserver.authorizer import Attributes, require
from labkit.apiserver.errors import ApiError

SA_PREFIX = "system:serviceaccount:"
EXTRA_PREFIX = "impersonate-extra-"
AUTHENTICATED, UNAUTHENTICATED, ANONYMOUS = "system:authenticated", "system:unauthenticated", "system:anonymous"


class WithoutUser(Exception):
    """Groups, extras or a UID asked for without a user: upstream's plain-text 500."""


def _object_reference(kind: str, name: str, namespace: str = "", api_version: str = "", field_path: str = "") -> str:
    """Go's %v of a v1.ObjectReference: its seven fields in order, space-separated."""
    return "{" + " ".join((kind, namespace, name, "", api_version, "", field_path)) + "}"


def requests_from_headers(headers: list[tuple[str, str]]) -> list[dict]:
    """buildImpersonationRequests: what the headers ask to act as, in header order."""
    requests = []
    user = next((v for k, v in headers if k == "impersonate-user"), "")
    if user:
        parts = user.split(":")
        if user.startswith(SA_PREFIX) and len(parts) == 4 and parts[2] and parts[3]:
            requests.append({"kind": "ServiceAccount", "namespace": parts[2], "name": parts[3]})
        else:
            requests.append({"kind": "User", "name": user})
    requests += [{"kind": "Group", "name": v} for k, v in headers if k == "impersonate-group"]
    for key, value in headers:
        if key.startswith(EXTRA_PREFIX):
            requests.append({"kind": "UserExtra", "name": value, "key": unquote(key[len(EXTRA_PREFIX):]),
                             "apiVersion": "authentication.k8s.io/v1"})
    uid = next((v for k, v in headers if k == "impersonate-uid"), "")
    if uid:
        requests.append({"kind": "UID", "name": uid, "apiVersion": "authentication.k8s.io/v1"})
    if requests and not user:
        shown = " ".join(_object_reference(r["kind"], r["name"], r.get("namespace", ""), r.get("apiVersion", ""),
                                           r.get("key", "")) for r in requests)
        raise WithoutUser(f"requested [{shown}] without impersonating a user")
    return requests


def impersonate(authorizer, user, headers: list[tuple[str, str]], trace):
    """WithImpersonation: the user the request acts as — (name, groups, uid, extra) — or None
    without impersonation headers. Raises WithoutUser or the 403 ApiError of the first refusal."""
    requests = requests_from_headers(headers)
    if not requests:
        return None
    groups_specified = any(r["kind"] == "Group" for r in requests)
    name, groups, extra, uid = "", [], {}, ""
    for r in requests:
        kind = r["kind"]
        if kind == "ServiceAccount":
            attributes = Attributes(user.name, user.groups, "impersonate", r["namespace"], resource="serviceaccounts",
                                    name=r["name"])
            name = f"{SA_PREFIX}{r['namespace']}:{r['name']}"
            if not groups_specified:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{r['namespace']}"]
        elif kind == "User":
            attributes = Attributes(user.name, user.groups, "impersonate", resource="users", name=r["name"])
            name = r["name"]
        elif kind == "Group":
            attributes = Attributes(user.name, user.groups, "impersonate", resource="groups", name=r["name"])
            groups.append(r["name"])
        elif kind == "UserExtra":
            attributes = Attributes(user.name, user.groups, "impersonate", group="authentication.k8s.io",
                                    version="v1", resource="userextras", subresource=r["key"], name=r["name"])
            extra.setdefault(r["key"], []).append(r["name"])
        else:
            attributes = Attributes(user.name, user.groups, "impersonate", group="authentication.k8s.io",
                                    version="v1", resource="uids", name=r["name"])
            uid = r["name"]
        decision = user_may(authorizer, attributes, trace)
        trace.add("impersonation", kind, "allowed", f"{user.name!r} may impersonate {kind} {r['name']!r}"
                  + (f" (extra key {r['key']!r})" if kind == "UserExtra" else "") + f": {decision}")
    if name != ANONYMOUS:
        if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
            groups.append(AUTHENTICATED)
    elif UNAUTHENTICATED not in groups:
        groups.append(UNAUTHENTICATED)
    trace.add("impersonation", "user", "impersonating",
              f"{user.name!r} acts as {name!r} with groups {groups}" + (f", extra {extra}" if extra else "")
              + (f", UID {uid!r}" if uid else ""), user=name, groups=list(groups), extra=extra, uid=uid)
    return name, groups, uid, extra


def user_may(authorizer, attributes: Attributes, trace) -> str:
    """One impersonation check: its decision in words, or the 403 (traced as refused)."""
    try:
        decision = require(authorizer, attributes)
    except ApiError as exc:
        trace.add("impersonation", "authorizer", "denied", exc.message, code=exc.code)
        raise
    return decision.reason or ("allowed by " + str(decision.source) if decision.source else "allowed")
