"""WithAuthentication (staging/src/k8s.io/apiserver/pkg/endpoints/filters/authentication.go
`withAuthentication`, `Unauthorized`): the authenticators (authn.py) decide who sent the request;
the credentials go no further than this filter. A request none recognises, with a credential
that failed, goes to the failed handler: WithFailedAuthenticationAudit (audit.py), then a bare
401 Status.
"""

from __future__ import annotations

import sys

from labkit.apiserver.authn import Authenticator, Unauthenticated
from labkit.apiserver.errors import unauthorized as unauthorized_error
from labkit.apiserver.filters import Handler
from labkit.apiserver.request import Request
from labkit.apiserver.response import Response


def with_authentication(handler: Handler, authenticator: Authenticator, failed: Handler) -> Handler:
    def authenticate(request: Request) -> Response:
        authorization = request.headers.get("authorization", "")
        try:
            request.user = authenticator.authenticate(request.certificate, authorization, request.trace)
        except Unauthenticated as exc:
            print(f"labkit-apiserver: Unable to authenticate the request: {exc}", file=sys.stderr)
            return failed(request)
        # filters/authentication.go: the credentials go no further than authentication
        request.headers.pop("authorization", None)
        return handler(request)
    return authenticate


def unauthorized(request: Request) -> Response:
    """filters/authentication.go `Unauthorized`: the 401 Status, nothing about why."""
    error = unauthorized_error()
    return Response(error.code, error.status())
