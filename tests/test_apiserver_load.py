"""The API server under load and faults, and its security basics.

Writers increment a shared counter by read-modify-write with resourceVersion (optimistic
concurrency): conflicts must be answered 409, and no acknowledged increment may be lost — also
across a kill -9 of the server in the middle of the writes and a restart. Also: the server
listens on loopback only, answers 401 to a wrong token and 403 to anonymous requests, and keeps
its files private.
"""

from __future__ import annotations

import os
import signal
import stat
import threading
import time
from pathlib import Path

from labkit.apiserver.client import ApiError, HttpClient
from test_apiserver_fuzz import start_server

WRITERS = 6
INCREMENTS = 15   # per writer and phase


def _writer(client: HttpClient, counts: dict, lock: threading.Lock, stop: threading.Event, limit: int) -> None:
    mine = HttpClient(f"https://{client.host}:{client.port}", client.token, client.ssl_context)
    done = 0
    while done < limit and not stop.is_set():
        try:
            cm = mine.get("v1", "configmaps", "counter", "default")
            with lock:
                counts["requests"] += 1
            cm["data"]["n"] = str(int(cm["data"]["n"]) + 1)
            code, _ = mine.request("PUT", "/api/v1/namespaces/default/configmaps/counter", body=cm)
        except (OSError, ApiError):
            with lock:
                counts["errors"] += 1   # the server is gone (killed): this write was not acknowledged
            time.sleep(0.02)
            continue
        with lock:
            counts["requests"] += 1
            if code == 200:
                counts["acknowledged"] += 1
                done += 1
            elif code == 409:
                counts["conflicts"] += 1
            else:
                counts["other"] += 1


def _run_writers(client, counts, kill_after: float | None = None, proc=None):
    lock, stop = threading.Lock(), threading.Event()
    limit = INCREMENTS if kill_after is None else 10**9   # with a kill: write until the server is gone
    threads = [threading.Thread(target=_writer, args=(client, counts, lock, stop, limit)) for _ in range(WRITERS)]
    for t in threads:
        t.start()
    if kill_after is not None:
        time.sleep(kill_after)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        stop.set()
    for t in threads:
        t.join(timeout=120)


def test_conflicting_writers_lose_no_acknowledged_write_even_across_kill_9(tmp_path, capsys):
    state = tmp_path / "apiserver"
    state.mkdir(mode=0o700)
    proc, client = start_server(state)
    counts = {"requests": 0, "acknowledged": 0, "conflicts": 0, "errors": 0, "other": 0}
    recoveries = 0
    try:
        client.create("v1", "configmaps", {"metadata": {"name": "counter"}, "data": {"n": "0"}}, "default")
        _run_writers(client, counts)
        assert counts["conflicts"] > 0, "the writers never conflicted: the test did not exercise concurrency"
        assert int(client.get("v1", "configmaps", "counter", "default")["data"]["n"]) == counts["acknowledged"]

        # kill -9 while the writers are busy, restart, go on: acknowledged increments all survive
        _run_writers(client, counts, kill_after=0.3, proc=proc)
        acknowledged_at_kill = counts["acknowledged"]
        assert counts["errors"] > 0, "no write was in flight at the kill"
        proc, client = start_server(state)
        recoveries += 1
        n = int(client.get("v1", "configmaps", "counter", "default")["data"]["n"])
        # an increment may be stored without its acknowledgement reaching the writer (killed
        # between the commit and the reply), never the other way round
        assert n >= acknowledged_at_kill, f"lost acknowledged writes: counter {n} < {acknowledged_at_kill} acknowledged"
        assert n <= acknowledged_at_kill + WRITERS
        base = n - acknowledged_at_kill
        _run_writers(client, counts)
        assert int(client.get("v1", "configmaps", "counter", "default")["data"]["n"]) == counts["acknowledged"] + base
        assert counts["other"] == 0, counts
    finally:
        proc.kill()
        proc.wait()
    with capsys.disabled():
        print(f"\napiserver under load: {counts['requests']} requests, {counts['acknowledged']} acknowledged writes, "
              f"{counts['conflicts']} conflicts (409), {counts['errors']} failed at the kill, {recoveries} recovery")


def _listening_addresses(port: int) -> set[str]:
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            address, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:
                found.add(address)
    return found


def test_loopback_only_token_required_files_private(tmp_path):
    state = tmp_path / "apiserver"
    state.mkdir(mode=0o700)
    proc, client = start_server(state)
    try:
        # listens on 127.0.0.1 only (0100007F in /proc/net/tcp), not on 0.0.0.0 or ::
        assert _listening_addresses(client.port) == {"0100007F"}
        # without credentials a request is system:anonymous: it may read /version, nothing else
        anonymous = HttpClient(f"https://{client.host}:{client.port}", None, client.ssl_context)
        for path in ("/api/v1/namespaces/default/configmaps", "/api", "/apis"):
            code, body = anonymous.request("GET", path)
            assert code == 403 and 'User "system:anonymous"' in body["message"], (path, code, body)
        assert anonymous.request("GET", "/version")[0] == 200
        wrong = HttpClient(f"https://{client.host}:{client.port}", "not-the-token", client.ssl_context)
        assert wrong.request("GET", "/api/v1/namespaces/default/configmaps")[0] == 401
        assert client.request("GET", "/api/v1/namespaces/default/configmaps")[0] == 200
        for path in (p for p in state.rglob("*") if p.is_file()):
            mode = path.stat().st_mode
            assert not mode & (stat.S_IROTH | stat.S_IWOTH), f"{path} is world-accessible ({oct(mode)})"
        assert (state / "kubeconfig").exists()
    finally:
        proc.kill()
        proc.wait()
