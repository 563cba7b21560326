"""GC lab figures: the embedded API server's request rate through the `kubernetes` client (server
on one core, client on the other) against a no-op handler on the same HTTP stack that answers with
the same object, kubectl get latency, and how long the garbage collector takes to remove 1,000
Deployments with their ReplicaSets and Pods after one background deletecollection of the
Deployments (pods unscheduled, so deleted without grace period), with the server's memory.

Run as `scripts/bench gc`. (`python gc.py noop-server DIR` is the no-op server it starts.)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from figures import Figure  # noqa: E402

DEPLOYMENTS, PODS_PER_RS = 1000, 5
POLL = 0.05         # how often the benchmark looks whether anything is left
REQUESTS = 1500


def _pin(cpu: int):
    return lambda: os.sched_setaffinity(0, {cpu % os.cpu_count()})


def _start(argv: list[str], state: Path, cpu: int | None = None) -> subprocess.Popen:
    from labkit.apiserver.process import read_server_info
    (state / "server.json").unlink(missing_ok=True)
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=_pin(cpu) if cpu is not None else None)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = read_server_info(state)
        if info is not None and info.pid == proc.pid:
            return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{argv} did not start")


def _rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _kubernetes_client(kubeconfig: Path):
    from kubernetes import client, config
    configuration = client.Configuration()
    config.load_kube_config(str(kubeconfig), client_configuration=configuration)
    return client, client.CoreV1Api(client.ApiClient(configuration))


def _rates(kubeconfig: Path, prefix: str) -> tuple[float, float]:
    client, v1 = _kubernetes_client(kubeconfig)
    names = [f"{prefix}-{i}" for i in range(REQUESTS)]
    v1.read_namespace("default")          # connect
    start = time.perf_counter()
    for name in names:
        v1.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name),
                                                                      data={"k": "v"}))
    create = REQUESTS / (time.perf_counter() - start)
    start = time.perf_counter()
    for name in names:
        v1.read_namespaced_config_map(name, "default")
    get = REQUESTS / (time.perf_counter() - start)
    return create, get


def api_rates(tmp: Path) -> list[Figure]:
    os.sched_setaffinity(0, {1 % os.cpu_count()})           # the client on the other core
    state = tmp / "rate"
    server = _start([sys.executable, "-m", "labkit.apiserver", "--state", str(state), "--controllers", "none"],
                    state, cpu=0)
    try:
        create, get = _rates(state / "kubeconfig", "cm")
    finally:
        server.kill()
        server.wait()
    noop_state = tmp / "noop"
    noop = _start([sys.executable, str(Path(__file__)), "noop-server", str(noop_state)], noop_state, cpu=0)
    try:
        noop_create, noop_get = _rates(noop_state / "kubeconfig", "cm")
    finally:
        noop.kill()
        noop.wait()
    os.sched_setaffinity(0, set(range(os.cpu_count())))
    note = "kubernetes client, server pinned to one core"
    return [
        Figure("gc", "API server create (configmaps)", round(create), "req/s", note=note),
        Figure("gc", "API server get (configmaps)", round(get), "req/s", note=note),
        Figure("gc", "no-op handler, same HTTP stack: create", round(noop_create), "req/s"),
        Figure("gc", "no-op handler, same HTTP stack: get", round(noop_get), "req/s"),
        Figure("gc", "create rate / no-op rate", round(create / noop_create, 2), "x"),
        Figure("gc", "get rate / no-op rate", round(get / noop_get, 2), "x"),
    ]


def kubectl_latency(tmp: Path) -> list[Figure]:
    import shutil
    if shutil.which("kubectl") is None:
        return [Figure("gc", "kubectl get latency", 0, "ms", note="kubectl not installed")]
    from labkit.apiserver.client import HttpClient
    state = tmp / "kubectl"
    server = _start([sys.executable, "-m", "labkit.apiserver", "--state", str(state)], state)
    try:
        c = HttpClient.from_kubeconfig(state / "kubeconfig")
        for i in range(100):
            c.create("v1", "configmaps", {"metadata": {"name": f"cm-{i}"}}, "default")
        env = {**os.environ, "KUBECONFIG": str(state / "kubeconfig"), "HOME": str(tmp / "home")}
        figures = []
        for what, argv in (("kubectl get configmap (one object)", ["get", "configmap", "cm-1"]),
                           ("kubectl get configmaps (100 objects, Table)", ["get", "configmaps"])):
            subprocess.run(["kubectl", *argv], env=env, capture_output=True, check=True)   # discovery cache
            times = []
            for _ in range(10):
                start = time.perf_counter()
                subprocess.run(["kubectl", *argv], env=env, capture_output=True, check=True)
                times.append(time.perf_counter() - start)
            figures.append(Figure("gc", what, round(statistics.median(times) * 1000, 1), "ms",
                                  note="median of 10, process start included"))
        return figures
    finally:
        server.kill()
        server.wait()


def _create_chains(client, count: int) -> None:
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    errors = []

    def work(indices):
        try:
            for i in indices:
                labels = {"app": f"d{i}"}
                d = client.create("apps/v1", "deployments", {"metadata": {"name": f"d{i}"}, "spec": {
                    "replicas": PODS_PER_RS, "selector": {"matchLabels": labels},
                    "template": dict(template, metadata={"labels": labels})}}, "bench")
                rs = client.create("apps/v1", "replicasets", {"metadata": {"name": f"d{i}-rs", "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"d{i}", "uid": d["metadata"]["uid"],
                     "controller": True, "blockOwnerDeletion": True}]}, "spec": {
                    "replicas": PODS_PER_RS, "selector": {"matchLabels": labels},
                    "template": dict(template, metadata={"labels": labels})}}, "bench")
                for p in range(PODS_PER_RS):
                    client.create("v1", "pods", {"metadata": {"name": f"d{i}-rs-{p}", "labels": labels,
                                                              "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"d{i}-rs",
                         "uid": rs["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
                        "spec": template["spec"]}, "bench")
        except Exception as exc:       # reported after the threads end
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(range(t, count, 4),)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def background_delete(tmp: Path) -> list[Figure]:
    from labkit.apiserver.client import HttpClient
    state = tmp / "gc"
    server = _start([sys.executable, "-m", "labkit.apiserver", "--state", str(state),
                     "--controllers", "garbagecollector"], state)
    try:
        c = HttpClient.from_kubeconfig(state / "kubeconfig", timeout=600)
        c.create("v1", "namespaces", {"metadata": {"name": "bench"}})
        _create_chains(c, DEPLOYMENTS)
        total = DEPLOYMENTS * (2 + PODS_PER_RS)
        deadline = time.monotonic() + 120
        while not c.check(*c.request("GET", "/labkit/v1/idle"))["idle"] and time.monotonic() < deadline:
            time.sleep(0.2)
        loaded_rss = _rss_mib(server.pid)
        resources = (("apps/v1", "deployments"), ("apps/v1", "replicasets"), ("v1", "pods"))
        counted = sum(len(c.list(v, r, "bench")[0]) for v, r in resources)
        assert counted == total, counted

        def anything_left() -> bool:        # one item per resource: limit=1
            for api_version, resource in resources:
                _, body = c.request("GET", c.path(api_version, resource, "bench"), {"limit": "1"})
                if body.get("items"):
                    return True
            return False

        start = time.perf_counter()
        c.request("DELETE", "/apis/apps/v1/namespaces/bench/deployments", body={"propagationPolicy": "Background"})
        deadline = time.monotonic() + 120
        done = False
        while time.monotonic() < deadline:
            if not anything_left():
                done = True
                break
            time.sleep(POLL)
        last = [time.perf_counter()]
        remaining = {r: len(c.list(v, r, "bench")[0]) for v, r in resources}
        elapsed = last[0] - start
        peak = _rss_mib(server.pid, "VmHWM")
        return [
            Figure("gc", f"background delete of {DEPLOYMENTS} Deployments ({total} objects) until the last is gone",
                   round(elapsed, 2), "s", target="< 10 s", met=done and elapsed < 10,
                   note="" if done else f"not finished: {remaining}"),
            Figure("gc", "API server + GC memory with the 7,000 objects loaded", round(loaded_rss, 1), "MiB"),
            Figure("gc", "API server + GC peak memory", round(peak, 1), "MiB"),
        ]
    finally:
        server.kill()
        server.wait()


def run() -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="labkit-gc-bench-") as tmp:
        tmp = Path(tmp)
        return api_rates(tmp) + kubectl_latency(tmp) + background_delete(tmp)


def noop_server(state: Path) -> None:
    """The same TLS/HTTP/authentication stack as the API server, answering every request with {}."""
    import signal
    from labkit.apiserver import certs
    from labkit.apiserver.response import Response
    from labkit.apiserver.http import HttpFrontend
    from labkit.apiserver.server import ADMIN_USER, _write_private, kubeconfig_text, load_tokens
    from labkit.apiserver.server import EmbeddedServer

    # reuse the real server's files (tokens, certificates, kubeconfig format), then serve no-ops
    EmbeddedServer(state, controllers=[]).stop()
    tokens = load_tokens(state / "tokens.csv")
    token = next(t for t, u in tokens.items() if u.name == ADMIN_USER)

    # the answer a create or get of a configmap gets from the real server, so that the client does
    # the same decoding work against both
    canned = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
        "name": "cm-0", "namespace": "default", "uid": "7c1b5bfe-5d4b-4c8f-9a1e-0c5d6f3b2a10",
        "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z"}, "data": {"k": "v"}}

    class NoopApi:
        server_address = ""

        def handle(self, request):
            return Response(201 if request.method == "POST" else 200, canned)

    http = HttpFrontend(NoopApi(), tokens, 0, ssl_context=certs.server_context(state / "pki"))
    http.start()
    _write_private(state / "kubeconfig", kubeconfig_text(http.url, token, (state / "pki" / certs.CA_CERT).read_bytes()))
    _write_private(state / "server.json", json.dumps({"url": http.url, "port": http.port, "pid": os.getpid(),
                                                      "kubeconfig": str(state / "kubeconfig")}))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "noop-server":
        noop_server(Path(sys.argv[2]))
    else:
        for figure in run():
            print(f"{figure.name}: {figure.shown()}")
