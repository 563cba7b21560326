"""Malformed requests: the server answers each with a 4xx Status, never crashes, and loses no
acknowledged write — checked in SQLite after kill -9 and through the API after a restart."""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from labkit.apiserver import certs
from labkit.apiserver.client import HttpClient
from labkit.apiserver.process import read_server_info
from support import REPO


def start_server(state: Path) -> tuple[subprocess.Popen, HttpClient]:
    (state / "server.json").unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "labkit.apiserver", "--state", str(state), "--controllers", "none"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = read_server_info(state)
        if info is not None and info.pid == proc.pid:
            return proc, HttpClient(info.url, info.token, certs.client_context(state / "pki"))
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    raise AssertionError("the server did not start")


def raw(client: HttpClient, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
        chunked: bool = False):
    conn = http.client.HTTPSConnection(client.host, client.port, context=client.ssl_context, timeout=30)
    all_headers = {"Authorization": f"Bearer {client.token}", **(headers or {})}
    conn.request(method, path, body=body, headers=all_headers, encode_chunked=chunked)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data


def assert_status(code: int, data: bytes, expected: int | tuple[int, ...]):
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert code in expected, f"{code}: {data[:300]!r}"
    body = json.loads(data)
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == code, body
    assert body["message"] and body["reason"], body


MALFORMED = [
    # (method, path, body, content type, expected codes)
    ("POST", "/api/v1/namespaces/default/configmaps", b"{", "application/json", 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b"[]", "application/json", 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b"null", "application/json", 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b"123", "application/json", 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"metadata": "x"}', "application/json", 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"metadata": {"name": 5}}', "application/json", 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"metadata": {"name": "a", "labels": [1]}}', None, 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"metadata": {"name": "a", "labels": {"k": 1}}}', None, 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"metadata": {"name": "a", "finalizers": "f"}}', None, 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"metadata": {"name": "a", "ownerReferences": {}}}', None, 400),
    ("POST", "/api/v1/namespaces/default/configmaps",
     b'{"metadata": {"name": "a", "ownerReferences": [{"uid": 1}]}}', None, 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"metadata": {"name": "a"}, "data": {"k": 1}}', None, 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"kind": "Pod", "metadata": {"name": "a"}}', None, 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"apiVersion": "v2", "metadata": {"name": "a"}}', None, 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"metadata": {"name": "Not_Valid"}}', None, 422),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"metadata": {}}', None, 422),
    ("POST", "/api/v1/namespaces/default/configmaps", b'{"metadata": {"name": "a", "resourceVersion": "5"}}', None, 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b"[" * 100000, "application/json", 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b"\xff\xfe\x00garbage", "application/json", 400),
    ("POST", "/api/v1/namespaces/default/configmaps", b"k8s\x00\x0a\x02\x0a", "application/vnd.kubernetes.protobuf", (400, 415)),
    ("POST", "/api/v1/namespaces/default/configmaps", b"{}", "application/cbor", 415),
    ("POST", "/apis/apps/v1/namespaces/default/deployments", b'{"metadata": {"name": "d"}, "spec": {"replicas": "3"}}', None, 400),
    ("POST", "/apis/apps/v1/namespaces/default/deployments", b'{"metadata": {"name": "d"}, "spec": "x"}', None, 400),
    ("POST", "/apis/apps/v1/namespaces/default/deployments", b'{"metadata": {"name": "d"}, "spec": {}}', None, 422),
    ("POST", "/api/v1/namespaces/default/pods", b'{"metadata": {"name": "p"}, "spec": {"containers": "c"}}', None, 400),
    ("POST", "/api/v1/namespaces/nowhere/configmaps", b'{"metadata": {"name": "a"}}', None, 404),
    ("GET", "/api/v1/nothings", None, None, 404),
    ("GET", "/api/v9/pods", None, None, 404),
    ("GET", "/apis/example.com/v1/widgets", None, None, 404),
    ("GET", "/apis/apps/v1/namespaces/default/pods", None, None, 404),
    ("GET", "/api/v1/namespaces/default/configmaps/a/b/c", None, None, 404),
    ("GET", "/api/v1/namespaces/default/configmaps/%2e%2e", None, None, (400, 404)),
    ("GET", "/api/v1/namespaces/default/pods?labelSelector=a+in+(", None, None, 400),
    ("GET", "/api/v1/namespaces/default/pods?fieldSelector=spec.nope%3D1", None, None, 400),
    ("GET", "/api/v1/namespaces/default/pods?watch=true&resourceVersion=abc", None, None, 400),
    ("GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=x", None, None, 400),
    ("GET", "/api/v1/namespaces/default/pods?watch=true&resourceVersion=1&timeoutSeconds=1", None, None, (200, 410)),
    ("PUT", "/api/v1/namespaces/default/configmaps", b"{}", None, 405),
    ("PUT", "/api/v1/namespaces/default/configmaps/missing", b'{"metadata": {"name": "missing"}}', None, 404),
    ("PUT", "/api/v1/namespaces/default/configmaps/a", b'{"metadata": {"name": "b"}}', None, (400, 404)),
    ("DELETE", "/api/v1/namespaces", None, None, 405),
    ("DELETE", "/api/v1/namespaces/default/configmaps/missing", None, None, 404),
    ("DELETE", "/api/v1/namespaces/default/configmaps/fuzz-target", b'{"gracePeriodSeconds": "x"}', None, 400),
    ("DELETE", "/api/v1/namespaces/default/configmaps/fuzz-target", b'{"preconditions": 5}', None, 400),
    ("DELETE", "/api/v1/namespaces/default/configmaps/fuzz-target", b'{"propagationPolicy": "Sideways"}', None, 422),
    ("DELETE", "/api/v1/namespaces/default/configmaps/fuzz-target?gracePeriodSeconds=abc", None, None, 400),
    ("DELETE", "/api/v1/namespaces/default/configmaps/fuzz-target?orphanDependents=maybe", None, None, 400),
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz-target", b"{", "application/merge-patch+json", 400),
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz-target", b'{"op": "add"}', "application/json-patch+json", 400),
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz-target", b'[{"op": "explode", "path": "/x"}]',
     "application/json-patch+json", 422),
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz-target", b'[{"op": "remove", "path": "/nope"}]',
     "application/json-patch+json", 422),
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz-target", b'[{"op": "add", "path": "/metadata/uid", "value": "x"}]',
     "application/json-patch+json", 422),
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz-target", b'{"metadata": {"$patch": "explode"}}',
     "application/strategic-merge-patch+json", 422),
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz-target", b'{"metadata": {"finalizers": [{"a": 1}]}}',
     "application/strategic-merge-patch+json", 422),
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz-target", b"{}", "text/html", 415),
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz-target", b"{}", "application/apply-patch+yaml", 422),
    # a patched object that does not decode: 422 on the field `patch` (handlers/patch.go)
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz-target", b'{"data": {"k": 5}}',
     "application/merge-patch+json", 422),
    ("POST", "/api/v1/namespaces/default/configmaps/fuzz-target", b"{}", None, 405),
    ("GET", "/api/v1/namespaces/default/configmaps/fuzz-target/status", None, None, 404),
    ("PUT", "/api/v1/namespaces/default/finalize", b"{}", None, 400),
    ("GET", "/api/v1/namespaces/default/finalize", None, None, 405),
]


@pytest.fixture
def running(tmp_path):
    state = tmp_path / "apiserver"
    proc, client = start_server(state)
    yield state, proc, client
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_malformed_requests_get_4xx_statuses_and_no_acknowledged_write_is_lost(running):
    state, proc, client = running
    client.create("v1", "configmaps", {"metadata": {"name": "fuzz-target"}, "data": {"k": "v"}}, "default")
    acknowledged: dict[str, tuple[str, dict]] = {}      # name -> (uid, data)

    def acknowledged_write(i: int):
        name = f"ack-{i}"
        code, body = client.request("POST", "/api/v1/namespaces/default/configmaps",
                                    body={"metadata": {"name": name}, "data": {"n": str(i)}})
        assert code == 201, body
        acknowledged[name] = (body["metadata"]["uid"], body["data"])
        if i % 3 == 0:      # and an acknowledged update of an earlier one
            earlier = sorted(acknowledged)[len(acknowledged) // 2]
            code, body = client.request("PATCH", f"/api/v1/namespaces/default/configmaps/{earlier}",
                                        body={"data": {"n": f"updated-{i}"}},
                                        content_type="application/merge-patch+json")
            assert code == 200, body
            acknowledged[earlier] = (body["metadata"]["uid"], body["data"])

    for i, (method, path, body, content_type, expected) in enumerate(MALFORMED):
        headers = {"Content-Type": content_type} if content_type else {}
        code, data = raw(client, method, path, body, headers)
        if expected == (200, 410) and code == 200:
            continue
        assert_status(code, data, expected)
        acknowledged_write(i)

    # oversized bodies, by length and chunked
    big = b'{"metadata": {"name": "big"}, "data": {"k": "' + b"x" * (4 * 1024 * 1024) + b'"}}'
    assert_status(*raw(client, "POST", "/api/v1/namespaces/default/configmaps", big,
                       {"Content-Type": "application/json"}), 413)
    assert_status(*raw(client, "POST", "/api/v1/namespaces/default/configmaps", iter([big[:1 << 20]] * 4),
                       {"Content-Type": "application/json"}, chunked=True), 413)
    # no or a wrong token
    code, data = raw(client, "GET", "/api/v1/namespaces", headers={"Authorization": "Bearer wrong"})
    assert_status(code, data, 401)

    # random garbage: any answer but a 5xx
    rng = random.Random(4711)
    paths = ["/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/default/pods",
             "/apis/apps/v1/namespaces/default/deployments", "/api/v1/namespaces", "/apis/apps/v1",
             "/api/v1/namespaces/default/configmaps/fuzz-target"]
    alphabet = ['{', '}', '[', ']', '"', ':', ',', 'metadata', 'name', 'spec', 'null', '1', 'true', '-', 'x', ' ']
    for i in range(150):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))).encode()
        method = rng.choice(["POST", "PUT", "PATCH", "DELETE", "GET"])
        content_type = rng.choice(["application/json", "application/merge-patch+json", "application/json-patch+json",
                                   "application/strategic-merge-patch+json", ""])
        code, data = raw(client, method, rng.choice(paths), body or None,
                         {"Content-Type": content_type} if content_type else {})
        assert code < 500, (method, body, code, data[:300])
        if code >= 400:
            assert json.loads(data)["code"] == code
        if i % 10 == 0:
            acknowledged_write(1000 + i)

    assert client.request("GET", "/healthz")[0] == 200 and proc.poll() is None

    # kill -9: every acknowledged write must be in the database, and served after a restart
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    db = sqlite3.connect(f"file:{state / 'objects.db'}?mode=ro", uri=True)
    rows = {name: json.loads(data) for name, data in db.execute(
        "SELECT name, data FROM objects WHERE key = '/configmaps' AND namespace = 'default'")}
    db.close()
    assert len(acknowledged) > 60
    for name, (uid, data) in acknowledged.items():
        assert rows[name]["metadata"]["uid"] == uid and rows[name]["data"] == data, name
    proc2, client2 = start_server(state)
    try:
        items, _ = client2.list("v1", "configmaps", "default")
        served = {i["metadata"]["name"]: (i["metadata"]["uid"], i["data"]) for i in items}
        for name, value in acknowledged.items():
            assert served[name] == value
    finally:
        proc2.kill()
        proc2.wait()


def test_concurrent_conflicting_updates_get_409(running):
    _, _, client = running
    cm = client.create("v1", "configmaps", {"metadata": {"name": "contended"}, "data": {"v": "0"}}, "default")
    results = []

    def update(i):
        mine = HttpClient(f"https://{client.host}:{client.port}", client.token, client.ssl_context)
        results.append(mine.request("PUT", "/api/v1/namespaces/default/configmaps/contended",
                                    body=dict(cm, data={"v": str(i + 1)})))

    threads = [threading.Thread(target=update, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(code for code, _ in results)
    assert codes == [200] + [409] * 7
    conflicts = [body for code, body in results if code == 409]
    assert all(b["reason"] == "Conflict" and b["message"] == (
        'Operation cannot be fulfilled on configmaps "contended": the object has been modified; please apply your '
        'changes to the latest version and try again') for b in conflicts)
