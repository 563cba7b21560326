"""The embedded API server as a whole: storage, registry, HTTP front end, the API server's own
internal controllers and the controller manager, with its files in one state directory:

  objects.db     SQLite storage of all objects (restart loses nothing)
  audit.log      the audit log, JSON lines
  decisions.log  the controllers' decision log, JSON lines (`labkit gc log`)
  tokens.csv     bearer tokens, kube-apiserver's --token-auth-file format (mode 0600)
  sa.key         the ServiceAccount token signing key (mode 0600)
  audit-policy.yaml  the audit policy (audit.k8s.io/v1 Policy), written with the default if absent
  pki/           the server's CA (also the client CA and the CSR signer) and serving
                 certificate (keys mode 0600)
  kubeconfig     for kubectl and clients (mode 0600)
  server.json    {url, port, pid, kubeconfig} once the server listens (process.py reads it)

`EmbeddedServer` runs it in this process (scenarios, tests); `process.spawn(env)` starts it as a
tracked lab process and waits until it answers; `python -m labkit.apiserver` / `labkit apiserver` run it
in the foreground.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import traceback
from pathlib import Path

from cryptography import x509

from labkit.apiserver import auditpolicy, authn, bootstrappolicy, certs, policykinds, process, users
from labkit.apiserver.audit import AuditLog
from labkit.apiserver.client import HttpClient, LocalClient
from labkit.apiserver.errors import ApiError, bad_request, not_found_path
from labkit.apiserver.handler import Api
from labkit.apiserver.response import Response
from labkit.apiserver.request import Request
from labkit.apiserver.http import HttpFrontend
from labkit.apiserver.internal import ApiServerInternals
# the server as a lab process (server.json, spawn, liveness) is process.py, which checks and tools
# import without this module; `spawn` stays importable from here for labs that import it so
from labkit.apiserver.process import ADMIN_GROUP, ADMIN_USER, spawn  # noqa: F401
from labkit.apiserver.registry import podconnect
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store
from labkit.apiserver.trace import TRACES_FILE, Traces
from labkit.apiserver.version import EffectiveVersion
from labkit.controllers.decisions import DecisionLog
from labkit.controllers.manager import DEFAULT_CONTROLLERS, ControllerManager

# what scenarios may `require` of this server (fidelity/gc/README.md): custom resources, their
# cleanup when the CRD goes, pods' graceful deletion (grace from the spec, 0 when unscheduled),
# a log of every request (the audit log), the namespace controller's pods-first deletion, and
# APIServices whose unavailable backend makes their group/version fail discovery
SERVER_FEATURES = {"crd", "crd-instance-cleanup", "pod-graceful-deletion", "request-log",
                   "ordered-namespace-deletion", "apiservice-unavailable"}

ADMIN_GROUPS = [ADMIN_GROUP, "system:authenticated"]
PRIVILEGED_GROUPS = ["system:masters"]
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# seconds a request that starts or stops a controller waits for the initial ones (within the
# request's own timeout, kube-apiserver's --request-timeout default of 60 s)
STARTUP_WAIT = 30.0


def kubeconfig_text(url: str, token: str, ca_pem: bytes, namespace: str = "default") -> str:
    return users.kubeconfig_text(url, ca_pem, ADMIN_USER, token=token, namespace=namespace)


class EmbeddedServer:
    def __init__(self, state_dir: str | os.PathLike, port: int = 0,
                 controllers: tuple[str, ...] | list[str] = DEFAULT_CONTROLLERS, synchronous: str = "FULL",
                 emulated_version: str | None = None, audit_policy: str | os.PathLike | None = None):
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if audit_policy is not None:      # --audit-policy-file: kept in the state directory
            certs.write_private(self.state_dir / auditpolicy.POLICY_FILE, Path(audit_policy).read_text())
        self.store = Store(self.state_dir / "objects.db", synchronous)
        self.registry = Registry(self.store)
        self.audit = AuditLog(self.state_dir / "audit.log")
        self.api = Api(self.registry, self.audit, version=EffectiveVersion.parse(emulated_version),
                       audit_policy=auditpolicy.load(self.state_dir))
        # every request's trace, beside its audit event, for `labkit requests explain AUDIT_ID`
        self.api.traces = Traces(path=self.state_dir / TRACES_FILE)
        self.decisions = DecisionLog(self.state_dir / "decisions.log")
        self.internals = ApiServerInternals(self.api)
        self.initial_controllers = list(controllers)
        tokens_file = self.state_dir / "tokens.csv"
        if not tokens_file.exists():
            certs.write_private(tokens_file, f'{secrets.token_urlsafe(32)},{ADMIN_USER},{ADMIN_USER},"{ADMIN_GROUP}"\n')
        self.token = next(t for t, u in authn.load_token_file(tokens_file).items() if u.name == ADMIN_USER)
        self.pki = certs.ensure_certificates(self.state_dir / "pki")
        self.api.service_account_tokens = authn.ServiceAccountTokens(
            authn.ensure_signing_key(self.state_dir / "sa.key"), self.api.lookup)
        authenticator = authn.Authenticator(
            authn.X509Authenticator(x509.load_pem_x509_certificate((self.pki / certs.CA_CERT).read_bytes())),
            authn.TokenFileAuthenticator(authn.load_token_file(tokens_file)), self.api.service_account_tokens)
        self.api.token_authenticator = authenticator
        self.controllers = ControllerManager(self.api, self.decisions,
                                             {"root_ca": (self.pki / certs.CA_CERT).read_bytes(), "pki": self.pki})
        self.http = HttpFrontend(self.api, authenticator, port, ssl_context=certs.apiserver_context(self.pki))
        self.api.extensions["/labkit/v1"] = self._admin
        self.api.container_logs = podconnect.container_log_finder(self.state_dir)
        self.kubeconfig = self.state_dir / "kubeconfig"
        self._started = False
        self._startup_lock = threading.Lock()
        self._startup_pending: list[str] = []
        self._startup_failed: dict[str, str] = {}
        self._startup_done = threading.Event()
        self._startup_done.set()
        self._startup_stop = threading.Event()
        self._startup_thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.http.url

    @property
    def port(self) -> int:
        return self.http.port

    def client(self, user: str = ADMIN_USER, groups: list[str] | None = None) -> LocalClient:
        return LocalClient(self.api, user, groups or ADMIN_GROUPS)

    def http_client(self) -> HttpClient:
        return HttpClient(self.url, self.token, certs.client_context(self.pki))

    def start(self, controllers: str = "now") -> "EmbeddedServer":
        """Serve, then start the initial controllers: `now` before returning (in-process users),
        `background` in a thread of their own once the server serves (`python -m labkit.apiserver`:
        server.json says where it listens before they start, as kube-apiserver serves before
        kube-controller-manager and kube-scheduler have started; each controller's informers list
        what was made meanwhile), `later` when start_controllers() is called."""
        if controllers not in ("now", "background", "later"):
            raise ValueError(f"controllers: now, background or later, not {controllers!r}")
        with self._startup_lock:            # from here until start_controllers() has started them all
            self._startup_pending = list(self.initial_controllers)
            self._startup_done.clear()
        self._bootstrap()
        self.internals.start()
        self.http.start()
        certs.write_private(self.kubeconfig, kubeconfig_text(self.url, self.token,
                                                         (self.pki / certs.CA_CERT).read_bytes()))
        certs.write_private(self.state_dir / process.SERVER_FILE,
                            process.server_json(self.url, self.port, self.kubeconfig))
        self._started = True
        if controllers != "later":
            self.start_controllers(background=controllers == "background")
        return self

    def start_controllers(self, background: bool = False) -> None:
        """Start the initial controllers (once, after start()), one after the other in their
        order; with `background` in a thread, and return at once. From start() until all have
        started (or failed to: the error goes to stderr and to /labkit/v1/controllers/startup),
        the server is not idle and a request that starts or stops a controller waits for them."""
        if self._startup_done.is_set() or self._startup_thread is not None:
            raise RuntimeError("the initial controllers start once, after start()")
        if not background:
            self._start_initial()
            return
        # not a daemon, as the main thread that started them before: the threads the controllers
        # start inherit that (threading.Thread's default), and stop() joins this one
        self._startup_thread = threading.Thread(target=self._start_initial, daemon=False, name="controllers-startup")
        self._startup_thread.start()

    def _start_initial(self) -> None:
        try:
            while not self._startup_stop.is_set():
                with self._startup_lock:
                    if not self._startup_pending:
                        break
                    name = self._startup_pending[0]
                try:
                    self.controllers.start(name)
                except Exception as exc:
                    if self._startup_thread is None:        # started in the caller's thread: its error
                        raise
                    self._startup_failed[name] = f"{type(exc).__name__}: {exc}"
                    print(f"error: the controller {name} did not start:", file=sys.stderr, flush=True)
                    traceback.print_exc(file=sys.stderr)
                finally:
                    with self._startup_lock:
                        self._startup_pending.pop(0)
        finally:
            with self._startup_lock:
                self._startup_pending = []
            self._startup_done.set()

    def controllers_starting(self) -> bool:
        """Whether initial controllers are still to start."""
        return not self._startup_done.is_set()

    def startup_status(self) -> dict:
        """GET /labkit/v1/controllers/startup: which initial controllers run, which are still to
        start, which failed to (name: error)."""
        with self._startup_lock:
            pending = list(self._startup_pending)
        return {"done": self._startup_done.is_set(), "pending": pending, "failed": dict(self._startup_failed),
                "running": [n for n in self.initial_controllers if self.controllers.running(n)]}

    def _after_startup(self) -> None:
        if not self._startup_done.wait(STARTUP_WAIT):
            raise ApiError(503, "ServiceUnavailable", f"the server's controllers are still starting after "
                                                      f"{STARTUP_WAIT:.0f} s")

    def stop(self) -> None:
        if not self._started:
            self.api.traces.close()
            self.store.close()
            return
        self._started = False
        self._startup_stop.set()
        if self._startup_thread is not None:
            self._startup_thread.join()
        self.controllers.stop_all()
        self.internals.stop()
        self.http.stop()
        self.decisions.close()
        self.audit.close()
        self.api.traces.close()
        self.store.close()
        process.remove_server_info(self.state_dir)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def idle(self) -> bool:
        return not self.controllers_starting() and self.internals.idle() and self.controllers.idle()

    def _bootstrap(self) -> None:
        """What a fresh cluster has: the default RBAC policy, the system priority classes, the
        system namespaces and the `kubernetes` Service."""
        client = self.client("system:apiserver", PRIVILEGED_GROUPS)
        bootstrappolicy.ensure(client)
        policykinds.ensure_system_classes(client)
        for name in SYSTEM_NAMESPACES:
            try:
                client.create("v1", "namespaces", {"metadata": {"name": name}})
            except ApiError as exc:
                if exc.code != 409:
                    raise
        service = {"metadata": {"name": "kubernetes", "namespace": "default",
                                "labels": {"component": "apiserver", "provider": "kubernetes"}},
                   "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                                                 "targetPort": 6443}]}}
        try:
            client.create("v1", "services", service, "default")
        except ApiError as exc:
            if exc.code != 409:
                raise

    # -- /labkit/v1: controllers and the GC graph ------------------------------------------------
    def _admin(self, request: Request, rest: str) -> Response:
        """(Non-resource paths: RBAC lets cluster-admin's `*` here, as any path.)"""
        parts = [p for p in rest.split("/") if p]
        if parts == ["controllers"] and request.method == "GET":
            return Response(200, self.controllers.status())
        if parts == ["controllers", "startup"] and request.method == "GET":
            return Response(200, self.startup_status())
        if len(parts) == 2 and parts[0] == "controllers" and request.method in ("PUT", "POST"):
            name = parts[1]
            self._after_startup()       # not undone by the initial start of the same controller
            if name not in self.controllers.known():
                raise not_found_path()
            try:
                body = json.loads(request.body or b"{}")
            except ValueError:
                raise bad_request("expected {\"running\": true|false} or {\"restart\": true}")
            if not isinstance(body, dict):
                raise bad_request("expected {\"running\": true|false} or {\"restart\": true}")
            if body.get("restart"):
                self.controllers.restart(name)
            elif body.get("running") is True:
                self.controllers.start(name)
            elif body.get("running") is False:
                self.controllers.stop(name)
            return Response(200, self.controllers.status())
        if parts == ["garbagecollector", "graph"] and request.method == "GET":
            gc = self.controllers.get("garbagecollector")
            return Response(200, {"running": bool(gc and gc.running), "nodes": gc.graph() if gc else []})
        if parts == ["traces"] and request.method == "GET":
            limit = request.query.get("limit", "20")
            if not limit.isdigit():
                raise bad_request("limit must be a whole number")
            return Response(200, {"items": self.api.traces.newest(int(limit))})
        if len(parts) == 2 and parts[0] == "traces" and request.method == "GET":
            trace = self.api.traces.get(parts[1])
            if trace is None:
                raise not_found_path()
            return Response(200, trace)
        if parts == ["admission"] and request.method == "GET":
            # the admission plugins in AllOrderedPlugins' order, and what labkit does with each
            return Response(200, {"plugins": self.api.registry.admission.order()})
        if parts == ["idle"] and request.method == "GET":
            return Response(200, {"idle": self.idle()})
        raise not_found_path()
