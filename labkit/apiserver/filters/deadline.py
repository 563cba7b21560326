"""WithRequestDeadline (staging/src/k8s.io/apiserver/pkg/endpoints/filters/request_deadline.go):
every request that is not long-running gets a deadline, kube-apiserver's --request-timeout (60 s
by default) after it arrived, or sooner when its `?timeout=` (a Go duration) asks for less; a
timeout of 0 or of more than the maximum leaves the default. A `timeout` Go cannot parse is a 400
(`invalid timeout specified in the request URL - time: ...`), audited without a user, as the
filter runs before authentication.

The deadline (`request.deadline`, time.monotonic() seconds) bounds what the request waits for:
a webhook call (admission/webhook.py) and PodSecurity's check of a namespace's Pods
(admission/podsecurity.py), as the request's context does upstream; a handler still running when
it passes is answered 504 by WithTimeoutForNonLongRunningRequests (filters/timeout.py).
"""

from __future__ import annotations

import time

from labkit.apiserver import goduration
from labkit.apiserver.errors import bad_request
from labkit.apiserver.filters import Handler
from labkit.apiserver.filters.audit import audit_failed_request
from labkit.apiserver.request import Request, request_attributes
from labkit.apiserver.response import Response

REQUEST_TIMEOUT = 60.0          # kube-apiserver --request-timeout's default (options/server_run_options.go)
# server/filters/longrunning.go BasicLongRunningRequestCheck, as kube-apiserver configures it
# (controlplane/apiserver/options: sets.NewString("watch", "proxy"), and these subresources)
LONG_RUNNING_VERBS = {"watch", "proxy"}
LONG_RUNNING_SUBRESOURCES = {"attach", "exec", "proxy", "log", "portforward"}
INVALID_TIMEOUT = "invalid timeout specified in the request URL"


def long_running(request: Request) -> bool:
    attrs = request_attributes(request)
    if attrs.verb in LONG_RUNNING_VERBS:
        return True
    if attrs.resource and attrs.subresource in LONG_RUNNING_SUBRESOURCES:
        return True
    return not attrs.resource and request.path.startswith("/debug/pprof/")


def request_timeout(value: str) -> float:
    """parseTimeout and the choice of the timeout: seconds; ValueError for a malformed value."""
    if not value:
        return REQUEST_TIMEOUT
    try:
        asked = goduration.parse(value) / 1e9
    except ValueError as exc:
        raise ValueError(f"{INVALID_TIMEOUT} - {exc}") from None
    return asked if 0 < asked < REQUEST_TIMEOUT else REQUEST_TIMEOUT


def with_request_deadline(handler: Handler, config) -> Handler:
    def deadline(request: Request) -> Response:
        if long_running(request):
            return handler(request)
        received = time.monotonic()
        try:
            timeout = request_timeout(request.query.get("timeout", ""))
        except ValueError as exc:
            error = bad_request(str(exc))
            audit_failed_request(config, request, error)
            return Response(error.code, error.status())
        request.deadline = received + timeout
        return handler(request)
    return deadline
