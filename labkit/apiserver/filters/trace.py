"""labkit's own filter: when the request has its answer, its trace (each stage's decisions,
trace.py) goes into the server's trace buffer, which `labkit requests explain` reads through
GET /labkit/v1/traces. Upstream has no such buffer (WithTracing exports OpenTelemetry spans)."""

from __future__ import annotations

from labkit.apiserver.filters import Handler
from labkit.apiserver.request import Request
from labkit.apiserver.response import Response


def with_trace(handler: Handler, api) -> Handler:
    """`api.traces` is looked up per request: the server gives the API its file-backed buffer
    (server.py) after the API built its in-process chain."""
    def traced(request: Request) -> Response:
        response = handler(request)
        api.traces.keep(request.trace)
        return response
    return traced
