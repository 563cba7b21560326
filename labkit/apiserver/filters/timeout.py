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

Upstream starts a goroutine per request. A Python thread costs ~0.1 ms of CPU to start, as much
as a whole GET of the handler, so the handlers run on reused threads (`Workers`): an idle one
takes the next request, a new one starts only when every thread is busy (a handler past its
deadline keeps its thread until it finishes, as the goroutine does).
"""

from __future__ import annotations

import _thread
import contextvars
import json
import queue
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


class Workers:
    """Threads that run one handler after another. `run(job)` hands `job` to an idle thread, or
    to a new one when none is idle; a thread that finds `keep` threads idle already ends."""

    def __init__(self, keep: int = 32):
        self._idle: list[queue.SimpleQueue] = []
        self._lock = threading.Lock()
        self._keep = keep

    def run(self, job) -> None:
        with self._lock:
            jobs = self._idle.pop() if self._idle else None
        if jobs is None:
            jobs = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(jobs,), daemon=True, name="apiserver-request").start()
        jobs.put(job)

    def _serve(self, jobs: queue.SimpleQueue) -> None:
        while True:
            jobs.get()()
            with self._lock:
                if len(self._idle) >= self._keep:
                    return
                self._idle.append(jobs)


WORKERS = Workers()


def with_timeout(handler: Handler) -> Handler:
    def timeout(request: Request) -> Response:
        if request.deadline is None or long_running(request):
            return handler(request)
        result: dict = {}
        done = _thread.allocate_lock()
        done.acquire()
        context = contextvars.copy_context()

        def run():
            try:
                result["response"] = context.run(handler, request)
            except BaseException as exc:        # re-raised where the request is answered (a panic)
                result["error"] = exc
            finally:
                result["finished"] = time.monotonic()
                done.release()

        WORKERS.run(run)
        # upstream selects on the request context's Done and the handler's result: a handler that
        # answers only once the deadline has passed (a webhook call cut off by that same deadline,
        # say) finds the 504 written already, however late this thread wakes to see it
        if not done.acquire(timeout=max(0.0, request.deadline - time.monotonic())) \
                or result["finished"] >= request.deadline:
            return timed_out()
        if "error" in result:
            raise result["error"]
        return result["response"]
    return timeout
