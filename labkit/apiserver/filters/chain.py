"""The handler chain: every request's way through the API server, in one place."""

from __future__ import annotations

from labkit.apiserver.authn import Authenticator
from labkit.apiserver.filters import Handler
from labkit.apiserver.filters.audit import with_audit, with_audit_init, with_failed_authentication_audit
from labkit.apiserver.filters.authentication import unauthorized, with_authentication
from labkit.apiserver.filters.authorization import with_authorization
from labkit.apiserver.filters.deadline import with_request_deadline
from labkit.apiserver.filters.impersonation import with_impersonation
from labkit.apiserver.filters.timeout import with_timeout
from labkit.apiserver.filters.trace import with_trace


def build_handler_chain(api, authenticator: Authenticator | None = None) -> Handler:
    """kube-apiserver's DefaultBuildHandlerChain (staging/src/k8s.io/apiserver/pkg/server/config.go),
    with the filters labkit reconstructs, in upstream's order. Each line wraps the handler built
    so far, so a request meets them from the bottom up: audit init, the request's deadline
    (`?timeout=`), the 504 of a handler past that deadline, authentication, audit,
    impersonation, authorization, then the director (`api.serve`: routing, then the REST handler
    with admission, validation and storage). Upstream's other filters (panic recovery, request
    info, CORS, flow control, …) have no stage here: the audit filter answers a panic
    with a 500, and the request info is parsed from the request where a stage needs it
    (request.py).

    `authenticator` is the HTTP front end's; requests of in-process clients (LocalClient) arrive
    with their user and skip authentication."""
    handler = api.serve
    handler = with_authorization(handler, api.authorizer)
    handler = with_impersonation(handler, api.authorizer)
    handler = with_audit(handler, api)
    if authenticator is not None:
        failed = with_failed_authentication_audit(unauthorized, api)
        handler = with_authentication(handler, authenticator, failed)
    handler = with_timeout(handler)
    handler = with_request_deadline(handler, api)
    handler = with_trace(handler, api)
    handler = with_audit_init(handler)
    return handler
