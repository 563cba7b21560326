"""Real-cluster paths load a kubeconfig as kubectl does, through the kubernetes package, against
the embedded API server over real HTTPS: an exec credential plugin (a script printing an
ExecCredential) giving a token or a client certificate, fetched again when it expires and kept
while it does not; $KUBECONFIG files merged (the first current-context wins), ~/.kube/config as
the default; tokenFile relative to the kubeconfig naming it; tls-server-name."""

from __future__ import annotations

import base64
import json
import ssl
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from labkit.apiserver import users
from labkit.apiserver.client import HttpClient
from labkit.apiserver.server import EmbeddedServer
from labkit.errors import ConfigError
from support import host_lock

PLUGIN = """#!{python}
import json, os, pathlib
state = pathlib.Path(os.environ["PLUGIN_STATE"])
calls = int((state / "calls").read_text()) + 1 if (state / "calls").exists() else 1
(state / "calls").write_text(str(calls))
credential = json.loads((state / "credentials").read_text())[min(calls, 2) - 1]
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": credential}}))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with host_lock(False):
        s = EmbeddedServer(tmp_path_factory.mktemp("kubeconfig") / "apiserver", controllers=[]).start()
    admin = s.client()
    for name in ("robot-a", "robot-b"):
        admin.create("v1", "serviceaccounts", {"metadata": {"name": name}}, "default")
    yield s
    with host_lock(False):
        s.stop()


def sa_token(server, name: str) -> str:
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    return server.client().create("v1", "serviceaccounts", request, "default", subresource="token",
                                  name=name)["status"]["token"]


def whoami(client: HttpClient) -> str:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    return client.check(*client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review)
                        )["status"]["userInfo"]["username"]


def cluster_entry(server, name: str = "lab", **extra) -> dict:
    ca = (server.pki / "ca.crt").read_bytes()
    return {"name": name, "cluster": {"server": server.url, "certificate-authority-data": base64.b64encode(ca).decode(),
                                      **extra}}


def exec_kubeconfig(server, tmp_path, credentials: list[dict]):
    state = tmp_path / "plugin"
    state.mkdir()
    (state / "credentials").write_text(json.dumps(credentials))
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN.format(python=sys.executable))
    plugin.chmod(0o755)
    config = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster_entry(server)],
              "users": [{"name": "robot", "user": {"exec": {
                  "apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                  "env": [{"name": "PLUGIN_STATE", "value": str(state)}], "interactiveMode": "Never"}}}],
              "contexts": [{"name": "robot", "context": {"cluster": "lab", "user": "robot"}}],
              "current-context": "robot"}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path, state


def rfc3339(delta: timedelta) -> str:
    return (datetime.now(timezone.utc) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def later(monkeypatch, hours: int) -> None:
    """Let `hours` pass for the kubernetes package's expiry test (a credential counts as expired
    once fewer than EXPIRY_SKEW_PREVENTION_DELAY are left): a skew of that much more."""
    from kubernetes.config import kube_config
    monkeypatch.setattr(kube_config, "EXPIRY_SKEW_PREVENTION_DELAY",
                        kube_config.EXPIRY_SKEW_PREVENTION_DELAY + timedelta(hours=hours))


@pytest.mark.parametrize("kind", ["token", "certificate"])
def test_an_exec_plugin_credential_is_fetched_again_once_it_expires(server, tmp_path, monkeypatch, kind):
    if kind == "token":
        first, second = ({"token": sa_token(server, name)} for name in ("robot-a", "robot-b"))
        names = ("system:serviceaccount:default:robot-a", "system:serviceaccount:default:robot-b")
    else:
        pairs = [users.client_certificate(server.pki, name) for name in ("alice", "bob")]
        first, second = ({"clientCertificateData": cert.decode(), "clientKeyData": key.decode()} for cert, key in pairs)
        names = ("alice", "bob")
    first["expirationTimestamp"] = rfc3339(timedelta(hours=1))
    second["expirationTimestamp"] = rfc3339(timedelta(hours=4))
    path, state = exec_kubeconfig(server, tmp_path, [first, second])
    client = HttpClient.from_kubeconfig(path)
    assert [whoami(client), whoami(client)] == [names[0]] * 2
    assert (state / "calls").read_text() == "1"
    later(monkeypatch, hours=2)             # the credential has expired: the plugin runs again
    assert [whoami(client), whoami(client)] == [names[1]] * 2
    assert (state / "calls").read_text() == "2"


def test_an_exec_plugin_runs_again_when_its_credential_is_refused(server, tmp_path):
    """client-go's exec round tripper: a 401 runs the plugin again and is returned as it is; the
    next request carries the new credential. A credential that has not expired is not fetched
    again for any other answer."""
    path, state = exec_kubeconfig(server, tmp_path, [{"token": "revoked-or-never-valid"},
                                                     {"token": sa_token(server, "robot-b")}])
    client = HttpClient.from_kubeconfig(path)
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    code, _ = client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review)
    assert code == 401
    assert (state / "calls").read_text() == "2"
    assert [whoami(client), whoami(client)] == ["system:serviceaccount:default:robot-b"] * 2
    code, _ = client.request("GET", "/api/v1/namespaces/kube-system/secrets")
    assert code == 403                              # refused, not unauthenticated: no new credential
    assert (state / "calls").read_text() == "2"


def test_a_token_file_is_read_again_as_client_go_reads_it(server, tmp_path, monkeypatch):
    """A projected token is rotated in place: the file is read again once its token is 50 s old
    (a minute less client-go's ten seconds of leeway), and at once after a 401."""
    from labkit.apiserver import client as client_module
    now = [1000.0]
    monkeypatch.setattr(client_module, "clock", lambda: now[0])
    (tmp_path / "robot.token").write_text(sa_token(server, "robot-a") + "\n")
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "robot", "clusters": [cluster_entry(server)],
        "users": [{"name": "robot", "user": {"tokenFile": "robot.token"}}],
        "contexts": [{"name": "robot", "context": {"cluster": "lab", "user": "robot"}}]}))
    client = HttpClient.from_kubeconfig(path)
    assert whoami(client) == "system:serviceaccount:default:robot-a"
    (tmp_path / "robot.token").write_text(sa_token(server, "robot-b"))
    now[0] += 49
    assert whoami(client) == "system:serviceaccount:default:robot-a"     # not yet
    now[0] += 1
    assert whoami(client) == "system:serviceaccount:default:robot-b"
    (tmp_path / "robot.token").write_text("revoked")
    assert whoami(client) == "system:serviceaccount:default:robot-b"     # read 0 s ago
    now[0] += 55                                 # read again: the revoked token answers 401
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    code, _ = client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review)
    assert code == 401
    (tmp_path / "robot.token").write_text(sa_token(server, "robot-a"))
    assert whoami(client) == "system:serviceaccount:default:robot-a"     # after the 401: at once


def test_a_failing_exec_plugin_is_an_error_not_an_anonymous_client(server, tmp_path):
    path, state = exec_kubeconfig(server, tmp_path, [])
    (state / "credentials").write_text("not json")
    with pytest.raises(ConfigError, match="credential plugin .* gave no credential"):
        HttpClient.from_kubeconfig(path)


def test_kubeconfig_files_merge_as_kubectl_merges_them(server, tmp_path, monkeypatch):
    """$KUBECONFIG: the first file to set current-context wins; clusters and users come from any
    file; a relative tokenFile is relative to the file naming it, not to the working directory."""
    first, second, elsewhere = tmp_path / "one", tmp_path / "two", tmp_path / "cwd"
    for d in (first, second, elsewhere):
        d.mkdir()
    (first / "robot.token").write_text(sa_token(server, "robot-b") + "\n")
    (first / "config").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "robot",
        "users": [{"name": "robot", "user": {"tokenFile": "robot.token"}}],
        "contexts": [{"name": "robot", "context": {"cluster": "lab", "user": "robot"}}]}))
    (second / "config").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "admin", "clusters": [cluster_entry(server)],
        "users": [{"name": "admin", "user": {"token": server.token}}],
        "contexts": [{"name": "admin", "context": {"cluster": "lab", "user": "admin"}}]}))
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("KUBECONFIG", f"{first / 'config'}:{tmp_path / 'missing'}:{second / 'config'}")
    assert whoami(HttpClient.from_kubeconfig()) == "system:serviceaccount:default:robot-b"
    assert whoami(HttpClient.from_kubeconfig(context="admin")) == "labkit-admin"
    monkeypatch.setenv("KUBECONFIG", f"{second / 'config'}:{first / 'config'}")
    assert whoami(HttpClient.from_kubeconfig()) == "labkit-admin"
    with pytest.raises(ConfigError, match="context 'nowhere' not found"):
        HttpClient.from_kubeconfig(context="nowhere")


def test_without_kubeconfig_the_default_is_the_home_directorys(server, tmp_path, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    users.write_kubeconfig(tmp_path / ".kube" / "config", server.url, server.pki, "robot",
                           token=sa_token(server, "robot-a"))
    assert whoami(HttpClient.from_kubeconfig()) == "system:serviceaccount:default:robot-a"


def test_tls_server_name_is_the_name_verified(server, tmp_path):
    """The serving certificate names 127.0.0.1, localhost and kubernetes(.default): dialling
    127.0.0.1 with tls-server-name kubernetes.default verifies, with another name it does not."""
    for name, verifies in (("kubernetes.default", True), ("elsewhere.example", False)):
        path = tmp_path / name
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [cluster_entry(server, **{"tls-server-name": name})],
            "users": [{"name": "admin", "user": {"token": server.token}}],
            "contexts": [{"name": "c", "context": {"cluster": "lab", "user": "admin"}}]}))
        client = HttpClient.from_kubeconfig(path)
        if verifies:
            assert whoami(client) == "labkit-admin"
        else:
            with pytest.raises(ssl.SSLCertVerificationError, match="elsewhere.example"):
                whoami(client)


def test_labkits_own_kubeconfig_is_read_without_the_kubernetes_package(server, tmp_path):
    assert whoami(HttpClient.for_embedded(server.kubeconfig)) == "labkit-admin"
    cert, key = users.client_certificate(server.pki, "alice")
    other = users.write_kubeconfig(tmp_path / "alice", server.url, server.pki, "alice", certificate=cert, key=key)
    with pytest.raises(ConfigError, match="not a kubeconfig labkit wrote"):
        HttpClient.for_embedded(other)
    assert whoami(HttpClient.from_kubeconfig(other)) == "alice"


def test_labkits_own_kubeconfig_gives_one_client_until_the_file_changes(server, tmp_path):
    """for_embedded keeps its client (and its kept-alive connection) while the file is unchanged;
    a rewritten file (a server started again) gives a new one, which reads the new content."""
    path = tmp_path / "kubeconfig"
    path.write_text(server.kubeconfig.read_text())
    first = HttpClient.for_embedded(path)
    assert HttpClient.for_embedded(path) is first and whoami(first) == "labkit-admin"
    connection = first._local.conn
    assert whoami(HttpClient.for_embedded(path)) == "labkit-admin" and first._local.conn is connection
    assert HttpClient.for_embedded(path, timeout=5) is not first        # other settings: a client of its own
    moved = yaml.safe_load(path.read_text())
    moved["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    path.write_text(yaml.safe_dump(moved))
    second = HttpClient.for_embedded(path)
    assert second is not first and second.port == 1
    path.write_text("not: [a kubeconfig")
    with pytest.raises(ConfigError, match="not a kubeconfig labkit wrote"):
        HttpClient.for_embedded(path)


@pytest.mark.parametrize("scheme", ["http", "https", "socks5"])
def test_proxy_url_tunnels_through_the_proxy(server, tmp_path, scheme):
    """proxy-url with each scheme client-go accepts: the client asks the proxy to connect to the
    server (HTTP CONNECT, over TLS for an https:// proxy; SOCKS5 CONNECT with the host name and
    username/password), sends the URL's credentials, and speaks TLS to the server through the
    tunnel, verifying the server's certificate as if it had dialled it directly."""
    import socket
    import socketserver
    import threading

    from labkit.apiserver import certs
    tunnels = []

    tunnels_open = []

    def pump_both(client_side, upstream):
        tunnels_open.append(client_side)
        def pump(src, dst):
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except (OSError, ValueError):
                        pass
        back = threading.Thread(target=pump, args=(upstream, client_side), daemon=True)
        back.start()
        pump(client_side, upstream)
        back.join()
        upstream.close()
        tunnels_open.remove(client_side)

    def read_exactly(sock, n):
        data = b""
        while len(data) < n:
            data += sock.recv(n - len(data))
        return data

    class HttpProxy(socketserver.StreamRequestHandler):
        def setup(self):
            if scheme == "https":       # the proxy's own certificate, from the cluster's CA here
                context = certs.server_context(server.pki)
                self.request = context.wrap_socket(self.request, server_side=True)
            super().setup()

        def handle(self):
            request = self.rfile.readline().decode()
            headers = []
            while (line := self.rfile.readline()) not in (b"\r\n", b""):
                headers.append(line.decode().strip())
            method, target, _ = request.split()
            tunnels.append((method, target, [h for h in headers if h.startswith("Proxy-Authorization")]))
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            pump_both(self.connection, upstream)

    class SocksProxy(socketserver.BaseRequestHandler):
        def handle(self):
            sock = self.request
            version, count = read_exactly(sock, 2)
            methods = read_exactly(sock, count)
            assert 2 in methods
            sock.sendall(b"\x05\x02")
            _, ulen = read_exactly(sock, 2)
            user = read_exactly(sock, ulen)
            plen = read_exactly(sock, 1)[0]
            password = read_exactly(sock, plen)
            sock.sendall(b"\x01\x00")
            _, command, _, kind = read_exactly(sock, 4)
            host = (socket.inet_ntoa(read_exactly(sock, 4)) if kind == 1
                    else read_exactly(sock, read_exactly(sock, 1)[0]).decode())
            port = int.from_bytes(read_exactly(sock, 2), "big")
            tunnels.append(("SOCKS5", f"{host}:{port}", [f"{user.decode()}:{password.decode()}"]))
            upstream = socket.create_connection((host, port))
            sock.sendall(b"\x05\x00\x00\x01" + socket.inet_aton("127.0.0.1") + b"\x00\x00")
            pump_both(sock, upstream)

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        block_on_close = False      # a tunnel left open fails the assertion below instead of hanging

    with Server(("127.0.0.1", 0), SocksProxy if scheme == "socks5" else HttpProxy) as proxy:
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        path = tmp_path / "kubeconfig"
        url = f"{scheme}://ann:s%40cret@127.0.0.1:{proxy.server_address[1]}"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [cluster_entry(server, **{"proxy-url": url})],
            "users": [{"name": "admin", "user": {"token": server.token}}],
            "contexts": [{"name": "c", "context": {"cluster": "lab", "user": "admin"}}]}))
        client = HttpClient.from_kubeconfig(path)
        assert whoami(client) == "labkit-admin"
        watch = client.open_watch("/api/v1/namespaces", {"watch": "true"})
        assert watch.next(10)["object"]["kind"] == "Namespace"
        watch.stop()
        deadline = time.monotonic() + 10
        while len(tunnels_open) > 1 and time.monotonic() < deadline:     # the watch's tunnel ends
            time.sleep(0.01)
        assert len(tunnels_open) <= 1, "the watch's tunnel through the proxy stayed open after stop()"
        proxy.shutdown()
    if scheme == "socks5":
        assert tunnels[0] == ("SOCKS5", f"127.0.0.1:{server.port}", ["ann:s@cret"])
    else:
        assert tunnels[0] == ("CONNECT", f"127.0.0.1:{server.port}",
                              ["Proxy-Authorization: Basic " + base64.b64encode(b"ann:s@cret").decode()])


def test_a_proxy_url_of_another_scheme_is_refused_in_client_gos_words(server, tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [cluster_entry(server, **{"proxy-url": "socks4://127.0.0.1:1080"})],
        "users": [{"name": "admin", "user": {"token": server.token}}],
        "contexts": [{"name": "c", "context": {"cluster": "lab", "user": "admin"}}]}))
    with pytest.raises(ConfigError, match=r"invalid 'proxy-url' 'socks4://127.0.0.1:1080' for cluster 'lab': "
                                          r"unsupported scheme 'socks4', must be http, https, or socks5"):
        HttpClient.from_kubeconfig(path)


@pytest.mark.parametrize("content", ["-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "- a\n- b\n"])
def test_a_file_that_is_no_kubeconfig_is_named_so_in_plain_words(tmp_path, content):
    """A certificate or a list given where a kubeconfig belongs (an answer file naming the wrong file):
    the error says what the file is not, with no Python internals."""
    from labkit.apiserver.client import KubeConfig
    path = tmp_path / "alice.crt"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        KubeConfig(path)
    assert "not a kubeconfig: its content is not a YAML mapping" in str(info.value)
    assert "object" not in str(info.value), str(info.value)
