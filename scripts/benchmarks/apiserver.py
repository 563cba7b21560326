"""API server figures: what decoding and defaulting every write costs.

- Deployments created and read through the `kubernetes` client (server on one core, client on
  the other), against the embedded server and against a no-op handler on the same HTTP stack that
  answers with the same defaulted Deployment (so the client does the same work for both);
- in-process, the share of a Deployment create's server time spent in the typed decoding and the
  defaulting of its body and of the stored object (target: under 10 %), and the time recording
  managedFields takes.

Run as `scripts/bench apiserver`. (`python apiserver.py noop-server DIR` is the no-op server.)
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from figures import Figure  # noqa: E402

REQUESTS = 600
MANIFEST = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                         {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                          "env": [{"name": "MODE", "value": "bench"}],
                          "readinessProbe": {"httpGet": {"port": 80}},
                          "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}


def _gc_bench():
    """The gc benchmark's helpers (process start, pinning), loaded from its file."""
    spec = importlib.util.spec_from_file_location("labkit_benchmark_gc_helpers", HERE / "gc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rates(kubeconfig: Path) -> tuple[float, float]:
    from kubernetes import client, config
    configuration = client.Configuration()
    config.load_kube_config(str(kubeconfig), client_configuration=configuration)
    apps = client.AppsV1Api(client.ApiClient(configuration))
    names = [f"d{i}" for i in range(REQUESTS)]
    apps.list_namespaced_deployment("default", limit=1)      # connect
    start = time.perf_counter()
    for name in names:
        body = dict(MANIFEST, metadata={"name": name})
        apps.create_namespaced_deployment("default", body)
    create = REQUESTS / (time.perf_counter() - start)
    start = time.perf_counter()
    for name in names:
        apps.read_namespaced_deployment(name, "default")
    get = REQUESTS / (time.perf_counter() - start)
    return create, get


def client_rates(tmp: Path) -> list[Figure]:
    gc = _gc_bench()
    os.sched_setaffinity(0, {1 % os.cpu_count()})           # the client on the other core
    try:
        state = tmp / "rate"
        server = gc._start([sys.executable, "-m", "labkit.apiserver", "--state", str(state), "--controllers",
                            "none"], state, cpu=0)
        try:
            create, get = _rates(state / "kubeconfig")
        finally:
            server.kill()
            server.wait()
        noop_state = tmp / "noop"
        noop = gc._start([sys.executable, str(Path(__file__)), "noop-server", str(noop_state)], noop_state, cpu=0)
        try:
            noop_create, noop_get = _rates(noop_state / "kubeconfig")
        finally:
            noop.kill()
            noop.wait()
    finally:
        os.sched_setaffinity(0, set(range(os.cpu_count())))
    note = "kubernetes client, server pinned to one core"
    return [
        Figure("apiserver", "Deployment create", round(create), "req/s", note=note),
        Figure("apiserver", "Deployment get", round(get), "req/s", note=note),
        Figure("apiserver", "no-op handler, same HTTP stack: create", round(noop_create), "req/s"),
        Figure("apiserver", "no-op handler, same HTTP stack: get", round(noop_get), "req/s"),
        Figure("apiserver", "create rate / no-op rate", round(create / noop_create, 2), "x"),
        Figure("apiserver", "get rate / no-op rate", round(get / noop_get, 2), "x"),
    ]


def decode_share(tmp: Path) -> list[Figure]:
    """In-process: the time Deployment creates spend inside `Api.handle` in the typed decoding and
    defaulting of the body (`Registry.decode`), in the defaults applied again to what is stored
    (`Registry._default_stored`), and in recording managedFields (`Registry._track`)."""
    from labkit.apiserver.registry.store import Registry
    from labkit.apiserver.server import EmbeddedServer

    spent = {"decode": 0.0, "_default_stored": 0.0, "_track": 0.0}
    originals = {name: Registry.__dict__[name] for name in spent}

    def timed(name):
        original = originals[name]
        function = original.__func__ if isinstance(original, staticmethod) else original

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - start
        return staticmethod(wrapper) if isinstance(original, staticmethod) else wrapper

    server = EmbeddedServer(tmp / "inprocess", controllers=[]).start()
    try:
        c = server.client()
        for i in range(50):      # warm up: models read, caches filled
            c.create("apps/v1", "deployments", dict(MANIFEST, metadata={"name": f"warm{i}"}), "default")
        for name in spent:
            setattr(Registry, name, timed(name))
        start = time.perf_counter()
        for i in range(REQUESTS):
            c.create("apps/v1", "deployments", dict(MANIFEST, metadata={"name": f"d{i}"}), "default")
        total = time.perf_counter() - start
    finally:
        for name, original in originals.items():
            setattr(Registry, name, original)
        server.stop()
    defaulting = spent["decode"] + spent["_default_stored"]
    share = defaulting / total * 100
    return [
        Figure("apiserver", "Deployment create, in-process", round(total / REQUESTS * 1e6), "µs"),
        Figure("apiserver", "decoding + defaulting per Deployment create", round(defaulting / REQUESTS * 1e6), "µs",
               note="body decoded and defaulted, stored object defaulted again"),
        Figure("apiserver", "share of a Deployment create's server time", round(share, 1), "%", target="< 10 %",
               met=share < 10, note="in-process, durable storage as served"),
        Figure("apiserver", "managedFields per Deployment create", round(spent["_track"] / REQUESTS * 1e6),
               "µs"),
    ]


def run() -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="labkit-apiserver-bench-") as tmp:
        tmp = Path(tmp)
        return client_rates(tmp) + decode_share(tmp)


def noop_server(state: Path) -> None:
    """The same TLS/HTTP/authentication stack as the API server, answering every request with the
    Deployment the real server would return."""
    import signal
    from cryptography import x509

    from labkit.apiserver import authn, certs, defaults, models
    from labkit.apiserver.response import Response
    from labkit.apiserver.http import HttpFrontend
    from labkit.apiserver.server import ADMIN_USER, EmbeddedServer, kubeconfig_text

    EmbeddedServer(state, controllers=[]).stop()     # the real server's files: tokens, certificates
    tokens = authn.load_token_file(state / "tokens.csv")
    token = next(t for t, u in tokens.items() if u.name == ADMIN_USER)
    authenticator = authn.Authenticator(
        authn.X509Authenticator(x509.load_pem_x509_certificate((state / "pki" / certs.CA_CERT).read_bytes())),
        authn.TokenFileAuthenticator(tokens), None)
    canned = defaults.apply("V1Deployment", models.Decoder().object("V1Deployment", MANIFEST))
    canned["metadata"].update({"uid": "7c1b5bfe-5d4b-4c8f-9a1e-0c5d6f3b2a10", "resourceVersion": "42",
                               "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"})
    canned["status"] = {}

    class NoopApi:
        server_address = ""
        authorizer = traces = None          # the chain is built, then replaced below

        def serve(self, request):
            return self.handle(request)

        def handle(self, request):
            if request.path.endswith("/deployments") and request.method == "GET":
                return Response(200, {"kind": "DeploymentList", "apiVersion": "apps/v1", "metadata": {},
                                      "items": []})
            return Response(201 if request.method == "POST" else 200, canned)

    http = HttpFrontend(NoopApi(), authenticator, 0, ssl_context=certs.apiserver_context(state / "pki"))
    # the same front end with authentication, then the canned answer instead of the handler chain's
    # audit, impersonation, authorization and director
    from labkit.apiserver.filters.authentication import unauthorized, with_authentication
    http.httpd.handler = with_authentication(NoopApi().handle, authenticator, unauthorized)
    http.start()
    certs.write_private(state / "kubeconfig", kubeconfig_text(http.url, token, (state / "pki" / certs.CA_CERT).read_bytes()))
    certs.write_private(state / "server.json", json.dumps({"url": http.url, "port": http.port, "pid": os.getpid(),
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
