"""WithAuthorization (staging/src/k8s.io/apiserver/pkg/endpoints/filters/authorization.go): the
authorizer's decision about the request's attributes (its RequestInfo and user, request.py),
a 403 when it does not allow it. The request's user and attributes stay in
`authorizer.current_request` while the rest of the request runs (the escalation check and the
certificate admission plugins read them). Requests of labkit's in-process controllers are not
authorized (authorizer.py says why).
"""

from __future__ import annotations

from labkit.apiserver.authorizer import TRUSTED_DETAIL, Authorizer, current_request, require
from labkit.apiserver.filters import Handler
from labkit.apiserver.request import Request, request_attributes
from labkit.apiserver.response import Response


def with_authorization(handler: Handler, authorizer: Authorizer) -> Handler:
    def authorize(request: Request) -> Response:
        if request.trusted:
            request.trace.add("authorization", "labkit", "allowed", TRUSTED_DETAIL)
            context = current_request.set(None)
        else:
            attributes = request_attributes(request)
            context = current_request.set((request.user, attributes))
        try:
            if not request.trusted:
                require(authorizer, attributes, request.trace)
            return handler(request)
        finally:
            current_request.reset(context)
    return authorize
