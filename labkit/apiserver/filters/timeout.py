"""WithTimeoutForNonLongRunningRequests (staging/src/k8s.io/apiserver/pkg/server/filters/timeout.go):
a request that is not long-running (filters/deadline.py `long_running`) runs in a handler of its
own, and when its deadline (`?timeout=`, else --request-timeout, set by WithRequestDeadline
outside this filter) passes before that handler answered, the client gets 504 at once:
`apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0)`'s Status,
written by json.Encoder without apiVersion and kind and without a Content-Type header (Go's
server then sniffs the JSON as `text/plain; charset=utf-8`). The handler is not stopped: it
finishes on its own (upstream's goroutine goes on; its writes are dropped, and what it did — a
stored object, an audit event with its own response code — stays done).

The filter sits inside the request deadline and outside authentication, audit, impersonation and
authorization, as in DefaultBuildHandlerChain.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time

from labkit.apiserver.filters import Handler
from labkit.apiserver.filters.deadline import long_running
from labkit.apiserver.request import Request
from labkit.apiserver.response import Response

TIMEOUT_MESSAGE = "Timeout: request did not complete within the allotted timeout"
# metav1.Status of NewTimeoutError(msg, 0), as json.NewEncoder(w).Encode writes it: no TypeMeta,
# details with its zero retryAfterSeconds left out, a newline at the end
TIMEOUT_BODY = (json.dumps({"metadata": {}, "status": "Failure", "message": TIMEOUT_MESSAGE, "reason": "Timeout",
                            "details": {}, "code": 504}, separators=(",", ":")) + "\n").encode()
SNIFFED_TYPE = "text/plain; charset=utf-8"      # net/http DetectContentType of that body


def timed_out() -> Response:
    return Response(504, TIMEOUT_BODY, content_type=SNIFFED_TYPE)


def with_timeout(handler: Handler) -> Handler:
    def timeout(request: Request) -> Response:
        if request.deadline is None or long_running(request):
            return handler(request)
        result: dict = {}
        done = threading.Event()
        context = contextvars.copy_context()

        def run():
            try:
                result["response"] = context.run(handler, request)
            except BaseException as exc:        # re-raised where the request is answered (a panic)
                result["error"] = exc
            finally:
                result["finished"] = time.monotonic()
                done.set()

        threading.Thread(target=run, daemon=True, name="apiserver-request").start()
        # upstream selects on the request context's Done and the handler's result: a handler that
        # answers only once the deadline has passed (a webhook call cut off by that same deadline,
        # say) finds the 504 written already, however late this thread wakes to see it
        if not done.wait(max(0.0, request.deadline - time.monotonic())) or result["finished"] >= request.deadline:
            return timed_out()
        if "error" in result:
            raise result["error"]
        return result["response"]
    return timeout
