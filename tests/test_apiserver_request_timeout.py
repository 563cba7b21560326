"""`?timeout=` as kube-apiserver v1.34 reads it (endpoints/filters/request_deadline.go
WithRequestDeadline, parseTimeout; Go's time.ParseDuration): a Go duration shorter than the
60 s --request-timeout sets the request's deadline, 0 or more leaves the default, anything Go
cannot parse is a 400; long-running requests (watch, exec, log, …) are not given one."""

from __future__ import annotations

import shutil

import pytest

import support
from labkit.apiserver import goduration
from labkit.apiserver.filters.deadline import REQUEST_TIMEOUT, request_timeout
from support import admin_client, embedded_server, in_process_api


@pytest.mark.parametrize("text, nanoseconds", [
    ("5s", 5_000_000_000), ("1m30s", 90_000_000_000), ("1.5h", 5_400_000_000_000), ("300ms", 300_000_000),
    ("0", 0), ("-3s", -3_000_000_000), ("+2us", 2_000), ("1\u00b5s", 1_000), (".5s", 500_000_000),
    ("2562047h47m16.854775807s", (1 << 63) - 1),
])
def test_go_durations(text, nanoseconds):
    assert goduration.parse(text) == nanoseconds


@pytest.mark.parametrize("text, message", [
    ("abc", 'time: invalid duration "abc"'),
    ("", 'time: invalid duration ""'),
    ("5", 'time: missing unit in duration "5"'),
    ("5x", 'time: unknown unit "x" in duration "5x"'),
    ("1e3s", 'time: unknown unit "e" in duration "1e3s"'),
    (".s", 'time: invalid duration ".s"'),
    ("2562048h", 'time: invalid duration "2562048h"'),
])
def test_go_duration_errors(text, message):
    with pytest.raises(ValueError) as err:
        goduration.parse(text)
    assert str(err.value) == message


def test_the_timeout_a_request_gets():
    assert REQUEST_TIMEOUT == 60.0
    assert request_timeout("") == 60.0
    assert request_timeout("5s") == 5.0
    assert request_timeout("1500ms") == 1.5
    for default in ("0", "0s", "-1s", "60s", "2m"):      # none, negative, or not below the maximum
        assert request_timeout(default) == 60.0


def test_a_malformed_timeout_is_a_bad_request_and_a_watch_is_not_checked(tmp_path):
    with in_process_api(tmp_path / "objects.db") as api:
        c = admin_client(api)
        code, body = c.request("GET", "/api/v1/namespaces/ns/configmaps", {"timeout": "5"})
        assert (code, body["reason"], body["message"]) == (
            400, "BadRequest", 'invalid timeout specified in the request URL - time: missing unit in duration "5"')
        code, _ = c.request("GET", "/api/v1/namespaces/ns/configmaps", {"timeout": "5s"})
        assert code == 200
        # a watch is long-running: WithRequestDeadline passes it on untouched
        code, _ = c.request("GET", "/api/v1/namespaces/ns/configmaps",
                            {"watch": "true", "timeout": "5", "timeoutSeconds": "0"})
        assert code == 200


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_raw_request_with_a_malformed_timeout(tmp_path):
    with embedded_server(tmp_path / "state", tmp_path / "home", controllers=[]) as server:
        r = support.kubectl(server, "get", "--raw", "/api/v1/namespaces?timeout=soon")
        assert r.returncode == 1
        assert r.stderr.strip() == ('Error from server (BadRequest): invalid timeout specified in the request URL - '
                                    'time: invalid duration "soon"')
        assert support.kubectl(server, "get", "namespaces", "--request-timeout=5s").returncode == 0


def test_a_handler_past_its_deadline_is_answered_504_and_finishes_on_its_own(tmp_path):
    """WithTimeoutForNonLongRunningRequests (server/filters/timeout.go): the client gets
    NewTimeoutError's Status as json.Encoder writes it (no apiVersion or kind; Go sniffs its
    Content-Type as text/plain) once `?timeout=` has passed; the handler goes on, and what it
    stores stays stored."""
    import threading

    from labkit.apiserver.filters.chain import build_handler_chain
    from labkit.apiserver.request import Request

    with in_process_api(tmp_path / "objects.db") as api:
        release, entered = threading.Event(), threading.Event()
        serve = api.serve

        def held(request):
            entered.set()
            release.wait()           # still working when the deadline passes
            return serve(request)
        api.serve = held
        api._chain = build_handler_chain(api)
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}
        request = Request("POST", "/api/v1/namespaces/ns/configmaps", {"timeout": "50ms"}, obj=cm,
                          user=admin_client(api).user)
        guard = threading.Timer(30, release.set)     # without the filter the handler answers, late
        guard.start()
        response = api.handle(request)
        guard.cancel()
        assert entered.is_set()
        assert response.code == 504
        assert response.content_type == "text/plain; charset=utf-8"
        assert response.body == (b'{"metadata":{},"status":"Failure","message":"Timeout: request did not complete '
                                 b'within the allotted timeout","reason":"Timeout","details":{},"code":504}\n')
        release.set()
        api.serve = serve
        api._chain = build_handler_chain(api)
        assert support.wait_until(lambda: admin_client(api).get_or_none("v1", "configmaps", "late", "ns") is not None)
        # a request within its time is answered by its handler
        code, _ = admin_client(api).request("GET", "/api/v1/namespaces/ns/configmaps", {"timeout": "5s"})
        assert code == 200


def test_handlers_run_on_reused_threads_and_a_held_one_blocks_no_other(tmp_path, monkeypatch):
    """The filter's handlers run on reused threads (filters/timeout.py Workers): requests one after
    another start no thread each, and a handler held past its deadline keeps its thread while the
    next requests are answered on another."""
    import threading

    from labkit.apiserver.filters.chain import build_handler_chain
    from labkit.apiserver.request import Request

    from labkit.apiserver.filters import timeout

    # threads of the test's own (the pool is the process's: other servers of this process use it too)
    monkeypatch.setattr(timeout, "WORKERS", timeout.Workers())
    started = []
    start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda thread: started.append(thread.name) or start(thread))

    with in_process_api(tmp_path / "objects.db") as api:
        client = admin_client(api)
        client.create("v1", "configmaps", {"metadata": {"name": "first"}}, namespace="ns")
        started.clear()
        for _ in range(50):
            client.get("v1", "configmaps", "first", namespace="ns")
        assert started.count("apiserver-request") <= 1

        release, entered = threading.Event(), threading.Event()
        serve = api.serve

        def held(request):
            if request.path.endswith("/held"):
                entered.set()
                release.wait(30)
            return serve(request)
        api.serve = held
        api._chain = build_handler_chain(api)
        try:
            response = api.handle(Request("GET", "/api/v1/namespaces/ns/configmaps/held", {"timeout": "50ms"},
                                          user=client.user))
            assert entered.is_set() and response.code == 504
            # its thread is still held: the next requests are answered all the same, on another
            started.clear()
            for _ in range(5):
                assert client.get("v1", "configmaps", "first", namespace="ns")["metadata"]["name"] == "first"
            assert started.count("apiserver-request") == 1
        finally:
            release.set()
            api.serve = serve
            api._chain = build_handler_chain(api)
