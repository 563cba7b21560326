"""WithImpersonation (staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation.go): the
Impersonate-* headers, each authorized as the verb `impersonate` (labkit.apiserver.impersonation
decides), make the request the impersonated user's from here on; the audit event records the
impersonated user (audit.LogImpersonatedUser). Headers that name no user are a 500, written by
this filter as upstream's responsewriters.InternalError writes it.
"""

from __future__ import annotations

import json

from labkit.apiserver import impersonation
from labkit.apiserver.authorizer import Authorizer
from labkit.apiserver.filters import Handler
from labkit.apiserver.request import Request, User
from labkit.apiserver.response import Response


def with_impersonation(handler: Handler, authorizer: Authorizer) -> Handler:
    def impersonate(request: Request) -> Response:
        if request.impersonator is None and request.impersonation:
            try:
                acting = impersonation.impersonate(authorizer, request.user, request.impersonation, request.trace)
            except impersonation.WithoutUser as exc:
                return _internal_error(request, exc)
            if acting is not None:
                request.impersonator, request.user = request.user, User(*acting)
                if request.audit is not None:
                    request.audit.event["impersonatedUser"] = request.user.info()      # audit.LogImpersonatedUser
        return handler(request)
    return impersonate


def _internal_error(request: Request, exc: Exception) -> Response:
    """responsewriters.InternalError: plain text, the request URI quoted."""
    query = "&".join(f"{k}={v}" for k, v in request.query.items())
    uri = request.path + (f"?{query}" if query else "")
    response = Response(500, f"Internal Server Error: {json.dumps(uri)}: {exc}\n".encode(),
                        "text/plain; charset=utf-8")
    request.trace.add("impersonation", "headers", "error", str(exc))
    return response
