"""APIService availability as kube-aggregator decides it, and its proxy to the backend.

The remote AvailableConditionController (kube-aggregator pkg/controllers/status/remote/
remote_available_controller.go, sync) writes the condition Available of every APIService with a
backend `spec.service`, checking in this order:

  ServiceNotFound       `service/<name> in "<namespace>" is not present`
  ServicePortError      `service/<name> in "<namespace>" is not listening on port <port>`  (ClusterIP Services)
  EndpointsNotFound     `cannot find endpointslices for service/<name> in "<namespace>"`    (ClusterIP Services)
  MissingEndpoints      `endpointslices for service/<name> in "<namespace>" have no addresses with port name "<port name>"`
  FailedDiscoveryCheck  a GET of /apis/<group>/<version> through the Service did not answer 2xx
                        within 5 s in any of 5 attempts: `failing or missing response from <url>: <error>`
                        or `bad status from <url>: <code>`
  Passed                `all checks passed`

It looks again when the APIService, its Service or the Service's EndpointSlices change, 30 s after
each check (the informer's resync: a backend can die without any API change), and after a failed
discovery check with backoff (5 ms doubling up to 30 s). The condition is written only when it
changed; its lastTransitionTime only moves when its status flips (SetAPIServiceCondition).

How the backend is reached: kube-apiserver resolves a Service either to its cluster IP (the
default; kube-proxy on the control-plane node routes it) or, with --enable-aggregator-routing, to
one ready endpoint of its EndpointSlices (proxy.ResolveEndpoint). The embedded server has no
kube-proxy in front of it, so it routes to endpoints, as --enable-aggregator-routing=true does:
https://<a ready endpoint's address>:<its port>. The requests are real HTTPS requests over real
sockets, TLS unverified (the discovery check always skips verification), with the aggregator's
identity headers X-Remote-User: system:kube-aggregator, X-Remote-Group: system:masters on the
discovery check and the requesting user's on proxied requests.

`proxy()` forwards requests under an Available remote group/version to the backend the same way
(an unavailable one answers 503, the proxy handler's "service unavailable").
"""

from __future__ import annotations

import functools
import http.client
import random
import socket
import ssl
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from labkit.apiserver.client import LocalClient
from labkit.apiserver.discovery import user_agent
from labkit.apiserver.errors import ApiError
from labkit.apiserver.timestamps import now_rfc3339
from labkit.apiserver.storage import Event
from labkit.controllers.workqueue import RateLimitingQueue

APISERVICE_KEY = "apiregistration.k8s.io/apiservices"
SERVICE_KEY = "/services"
SLICE_KEY = "discovery.k8s.io/endpointslices"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
RESYNC = 30.0               # AddEventHandlerWithResyncPeriod(..., 30*time.Second)
ATTEMPTS = 5                # discovery requests per check; one success is enough
TIMEOUT = 5.0               # the discovery client's Timeout
AGGREGATOR_IDENTITY = [("X-Remote-User", "system:kube-aggregator"), ("X-Remote-Group", "system:masters")]


class Unresolvable(Exception):
    """proxy.ResolveEndpoint's errors (the Service cannot be turned into an address)."""


def _slices(store, namespace: str, service: str) -> list[dict]:
    return [s for s in store.list(SLICE_KEY, namespace)[0]
            if (s["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == service]


def _ready(endpoint: dict) -> bool:
    return (endpoint.get("conditions") or {}).get("ready") in (None, True)


def has_available_endpoint(port_name: str, slices: list[dict]) -> bool:
    """hasAvailableEndpoint: a slice with a ready endpoint and a port of that name."""
    return any(any(_ready(e) for e in s.get("endpoints") or []) and
               any(p.get("name", "") == port_name and p.get("port") is not None for p in s.get("ports") or [])
               for s in slices)


def resolve_endpoint(store, namespace: str, name: str, port: int) -> str:
    """proxy.ResolveEndpoint (endpoint routing): https://<ready address>:<endpoint port>, one at random."""
    service = store.get(SERVICE_KEY, namespace, name)
    if service is None:
        raise Unresolvable(f'service "{name}" not found')
    spec = service.get("spec") or {}
    if spec.get("type", "ClusterIP") not in ("ClusterIP", "LoadBalancer", "NodePort"):
        raise Unresolvable(f'unsupported service type "{spec.get("type")}"')
    service_port = next((p for p in spec.get("ports") or [] if p.get("port") == port), None)
    if service_port is None:
        raise Unresolvable(f"no service port {port} found for service {name!r}")
    candidates = []
    for s in _slices(store, namespace, name):
        if s.get("addressType") not in ("IPv4", "IPv6"):
            continue
        number = next((p.get("port") for p in s.get("ports") or [] if p.get("name", "") == service_port.get("name", "")
                       and p.get("port") is not None), None)
        if number is None:
            continue
        for endpoint in s.get("endpoints") or []:
            if _ready(endpoint) and endpoint.get("addresses"):
                candidates.append((endpoint["addresses"][0], number))
    if not candidates:
        raise Unresolvable(f'no endpoints available for service "{name}"')
    host, number = random.choice(candidates)
    return f"https://{host}:{number}" if ":" not in host else f"https://[{host}]:{number}"


def _go_error(url: str, host_port: str, exc: BaseException) -> str:
    """What Go's http.Client says for a failed GET, for the failures a backend commonly has."""
    if isinstance(exc, ConnectionRefusedError):
        detail = f"dial tcp {host_port}: connect: connection refused"
    elif isinstance(exc, (socket.timeout, TimeoutError)):
        detail = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    elif isinstance(exc, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(exc):
        detail = "http: server gave HTTP response to HTTPS client"
    elif isinstance(exc, ConnectionResetError):
        detail = f"read tcp {host_port}: read: connection reset by peer"
    else:
        detail = str(exc) or type(exc).__name__
    return f'Get "{url}": {detail}'


@functools.cache
def _unverified() -> ssl.SSLContext:
    """The one TLS client context of these requests (unverified), made once: loading the system's
    roots costs ~20 ms of CPU, which every request paid."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _request(base: str, method: str, path: str, headers: list[tuple[str, str]], body: bytes | None = None,
             timeout: float = TIMEOUT) -> tuple[int, dict, bytes]:
    """One HTTPS request, TLS unverified; `headers` may repeat a name (one X-Remote-Group per group)."""
    host_port = base[len("https://"):]
    host, _, port = host_port.rpartition(":")
    conn = http.client.HTTPSConnection(host.strip("[]"), int(port), timeout=timeout, context=_unverified())
    try:
        conn.putrequest(method, path)
        for name, value in headers + [("Content-Length", str(len(body or b"")))]:
            conn.putheader(name, value)
        conn.endheaders(body or None)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def discovery_check(store, apiservice: dict) -> str | None:
    """The discovery GET through the Service, ATTEMPTS times at once: None when one succeeded,
    otherwise the last error's message."""
    spec = apiservice.get("spec") or {}
    backend = spec.get("service") or {}
    path = f"/api/{spec.get('version')}" if apiservice["metadata"]["name"] == "v1." else \
        f"/apis/{spec.get('group')}/{spec.get('version')}"

    def attempt(_):
        try:
            base = resolve_endpoint(store, backend.get("namespace", ""), backend.get("name", ""),
                                    backend.get("port") or 443)
        except Unresolvable as exc:
            return str(exc)
        url = base + path
        try:
            code, _, _ = _request(base, "GET", path, AGGREGATOR_IDENTITY)
        except (OSError, http.client.HTTPException) as exc:
            return f"failing or missing response from {url}: {_go_error(url, base[len('https://'):], exc)}"
        if code < 200 or code >= 300:       # redirects are not followed: a 3xx fails too
            return f"bad status from {url}: {code}"
        return None

    with ThreadPoolExecutor(max_workers=ATTEMPTS) as pool:
        results = list(pool.map(attempt, range(ATTEMPTS)))
    return None if any(r is None for r in results) else results[-1]


def availability(store, apiservice: dict) -> tuple[str, str, str]:
    """(status, reason, message) of the Available condition, as sync decides it."""
    backend = (apiservice.get("spec") or {}).get("service") or {}
    namespace, name, port = backend.get("namespace", ""), backend.get("name", ""), backend.get("port") or 443
    service = store.get(SERVICE_KEY, namespace, name)
    if service is None:
        return "False", "ServiceNotFound", f'service/{name} in "{namespace}" is not present'
    spec = service.get("spec") or {}
    if spec.get("type", "ClusterIP") == "ClusterIP":
        service_port = next((p for p in spec.get("ports") or [] if p.get("port") == port), None)
        if service_port is None:
            return "False", "ServicePortError", f'service/{name} in "{namespace}" is not listening on port {port}'
        port_name = service_port.get("name", "")
        slices = _slices(store, namespace, name)
        if not slices:
            return "False", "EndpointsNotFound", f'cannot find endpointslices for service/{name} in "{namespace}"'
        if not has_available_endpoint(port_name, slices):
            return ("False", "MissingEndpoints",
                    f'endpointslices for service/{name} in "{namespace}" have no addresses with port name "{port_name}"')
    error = discovery_check(store, apiservice)
    if error is not None:
        return "False", "FailedDiscoveryCheck", error
    return "True", "Passed", "all checks passed"


def proxy(store, group: str, version: str, request) -> "tuple[int, bytes, str] | None":
    """Forward a request under /apis/<group>/<version> to the backend of its Available APIService:
    (code, body, content type); None when no APIService with a backend serves that group/version."""
    for apiservice in store.list(APISERVICE_KEY)[0]:
        spec = apiservice.get("spec") or {}
        if (spec.get("group"), spec.get("version")) != (group, version) or not spec.get("service"):
            continue
        backend = spec["service"]
        try:
            base = resolve_endpoint(store, backend.get("namespace", ""), backend.get("name", ""),
                                    backend.get("port") or 443)
            query = "&".join(f"{k}={v}" for k, v in (request.query or {}).items())
            # the requesting user's identity, as the aggregator's proxy passes it on
            headers = [("X-Remote-User", request.user.name)] + [("X-Remote-Group", g) for g in request.user.groups]
            for name in ("Accept", "Content-Type"):
                if request.headers.get(name.lower()):
                    headers.append((name, request.headers[name.lower()]))
            code, answer_headers, body = _request(base, request.method, request.path + (f"?{query}" if query else ""),
                                                  headers, request.body)
        except (Unresolvable, OSError, http.client.HTTPException):
            return 503, b"service unavailable\n", "text/plain; charset=utf-8"
        content_type = next((v for k, v in answer_headers.items() if k.lower() == "content-type"), "application/json")
        return code, body, content_type
    return None


class AvailableConditionController:
    """The controller's loop, in the API server's process."""

    def __init__(self, api):
        self.store = api.registry.store
        self.client = LocalClient(api, "system:apiserver", ["system:masters"], user_agent=user_agent("kube-apiserver"))
        self.queue = RateLimitingQueue("RemoteAvailabilityController", base_delay=0.005, max_delay=30.0)
        self._thread = threading.Thread(target=self._run, daemon=True, name="apiservice-availability")
        self._stopping = threading.Event()

    def start(self) -> None:
        self.store.add_listener(self._on_event)
        self._thread.start()
        for apiservice in self.store.list(APISERVICE_KEY)[0]:
            self.queue.add(apiservice["metadata"]["name"])

    def stop(self) -> None:
        self._stopping.set()        # a sync cut off by the store closing after this is no error to report
        self.store.remove_listener(self._on_event)
        self.queue.shutdown()

    def idle(self) -> bool:
        return self.queue.idle()

    def _on_event(self, event: Event) -> None:
        if event.key == APISERVICE_KEY:
            self.queue.add(event.name)
            return
        if event.key == SERVICE_KEY:
            namespace, name = event.namespace, event.name
        elif event.key == SLICE_KEY:
            labels = ((event.obj or {}).get("metadata") or {}).get("labels") or {}
            namespace, name = event.namespace, labels.get(SERVICE_NAME_LABEL)
        else:
            return
        for apiservice in self.store.list(APISERVICE_KEY)[0]:
            backend = (apiservice.get("spec") or {}).get("service") or {}
            if (backend.get("namespace"), backend.get("name")) == (namespace, name):
                self.queue.add(apiservice["metadata"]["name"])

    def _run(self) -> None:
        while True:
            name = self.queue.get()
            if name is None:
                return
            try:
                if self.sync(name):
                    self.queue.forget(name)
                else:
                    self.queue.add_rate_limited(name)       # a failed discovery check is retried
                self.queue.add_after(name, RESYNC)
            except ApiError as exc:
                if exc.code != 404 and not self._stopping.is_set():
                    print(f"labkit-apiserver: availability of {name}: {exc.message} (retrying)", file=sys.stderr)
                    self.queue.add_rate_limited(name)
            except Exception as exc:        # keep the loop alive; the resync tries again
                if self._stopping.is_set():
                    continue
                print(f"labkit-apiserver: availability of {name}: {exc!r}", file=sys.stderr)
                self.queue.add_after(name, RESYNC)
            finally:
                self.queue.done(name)

    def sync(self, name: str) -> bool:
        """Write the Available condition of APIService `name`; False when its discovery check failed."""
        apiservice = self.store.get(APISERVICE_KEY, "", name)
        if apiservice is None:
            return True
        if not (apiservice.get("spec") or {}).get("service"):
            # the local AvailableConditionController (kube-aggregator pkg/controllers/status/local/
            # local_available_controller.go, sync): an APIService made local, by an update too
            cond = ("True", "Local", "Local APIServices are always available")
        else:
            cond = availability(self.store, apiservice)
        status = dict(apiservice.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        old = next((c for c in conditions if c.get("type") == "Available"), None)
        if old is None or (old.get("status"), old.get("reason"), old.get("message")) != cond:
            new = {"type": "Available", "status": cond[0], "lastTransitionTime": now_rfc3339(), "reason": cond[1],
                   "message": cond[2]}
            if old is not None and old.get("status") == cond[0] and old.get("lastTransitionTime"):
                new["lastTransitionTime"] = old["lastTransitionTime"]     # SetAPIServiceCondition
            status["conditions"] = [c for c in conditions if c.get("type") != "Available"] + [new]
            self.client.update("apiregistration.k8s.io/v1", "apiservices", dict(apiservice, status=status),
                               subresource="status")
        return cond[1] != "FailedDiscoveryCheck"
