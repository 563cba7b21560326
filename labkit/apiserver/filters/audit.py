"""The audit filters (staging/src/k8s.io/apiserver/pkg/endpoints/filters/): WithAuditInit
(audit_init.go: the request's audit ID), WithAudit (audit.go: the policy's decision for the
authenticated user, the RequestReceived stage, then ResponseStarted/ResponseComplete — or Panic —
when the answer is known) and WithFailedAuthenticationAudit (authn_audit.go: the single event of a
request that failed authentication). The policy is auditpolicy.py's, the log audit.py's; `config`
is the Api, whose audit log and policy are read at each request.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import traceback
import uuid

from labkit.apiserver.audit import RequestAudit
from labkit.apiserver.authn import attempted_methods
from labkit.apiserver.errors import ApiError, internal
from labkit.apiserver.filters import Handler
from labkit.apiserver.request import Request, User, request_attributes
from labkit.apiserver.response import Response


def with_audit_init(handler: Handler) -> Handler:
    def init(request: Request) -> Response:
        if not request.trace.audit_id:
            request.trace.audit_id = str(uuid.uuid4())
        return handler(request)
    return init


def with_audit(handler: Handler, config) -> Handler:
    """WithAudit; the handlers inside it answer errors as Status objects, and a request that
    raised anything else is a panic: a 500, audited at stage Panic."""
    def audited(request: Request) -> Response:
        received = time.time()
        audit = None
        panicked = False
        try:
            audit = request.audit = _begin(config, request, received)
            response = handler(request)
        except ApiError as exc:
            response = Response(exc.code, exc.status())
        except Exception as exc:    # never let a request take the server down
            traceback.print_exc(file=sys.stderr)
            response = Response(500, internal(f"{type(exc).__name__}: {exc}").status())
            panicked = True
        if audit is None:
            audit = request.audit = _begin(config, request, received)
        _end(audit, request, response, request.audit_object, panicked)
        return response
    return audited


def with_failed_authentication_audit(failed: Handler, config) -> Handler:
    """authn_audit.go WithFailedAuthenticationAudit: one event, stage ResponseStarted, no user,
    code 401 and a message naming the methods the request tried."""
    def audited(request: Request) -> Response:
        message = attempted_methods(request.headers.get("authorization", ""), request.query.get("access_token", ""),
                                    bool(request.certificate))
        audit = _audit_request(config, request, time.time(), None)
        if audit.enabled and "ResponseStarted" not in audit.config.omit_stages:
            audit.emit("ResponseStarted", code=401, status={"kind": "Status", "message": message})
            request.trace.add("audit", "policy", audit.config.level,
                              f"the failed authentication is audited as one ResponseStarted event: {message}")
        return failed(request)
    return audited


def audit_failed_request(config, request: Request, error: ApiError) -> None:
    """request_deadline.go withFailedRequestAudit: a request refused before authentication (a
    malformed `?timeout=`) is audited as one ResponseStarted event, no user, the Status' message."""
    audit = _audit_request(config, request, time.time(), None)
    if audit.enabled and "ResponseStarted" not in audit.config.omit_stages:
        audit.emit("ResponseStarted", code=error.code, status={"kind": "Status", "message": error.message})
        request.trace.add("audit", "policy", audit.config.level,
                          f"the refused request is audited as one ResponseStarted event: {error.message}")


def _audit_request(config, request: Request, received: float, user: User | None) -> RequestAudit:
    """The request's audit: its policy decision and objectRef from the RequestInfo
    attributes (audit/request.go `NewEventFromRequest`), for the authenticated user — before
    impersonation, as WithAudit wraps WithImpersonation — and the fields every stage shares."""
    attributes = dataclasses.replace(request_attributes(request), user=user.name if user else "",
                                     groups=list(user.groups) if user else [])
    policy = config.audit_policy.evaluate(attributes)
    ref = None
    if attributes.resource:
        a = attributes
        ref = {k: v for k, v in (("resource", a.resource), ("namespace", a.namespace), ("name", a.name),
                                 ("apiGroup", a.group), ("apiVersion", a.version),
                                 ("subresource", a.subresource)) if v}
    # audit/request.go NewEventFromRequest: req.URL.RequestURI(), the path and query as the client
    # encoded them, repeated keys and all; an in-process request has only its decoded parts
    query = "&".join(f"{k}={v}" for k, v in request.query.items())
    uri = request.uri or request.path + (f"?{query}" if query else "")
    impersonated = request.user.info() if request.impersonator is not None else None
    return RequestAudit(config.audit, policy, audit_id=request.trace.audit_id,
                        uri=uri, verb=attributes.verb,
                        user=user.info() if user else None, source=request.source,
                        user_agent=request.headers.get("user-agent", ""), object_ref=ref, received=received,
                        impersonated=impersonated)


def _begin(config, request: Request, received: float) -> RequestAudit:
    audit = _audit_request(config, request, received, request.impersonator or request.user)
    audit.emit("RequestReceived")
    return audit


def _end(audit: RequestAudit, request: Request, response: Response, request_object, panicked: bool) -> None:
    config = audit.config
    if config.rule is None:
        request.trace.add("audit", "policy", config.level,
                          "no rule of the audit policy matches the request, so it is not audited (level None)")
    else:
        omitted = sorted(config.omit_stages)
        request.trace.add("audit", "policy", config.level,
                          f"rule {config.rule} of the audit policy is the first to match the request: level "
                          f"{config.level}" + (f", stages {', '.join(omitted)} omitted" if omitted else ""),
                          rule=config.rule)
    if request_object is not None and audit.event["verb"] in ("create", "update"):
        audit.complete_object_ref(request_object)
    body = response.body if isinstance(response.body, dict) else None
    annotations, levels = request.trace.annotations, request.trace.annotation_levels
    if response.stream is not None:
        # a long-running request: ResponseStarted when its headers go out, ResponseComplete
        # when it ends
        audit.emit("ResponseStarted", code=response.code, request_object=request_object, annotations=annotations,
                   levels=levels)
        response.stream.on_close = lambda: audit.emit("ResponseComplete", code=response.code,
                                                      request_object=request_object, annotations=annotations,
                                                      levels=levels)
        return
    audit.emit("Panic" if panicked else "ResponseComplete", code=response.code, status=body,
               request_object=request_object, response_object=body, annotations=annotations, levels=levels)
