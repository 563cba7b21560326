"""labkit's own filter: when the request has its answer, its trace (each stage's decisions,
trace.py) goes into the server's trace buffer, which `labkit requests explain` reads through
GET /labkit/v1/traces. Upstream has no such buffer (WithTracing exports OpenTelemetry spans)."""

from __future__ import annotations

from labkit.apiserver.filters import Handler
from labkit.apiserver.request import Request
from labkit.apiserver.response import Response
from labkit.apiserver.trace import Traces


def with_trace(handler: Handler, traces: Traces) -> Handler:
    def traced(request: Request) -> Response:
        response = handler(request)
        traces.keep(request.trace)
        return response
    return traced
