"""Clients of the API: plain Kubernetes REST, so the same code drives the embedded server and a
real cluster.

- `HttpClient` speaks HTTP(S) to any API server described by a kubeconfig (bearer tokens, client
  certificates, exec credential plugins, CA data).
- `LocalClient` calls the embedded server's request handler in-process (same routing, registry
  semantics and audit log as HTTP, without the sockets): the controllers use it.
- `RESTMapper` maps apiVersion/kind to resources from discovery, as client-go's mapper does.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import queue
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import yaml

from labkit.apiserver.errors import ApiError

# what client-go's discovery client accepts: aggregated discovery first, the legacy lists last
AGGREGATED_DISCOVERY_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                               "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
                               "application/json")

PATCH_TYPES = {"json": "application/json-patch+json", "merge": "application/merge-patch+json",
               "strategic": "application/strategic-merge-patch+json", "apply": "application/apply-patch+yaml"}


def split_api_version(api_version: str) -> tuple[str, str]:
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


@dataclass(frozen=True)
class ApiResource:
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class Watch:
    """A running watch: `next(timeout)` returns the next event dict, or None after `timeout`.
    `ended` says whether the server closed it."""

    ended = False

    def next(self, timeout: float) -> dict | None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def changes_offered(self) -> int | None:
        """How many change events (not initial events or bookmarks) the server has queued for
        this watch so far, where the transport can tell (in-process); else None."""
        return None


def read_aggregated_discovery(body: dict, found: list, failed: dict, preferred: dict) -> None:
    """One APIGroupDiscoveryList (apidiscovery.k8s.io v2/v2beta1) into `found` (ApiResources of
    every version), `failed` (Stale group/versions: `stale GroupVersion discovery: <gv>`,
    discovery/aggregated_discovery.go) and `preferred` (group -> its first fresh version: versions
    are listed in preference order)."""
    for item in body.get("items") or []:
        group = (item.get("metadata") or {}).get("name", "")
        for entry in item.get("versions") or []:
            version = entry.get("version", "")
            gv = f"{group}/{version}" if group else version
            if entry.get("freshness") == "Stale":
                failed[gv] = f"stale GroupVersion discovery: {gv}"
                continue
            preferred.setdefault(group, version)
            for r in entry.get("resources") or []:
                kind = (r.get("responseKind") or {}).get("kind", "")
                found.append(ApiResource(group, version, r["resource"], kind, r.get("scope") == "Namespaced",
                                         tuple(r.get("verbs") or ())))


class Client:
    """Typed helpers over `request(method, path, ...)`, shared by both transports."""

    def request(self, method: str, path: str, query: dict | None = None, body: Any = None,
                content_type: str | None = None, accept: str | None = None) -> tuple[int, Any]:
        raise NotImplementedError

    def open_watch(self, path: str, query: dict) -> Watch:
        raise NotImplementedError

    # -- paths ---------------------------------------------------------------------------------
    @staticmethod
    def path(api_version: str, resource: str, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        group, version = split_api_version(api_version)
        parts = ["api", version] if not group else ["apis", group, version]
        if namespace:
            parts += ["namespaces", namespace]
        parts.append(resource)
        if name:
            parts.append(quote(name, safe=":@"))     # RFC 3986 pchar: kept as client-go keeps them
        if subresource:
            parts.append(subresource)
        return "/" + "/".join(parts)

    @staticmethod
    def check(code: int, body) -> Any:
        if code >= 400:
            raise ApiError.from_status(code, body)
        return body

    # -- verbs ---------------------------------------------------------------------------------
    def get(self, api_version: str, resource: str, name: str, namespace: str | None = None,
            subresource: str | None = None) -> dict:
        return self.check(*self.request("GET", self.path(api_version, resource, namespace, name, subresource)))

    def get_or_none(self, api_version: str, resource: str, name: str, namespace: str | None = None) -> dict | None:
        """The object, or None when it does not exist (404); other errors are raised."""
        try:
            return self.get(api_version, resource, name, namespace)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def list(self, api_version: str, resource: str, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[dict], str]:
        query = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v}
        body = self.check(*self.request("GET", self.path(api_version, resource, namespace), query))
        return body.get("items") or [], (body.get("metadata") or {}).get("resourceVersion", "")

    def create(self, api_version: str, resource: str, obj: dict, namespace: str | None = None,
               subresource: str | None = None, name: str | None = None, query: dict | None = None) -> dict:
        path = self.path(api_version, resource, namespace, name, subresource)
        return self.check(*self.request("POST", path, query, body=obj))

    def update(self, api_version: str, resource: str, obj: dict, namespace: str | None = None,
               subresource: str | None = None, query: dict | None = None) -> dict:
        path = self.path(api_version, resource, namespace, obj["metadata"]["name"], subresource)
        return self.check(*self.request("PUT", path, query, body=obj))

    def patch(self, api_version: str, resource: str, name: str, patch, patch_type: str = "merge",
              namespace: str | None = None, subresource: str | None = None, query: dict | None = None) -> dict:
        path = self.path(api_version, resource, namespace, name, subresource)
        return self.check(*self.request("PATCH", path, query, body=patch, content_type=PATCH_TYPES[patch_type]))

    def delete(self, api_version: str, resource: str, name: str, namespace: str | None = None,
               options: dict | None = None, query: dict | None = None) -> tuple[int, Any]:
        """DELETE with DeleteOptions in the body (when given) and/or query parameters.
        Returns (code, body); errors raise ApiError."""
        path = self.path(api_version, resource, namespace, name)
        code, body = self.request("DELETE", path, query, body=options)
        self.check(code, body)
        return code, body

    def watch(self, api_version: str, resource: str, namespace: str | None = None,
              resource_version: str | None = None, label_selector: str | None = None,
              field_selector: str | None = None, timeout_seconds: int | None = None,
              bookmarks: bool = True) -> Watch:
        query = {"watch": "true"}
        if resource_version is not None:
            query["resourceVersion"] = resource_version
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        if timeout_seconds:
            query["timeoutSeconds"] = str(timeout_seconds)
        if bookmarks:
            query["allowWatchBookmarks"] = "true"
        return self.open_watch(self.path(api_version, resource, namespace), query)

    # -- discovery -----------------------------------------------------------------------------
    def discover(self) -> "Discovery":
        """All served resources (all versions), each group's preferred version, and the
        group/versions whose discovery failed: through aggregated discovery, two GETs (/api and
        /apis, apidiscovery.k8s.io v2 or v2beta1, as client-go's discovery client and so the
        controller manager ask for it since v1.30), where a group/version the aggregator could
        not reach is listed Stale (`stale GroupVersion discovery: <gv>`,
        discovery/aggregated_discovery.go); a server that answers with the legacy lists gets the
        legacy walk (one GET per group/version)."""
        found: list[ApiResource] = []
        failed: dict[str, str] = {}
        preferred: dict[str, str] = {"": "v1"}
        legacy: list[tuple[str, dict]] = []
        for path in ("/api", "/apis"):
            code, body = self.request("GET", path, accept=AGGREGATED_DISCOVERY_ACCEPT)
            if code == 200 and isinstance(body, dict) and body.get("kind") == "APIGroupDiscoveryList":
                read_aggregated_discovery(body, found, failed, preferred)
            elif code == 200 and isinstance(body, dict):
                legacy.append((path, body))
        if legacy:
            self._walk_legacy(legacy, found, failed, preferred)
        return Discovery(found, preferred, failed)

    def _walk_legacy(self, lists: list, found: list, failed: dict, preferred: dict) -> None:
        gvs: list[str] = []
        for path, body in lists:
            if path == "/api":
                gvs += [v for v in body.get("versions") or []]
                continue
            for group in body.get("groups") or []:
                preferred[group["name"]] = (group.get("preferredVersion") or {}).get("version", "")
                gvs += [v["groupVersion"] for v in group.get("versions") or []]
        for gv in gvs:
            path = f"/api/{gv}" if "/" not in gv else f"/apis/{gv}"
            code, body = self.request("GET", path)
            if code != 200:
                if isinstance(body, dict) and body.get("message"):
                    failed[gv] = body["message"]
                elif code == 503:       # client-go's text for a 503 without a Status body
                    failed[gv] = "the server is currently unable to handle the request"
                else:
                    failed[gv] = f"HTTP {code}"
                continue
            group, version = split_api_version(gv)
            for r in body.get("resources") or []:
                if "/" in r.get("name", ""):
                    continue
                found.append(ApiResource(group, version, r["name"], r["kind"], bool(r.get("namespaced")),
                                         tuple(r.get("verbs") or ())))


@dataclass
class Discovery:
    resources: list[ApiResource]
    preferred: dict[str, str]       # group -> preferred version
    failed: dict[str, str]          # groupVersion -> error message


class RESTMapper:
    """apiVersion/kind -> resource, from discovery; `reset()` re-reads it."""

    def __init__(self, client: Client):
        self.client = client
        self._by_kind: dict[tuple[str, str], ApiResource] = {}
        self._resources: list[ApiResource] = []
        self._preferred: dict[str, str] = {}
        self.failed: dict[str, str] = {}
        self._lock = threading.Lock()
        self.reset()

    def reset(self, found: "Discovery | None" = None) -> None:
        """Re-read discovery (or take `found`, a discovery just made)."""
        found = found or self.client.discover()
        with self._lock:
            self._resources = found.resources
            self._by_kind = {(r.api_version, r.kind): r for r in found.resources}
            self._preferred = found.preferred
            self.failed = found.failed

    def for_kind(self, api_version: str, kind: str) -> ApiResource | None:
        return self._by_kind.get((api_version, kind))

    def preferred_resources(self) -> list[ApiResource]:
        with self._lock:
            return [r for r in self._resources if self._preferred.get(r.group) == r.version]


# -- HTTP ----------------------------------------------------------------------------------------

# A tokenFile is read again once it is a minute old, ten seconds early (client-go
# transport/token_source.go NewCachedFileTokenSource: period time.Minute, leeway 10 s)
TOKEN_FILE_PERIOD, TOKEN_FILE_LEEWAY = 60.0, 10.0
clock = time.monotonic


def default_kubeconfig() -> str:
    """Where kubectl looks when no --kubeconfig is given (client-go clientcmd/loader.go
    NewDefaultClientConfigLoadingRules): $KUBECONFIG, a list of files separated by ':' and merged,
    else ~/.kube/config."""
    return os.environ.get("KUBECONFIG") or "~/.kube/config"


class KubeConfig:
    """A kubeconfig's server and credentials for one context, loaded by the kubernetes package
    (kubernetes.config.kube_config): files merged in order (`path` may be a ':'-separated list;
    None: `default_kubeconfig()`), token or tokenFile (relative to the file that names it), client
    certificates, exec credential plugins (a token or a client certificate, fetched again when
    the credential expires), auth-provider, basic auth, certificate-authority, tls-server-name and
    insecure-skip-tls-verify. proxy-url is read here (the package does not read it): http:// and
    https:// proxies tunnel with CONNECT, socks5:// ones with a SOCKS5 CONNECT, as Go's
    net/http Transport does for client-go (clientcmd parseProxyURL allows these three).

    The package is imported on first use: its import alone takes most of a second."""

    def __init__(self, path: str | os.PathLike | None = None, context: str | None = None):
        from kubernetes.config.config_exception import ConfigException
        from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

        from labkit.errors import ConfigError
        self.path = str(path) if path is not None else default_kubeconfig()
        try:
            merged = KubeConfigMerger(self.path)
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(self.path, None, f"cannot read kubeconfig: {exc}")
        except (AttributeError, TypeError):          # YAML that is not a mapping (a PEM file, a list)
            raise ConfigError(self.path, None, "not a kubeconfig: its content is not a YAML mapping (apiVersion, "
                                               "clusters, contexts, users)")
        if merged.config is None:
            raise ConfigError(self.path, None, "no kubeconfig file found")
        # client-go tools/clientcmd/loader.go ClientConfigLoadingRules.Load: the first file to set a
        # named cluster, user or context wins (the package merges so too), and so does the first to
        # set current-context (the package takes the last: corrected here)
        firsts = [c.get("current-context") for c in merged.config_files.values() if isinstance(c, dict)]
        current = next((c for c in firsts if c), None)
        if current is not None:
            merged.config.value["current-context"] = current
        data = merged.config.value          # its clusters, contexts and users: ConfigNodes holding their file's path
        self.context_name = context or data.get("current-context")
        contexts = {c.value.get("name"): c.value.get("context") or {} for c in data.get("contexts") or []}
        if self.context_name not in contexts:
            raise ConfigError(self.path, "current-context" if context is None else "contexts",
                              f"context {self.context_name!r} not found")
        ctx = contexts[self.context_name]
        clusters = {c.value.get("name"): c.value.get("cluster") or {} for c in data.get("clusters") or []}
        if ctx.get("cluster") not in clusters:
            raise ConfigError(self.path, "contexts.context.cluster", f"cluster {ctx.get('cluster')!r} not found")
        self.cluster = clusters[ctx["cluster"]]
        user = next((u for u in data.get("users") or [] if u.value.get("name") == ctx.get("user")), None)
        self.user = (user.value.get("user") or {}) if user is not None else {}
        # the file that defines the user: its relative paths (tokenFile, client-certificate) are relative to it
        self.user_dir = Path(user.path).resolve().parent if user is not None and user.path else Path.cwd()
        self.namespace = ctx.get("namespace") or "default"
        self.server = self.cluster.get("server", "")
        if not self.server:
            raise ConfigError(self.path, "clusters.cluster.server", "expected the API server's URL")
        self._errors = (ConfigException,)
        try:
            self._loader = KubeConfigLoader(config_dict=merged.config, active_context=self.context_name,
                                            config_base_path=None)
        except ConfigException as exc:
            raise ConfigError(self.path, None, str(exc))
        self.proxy = self.cluster.get("proxy-url") or None
        if self.proxy and urlsplit(self.proxy).scheme not in ("http", "https", "socks5"):
            # client-go tools/clientcmd validateClusterInfo and parseProxyURL
            raise ConfigError(self.path, "clusters.cluster.proxy-url",
                              f"invalid 'proxy-url' {self.proxy!r} for cluster {ctx['cluster']!r}: unsupported scheme "
                              f"{urlsplit(self.proxy).scheme!r}, must be http, https, or socks5")
        self.generation = 0
        self._lock = threading.Lock()
        self.configuration = None
        self._token_read_at = None        # a tokenFile is read again after TOKEN_FILE_PERIOD
        self._file_token = None

    def load(self) -> "KubeConfig":
        """Resolve the credentials (run the exec plugin, read token and certificate files);
        raises ConfigError where that fails. Done on first use otherwise."""
        with self._lock:
            self._load()
        return self

    def _loaded(self):
        if self.configuration is None:
            self._load()
        return self.configuration

    def _load(self) -> None:
        from kubernetes.client import Configuration

        from labkit.errors import ConfigError
        configuration = Configuration()
        try:
            self._loader.load_and_set(configuration)
        except (*self._errors, OSError) as exc:
            raise ConfigError(self.path, None, str(exc))
        if self.user.get("exec") and not configuration.api_key.get("authorization") and not configuration.cert_file:
            # the package logs the plugin's failure and carries on without a credential
            raise ConfigError(self.path, "users.user.exec",
                              f"the credential plugin {self.user['exec'].get('command')!r} gave no credential")
        self.configuration = configuration
        self._token_read_at = clock()
        self.expiry = getattr(self._loader, "expiry", None)
        self._ssl_context = None
        self.generation += 1

    def _expired(self) -> bool:
        from kubernetes.config.kube_config import EXPIRY_SKEW_PREVENTION_DELAY
        return (self.expiry is not None
                and self.expiry - EXPIRY_SKEW_PREVENTION_DELAY <= datetime.now(timezone.utc))

    def authorization(self) -> str | None:
        """The Authorization header's value, the credential fetched again first when it expired
        (the package's refresh hook for tokens; an expired client certificate from an exec
        plugin is fetched again here, the package keeps it)."""
        with self._lock:
            configuration = self._loaded()
            if configuration.refresh_api_key_hook is not None:
                before = configuration.api_key.get("authorization")
                configuration.refresh_api_key_hook(configuration)
                self.expiry = getattr(self._loader, "expiry", None)
                if configuration.api_key.get("authorization") != before:
                    self.generation += 1
            elif self.user.get("exec") and self._expired():
                self._load()
            if self.user.get("tokenFile") and not self.user.get("token"):
                if self._token_file_stale():
                    self._reread_token_file()
                if self._file_token:          # the package's hook puts back the token it read first
                    configuration.api_key["authorization"] = self._file_token
            value = configuration.api_key.get("authorization")
            # a tokenFile's trailing newline is no part of the token (client-go trims it)
            return value.strip() if value else None

    def _token_file_stale(self) -> bool:
        return self._token_read_at is None or clock() - self._token_read_at >= TOKEN_FILE_PERIOD - TOKEN_FILE_LEEWAY

    def _reread_token_file(self) -> None:
        """The tokenFile read again (a projected ServiceAccount token is rotated in place); a file
        that cannot be read keeps the token read last, as client-go's cachingTokenSource does."""
        path = self.user_dir / os.path.expanduser(self.user["tokenFile"])
        try:
            token = path.read_text().strip()
        except OSError:
            return
        self._token_read_at = clock()
        if token and self.configuration.api_key.get("authorization") != f"Bearer {token}":
            self._file_token = f"Bearer {token}"
            self.generation += 1

    def credential_rejected(self, generation: int) -> None:
        """A request made with the credential of `generation` was answered 401: an exec plugin
        runs again, once for that credential (not when another request has replaced it since),
        and the 401 goes back to the caller all the same; the next request carries the new
        credential (client-go plugin/pkg/client/auth/exec/exec.go: roundTripper.RoundTrip calls
        Authenticator.maybeRefreshCreds on http.StatusUnauthorized and returns the response); a
        tokenFile is read again for the next request."""
        with self._lock:
            if self.generation != generation:
                return
            if self.user.get("exec"):
                self._load()
            elif self.user.get("tokenFile"):
                # client-go transport/token_source.go tokenSourceTransport.RoundTrip: on 401 the
                # cached file token is reset (ResetTokenOlderThan), so the next request reads it
                self._token_read_at = None

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.server.startswith("https"):
            return None
        with self._lock:
            if self._ssl_context is None:
                configuration = self._loaded()
                ctx = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
                if not configuration.verify_ssl:
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
                if configuration.cert_file and configuration.key_file:
                    ctx.load_cert_chain(configuration.cert_file, configuration.key_file)
                self._ssl_context = ctx
            return self._ssl_context

    @property
    def tls_server_name(self) -> str | None:
        with self._lock:
            return self._loaded().tls_server_name or None

    def client_credentials(self) -> tuple[bytes | None, bytes | None]:
        """The user's client certificate and key as the file names them (data, or a file relative
        to the kubeconfig that names it), not an exec plugin's: (certificate, key), None where absent."""
        def read(key: str) -> bytes | None:
            if self.user.get(f"{key}-data"):
                return base64.b64decode(self.user[f"{key}-data"])
            if self.user.get(key):
                return (self.user_dir / os.path.expanduser(self.user[key])).read_bytes()
            return None
        return read("client-certificate"), read("client-key")


class _Connection(http.client.HTTPConnection):
    """HTTP/1.1 over a stream that `open_stream` makes (TCP, a proxy's tunnel, TLS); the Host
    header names the API server whatever was dialled."""

    def __init__(self, host: str, port: int, timeout: float, open_stream):
        super().__init__(host, port, timeout=timeout)
        self._open_stream = open_stream

    def connect(self) -> None:
        self.sock = self._open_stream()


def _proxy_connect(sock, host: str, port: int, proxy) -> None:
    """An HTTP CONNECT through an http(s) proxy, with Basic proxy credentials from the URL's
    userinfo, as Go's net/http Transport sends them (transport.go dialConn)."""
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
    if proxy.username is not None:
        from urllib.parse import unquote
        credentials = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}".encode()
        lines.append("Proxy-Authorization: Basic " + base64.b64encode(credentials).decode())
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        data = sock.recv(1)             # byte by byte: nothing after the header may be consumed
        if not data:
            raise ConnectionError(f"proxy {proxy.hostname}:{proxy.port} closed the connection during CONNECT")
        answer += data
        if len(answer) > 65536:
            raise ConnectionError(f"proxy {proxy.hostname}:{proxy.port}: CONNECT answer too long")
    status = answer.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status.split(" ", 2)
    if len(parts) < 2 or parts[1] != "200":
        raise ConnectionError(f"proxyconnect: {status}")


_SOCKS_REPLIES = {1: "general SOCKS server failure", 2: "connection not allowed by ruleset",
                  3: "network unreachable", 4: "host unreachable", 5: "connection refused",
                  6: "TTL expired", 7: "command not supported", 8: "address type not supported"}


def _socks5_connect(sock, host: str, port: int, proxy) -> None:
    """A SOCKS5 CONNECT (RFC 1928), the host name resolved by the proxy, username/password
    authentication (RFC 1929) when the URL carries credentials: what golang.org/x/net's SOCKS
    dialer does for Go's Transport."""
    from urllib.parse import unquote

    def read(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError(f"socks connect {proxy.hostname}:{proxy.port}: the proxy closed the connection")
            data += chunk
        return data

    methods = b"\x00\x02" if proxy.username is not None else b"\x00"
    sock.sendall(b"\x05" + bytes([len(methods)]) + methods)
    version, method = read(2)
    if version != 5 or method == 0xFF:
        raise ConnectionError(f"socks connect {proxy.hostname}:{proxy.port}: no acceptable authentication methods")
    if method == 2:
        user, password = unquote(proxy.username).encode(), unquote(proxy.password or "").encode()
        sock.sendall(b"\x01" + bytes([len(user)]) + user + bytes([len(password)]) + password)
        if read(2)[1] != 0:
            raise ConnectionError(f"socks connect {proxy.hostname}:{proxy.port}: username/password authentication failed")
    try:
        import ipaddress
        address = ipaddress.ip_address(host)
        target = (b"\x01" if address.version == 4 else b"\x04") + address.packed
    except ValueError:
        name = host.encode("idna")
        target = b"\x03" + bytes([len(name)]) + name
    sock.sendall(b"\x05\x01\x00" + target + port.to_bytes(2, "big"))
    _, reply, _, kind = read(4)
    if reply != 0:
        raise ConnectionError(f"socks connect {proxy.hostname}:{proxy.port}: "
                              f"{_SOCKS_REPLIES.get(reply, f'unknown error {reply}')}")
    read({1: 4, 4: 16}.get(kind) or read(1)[0])      # the bound address, unused
    read(2)


# HttpClient.for_embedded's clients: (kubeconfig path, process) -> (the file's stat stamp, client)
_EMBEDDED: dict[tuple[str, int], tuple[tuple, "HttpClient"]] = {}
_EMBEDDED_LOCK = threading.Lock()


class HttpClient(Client):
    """A client for any API server: `HttpClient.from_kubeconfig(path, context)` (kubectl's
    loading rules, through the kubernetes package), `HttpClient.for_embedded(path)` (the
    kubeconfig labkit wrote for its own server) or `HttpClient(url, token)`."""

    def __init__(self, server: str, token: str | None = None, ssl_context: ssl.SSLContext | None = None,
                 user_agent: str = "labkit", timeout: float = 60, kubeconfig: KubeConfig | None = None):
        url = urlsplit(server)
        self.scheme = url.scheme or "http"
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or (443 if self.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self.token = token
        self._ssl_context = ssl_context
        self.kubeconfig = kubeconfig
        self.user_agent = user_agent
        self.timeout = timeout
        self._local = threading.local()

    @classmethod
    def from_kubeconfig(cls, path: str | os.PathLike | None = None, context: str | None = None,
                        **kwargs) -> "HttpClient":
        """A client for the cluster of `context` (default: the current one) of the kubeconfig at
        `path` (default: $KUBECONFIG, else ~/.kube/config), credentials kept fresh."""
        config = KubeConfig(path, context).load()
        return cls(config.server, kubeconfig=config, **kwargs)

    @classmethod
    def for_embedded(cls, path: str | os.PathLike, **kwargs) -> "HttpClient":
        """A client for labkit's embedded API server from the kubeconfig labkit wrote for it
        (users.kubeconfig_text: one cluster with its CA data, one user with a token, current),
        read directly: a labkit command talking to its own server does not pay the kubernetes
        package's import. Any other file: `from_kubeconfig`.

        Without kwargs, the same file unchanged (device, inode, size, modification time) gives the
        same client back in the same process, with its kept-alive connections: lab code asks for a
        client per step, and each new one cost a YAML parse, an SSL context and a TLS handshake on
        both ends. A server that is started again writes its kubeconfig again, which gives a new
        client; a connection its server closed is opened again by `request`."""
        if kwargs:
            return cls._read_embedded(path, **kwargs)
        try:
            st = os.stat(path)
        except OSError:
            return cls._read_embedded(path)
        key = (os.fspath(path), os.getpid())
        stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with _EMBEDDED_LOCK:
            found = _EMBEDDED.get(key)
        if found is not None and found[0] == stamp:
            return found[1]
        client = cls._read_embedded(path)
        with _EMBEDDED_LOCK:
            _EMBEDDED[key] = (stamp, client)
        return client

    @classmethod
    def _read_embedded(cls, path: str | os.PathLike, **kwargs) -> "HttpClient":
        from labkit.errors import ConfigError
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
            (cluster,), (user,) = data["clusters"], data["users"]
            server, ca = cluster["cluster"]["server"], cluster["cluster"]["certificate-authority-data"]
            token = user["user"]["token"]
        except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
            raise ConfigError(path, None, f"not a kubeconfig labkit wrote for its API server ({exc!r}): "
                                          "read it with HttpClient.from_kubeconfig")
        return cls(server, token, ssl.create_default_context(cadata=base64.b64decode(ca).decode()), **kwargs)

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        return self.kubeconfig.ssl_context() if self.kubeconfig is not None else self._ssl_context

    def _generation(self) -> int:
        return self.kubeconfig.generation if self.kubeconfig is not None else 0

    def _open_stream(self, timeout: float):
        """A stream to the API server: TCP, through the kubeconfig's proxy-url if any (for an
        https:// proxy, TLS to the proxy first, verified with the cluster's TLS settings as Go's
        Transport does, then TLS to the server inside it), then TLS to the server."""
        proxy = urlsplit(self.kubeconfig.proxy) if self.kubeconfig is not None and self.kubeconfig.proxy else None
        if proxy is None:
            sock = socket.create_connection((self.host, self.port), timeout)
        else:
            default_port = {"http": 80, "https": 443, "socks5": 1080}[proxy.scheme]
            sock = socket.create_connection((proxy.hostname, proxy.port or default_port), timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if proxy is not None and proxy.scheme == "socks5":
                _socks5_connect(sock, self.host, self.port, proxy)
            elif proxy is not None:
                if proxy.scheme == "https":
                    sock = self.ssl_context.wrap_socket(sock, server_hostname=proxy.hostname)
                _proxy_connect(sock, self.host, self.port, proxy)
            if self.scheme == "https":
                name = (self.kubeconfig.tls_server_name if self.kubeconfig else None) or self.host
                if isinstance(sock, ssl.SSLSocket):         # TLS inside the https proxy's TLS
                    from urllib3.util.ssltransport import SSLTransport
                    sock = SSLTransport(sock, self.ssl_context, server_hostname=name)
                else:
                    sock = self.ssl_context.wrap_socket(sock, server_hostname=name)
        except BaseException:
            sock.close()
            raise
        return sock

    def _connect(self, timeout: float | None = None) -> http.client.HTTPConnection:
        timeout = timeout or self.timeout
        conn = _Connection(self.host, self.port, timeout, lambda: self._open_stream(timeout))
        conn.connect()
        conn.labkit_generation = self._generation()
        return conn

    def _headers(self, content_type: str | None, accept: str | None) -> dict:
        headers = {"Accept": accept or "application/json", "User-Agent": self.user_agent}
        authorization = self.kubeconfig.authorization() if self.kubeconfig is not None else (
            f"Bearer {self.token}" if self.token else None)
        if authorization:
            headers["Authorization"] = authorization
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def request(self, method, path, query=None, body=None, content_type=None, accept=None):
        url = self.prefix + path + (f"?{urlencode(query)}" if query else "")
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            content_type = content_type or "application/json"
        headers = self._headers(content_type, accept)
        generation = self._generation()           # of the credential these headers carry
        for attempt in (1, 2):
            conn = getattr(self._local, "conn", None)
            if conn is not None and conn.labkit_generation != self._generation():
                conn.close()            # made with a client certificate since replaced
                conn = None
            if conn is None:
                conn = self._local.conn = self._connect()
            try:
                conn.request(method, url, body=data, headers=headers)
                response = conn.getresponse()
                raw = response.read()
                break
            except (http.client.HTTPException, ConnectionError, BrokenPipeError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        if response.getheader("Connection", "").lower() == "close":
            conn.close()
            self._local.conn = None
        if response.status == 401 and self.kubeconfig is not None:
            self.kubeconfig.credential_rejected(generation)
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            payload = raw
        return response.status, payload

    def open_watch(self, path, query):
        return _HttpWatch(self, self.prefix + path + "?" + urlencode(query))


class _HttpWatch(Watch):
    def __init__(self, client: HttpClient, url: str):
        self._queue: queue.Queue = queue.Queue()
        self._conn = client._connect(timeout=3600)
        self._conn.request("GET", url, headers=client._headers(None, None))
        self._response = self._conn.getresponse()
        if self._response.status != 200:
            body = self._response.read()
            self._conn.close()
            try:
                payload = json.loads(body)
            except ValueError:
                payload = body
            raise ApiError.from_status(self._response.status, payload)
        self._thread = threading.Thread(target=self._read, daemon=True, name="watch-reader")
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                line = self._response.readline()
                if not line:
                    break
                if line.strip():
                    self._queue.put(json.loads(line))
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            pass        # the watch ended or was stopped (AttributeError: closed under the reader)
        finally:
            self._queue.put(None)

    def next(self, timeout):
        if self.ended:
            return None
        try:
            event = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if event is None:
            self.ended = True
        return event

    def stop(self) -> None:
        self.ended = True
        sock = self._conn.sock
        while sock is not None and not hasattr(sock, "shutdown"):
            sock = getattr(sock, "socket", None)    # TLS inside an https proxy's TLS: the socket under it
        try:
            sock is not None and sock.shutdown(socket.SHUT_RDWR)     # wakes the reader and ends the tunnel
        except OSError:
            pass
        self._conn.close()


# -- in-process ----------------------------------------------------------------------------------

class LocalClient(Client):
    """Calls the embedded server's Api in-process, as `user` (audit-logged like any client)."""

    def __init__(self, api, user: str, groups: list[str] | None = None, user_agent: str = "labkit",
                 trusted: bool = False):
        # the request types (with authorization, selectors, validation) only for in-process clients:
        # a command that talks HTTPS to a running server, as every check does, does not load them
        from labkit.apiserver.request import User

        self.api = api
        self.user = User(user, groups or ["system:authenticated"])
        self.user_agent = user_agent
        self.trusted = trusted          # labkit's own controllers: not authorized (authorizer.py)

    def _request(self, method, path, query, body, content_type, accept):
        from labkit.apiserver.request import NO_BODY, Request

        headers = {"user-agent": self.user_agent, "accept": accept or "application/json"}
        if content_type:
            headers["content-type"] = content_type
        return Request(method, path, dict(query or {}), headers,
                       obj=NO_BODY if body is None else _copy(body), user=self.user, trusted=self.trusted)

    def request(self, method, path, query=None, body=None, content_type=None, accept=None):
        response = self.api.handle(self._request(method, path, query, body, content_type, accept))
        if response.stream is not None:
            response.stream.close()
        return response.code, response.body

    def open_watch(self, path, query):
        response = self.api.handle(self._request("GET", path, query, None, None, None))
        if response.stream is None:
            raise ApiError.from_status(response.code, response.body)
        return _LocalWatch(response.stream)


def _copy(obj):
    return json.loads(json.dumps(obj))


class _LocalWatch(Watch):
    def __init__(self, stream):
        self.stream = stream

    def changes_offered(self) -> int:
        return self.stream.watcher.offered

    def next(self, timeout):
        if self.ended:
            return None
        event = self.stream.next(timeout)
        if event is None:
            if self.stream.expired or self.stream.watcher.stopped:
                self.ended = True
            return None
        return {"type": event["type"], "object": _copy(event["object"])}

    def stop(self) -> None:
        self.ended = True
        self.stream.close()


def remove_recorded(entry: dict) -> bool:
    """Ledger remover for `apiobject` entries: delete an object labkit made on a real cluster
    (a namespace takes its content with it). "Already gone" is success. Finalizers the lab put on
    the object itself (entry["finalizers"]: nothing on the cluster ever removes them) are released
    first, so the object really goes; any other finalizer is left to its own controller."""
    from labkit.errors import LabkitError

    try:
        client = HttpClient.from_kubeconfig(entry["kubeconfig"], entry.get("context"), timeout=20)
        if entry.get("finalizers"):
            current = client.get(entry["apiVersion"], entry["resource"], entry["name"], entry.get("namespace"))
            kept = [f for f in current["metadata"].get("finalizers") or [] if f not in entry["finalizers"]]
            client.patch(entry["apiVersion"], entry["resource"], entry["name"],
                         {"metadata": {"finalizers": kept or None}},
                         "merge", entry.get("namespace"))
        client.delete(entry["apiVersion"], entry["resource"], entry["name"], entry.get("namespace"),
                      options={"propagationPolicy": "Background"})
    except ApiError as exc:
        if exc.code == 404:
            return False
        raise LabkitError(str(exc))
    except OSError as exc:
        raise LabkitError(f"cannot reach the cluster of {entry['kubeconfig']}: {exc}")
    return True
