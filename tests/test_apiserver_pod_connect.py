"""pods/log, pods/exec, pods/attach, pods/portforward: what kube-apiserver v1.34.1 answers when
it cannot reach the node's kubelet (labkit runs none), read by real kubectl."""

from __future__ import annotations

import functools
import shutil
import socket

import pytest

import support
from support import embedded_server

from labkit.apiserver.registry import podconnect

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

kubectl = functools.partial(support.kubectl, check=False)
NS = "pc"


@pytest.fixture(scope="module")
def closed_port():
    """A port of 127.0.0.1 bound and never listened on: a connect to it is refused at once."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield sock.getsockname()[1]
    sock.close()


def _node(name: str, addresses: list, port: int) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"addresses": addresses, "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}


def _pod(name: str, node: str = "", containers=("app",), labels=None) -> dict:
    spec = {"containers": [{"name": c, "image": "busybox"} for c in containers]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


@pytest.fixture(scope="module")
def server(tmp_path_factory, closed_port):
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home"),
                         controllers=[]) as srv:
        c = srv.client()
        c.create("v1", "namespaces", {"metadata": {"name": NS}})
        c.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, NS)
        # the Node's address list also has a Hostname, which kubeadm's preference order passes over
        c.create("v1", "nodes", _node("n1", [{"type": "Hostname", "address": "n1.invalid"},
                                             {"type": "InternalIP", "address": "127.0.0.1"}], closed_port))
        c.create("v1", "nodes", _node("bare", [], 0))
        for pod in (_pod("web", "n1"), _pod("two", "n1", ("a", "b")), _pod("pending"),
                    _pod("lost", "ghost"), _pod("noaddr", "bare"),
                    _pod("backend", "n1", ("webhook",), {"app": "policy"})):
            c.create("v1", "pods", pod, NS)
        web = c.get("v1", "pods", "web", NS)       # kubectl port-forward wants a Running Pod
        web["status"]["phase"] = "Running"
        code, _ = c.request("PUT", f"/api/v1/namespaces/{NS}/pods/web/status", body=web)
        assert code == 200
        yield srv


def _lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_logs_of_an_unreachable_kubelet(server, closed_port):
    r = kubectl(server, "logs", "web", "-n", NS)
    assert r.returncode == 1 and r.stdout == ""
    assert _lines(r)[-1] == (f'Error from server: Get "https://127.0.0.1:{closed_port}/containerLogs/{NS}/web/app": '
                             f"dial tcp 127.0.0.1:{closed_port}: connect: connection refused")
    # the options the kubelet would get are in its URL, in url.Values order
    r = kubectl(server, "logs", "web", "-n", NS, "--tail=5", "--timestamps", "--limit-bytes=100")
    assert f"/containerLogs/{NS}/web/app?limitBytes=100&tailLines=5&timestamps=true\"" in r.stderr
    # and a warning says why: labkit runs no kubelet
    assert any(line.startswith("Warning: labkit runs no kubelet for node 'n1'") for line in _lines(r))


def test_exec_and_attach_of_an_unreachable_kubelet(server, closed_port):
    r = kubectl(server, "exec", "web", "-n", NS, "--", "true")
    assert r.returncode == 1
    assert _lines(r)[-1] == (f"Error from server: error dialing backend: dial tcp 127.0.0.1:{closed_port}: "
                             "connect: connection refused")
    r = kubectl(server, "port-forward", "pod/web", "-n", NS, "18080:80", timeout=30)
    assert r.returncode == 1
    assert "error dialing backend: dial tcp 127.0.0.1:" in r.stderr


def test_the_errors_before_the_dial(server):
    r = kubectl(server, "logs", "nope", "-n", NS)        # kubectl reads the Pod first: its GET's 404
    assert _lines(r) == [f'error: error from server (NotFound): pods "nope" not found in namespace "{NS}"']
    # kubectl checks the container name itself: the server's answer, read raw
    r = kubectl(server, "get", "--raw", f"/api/v1/namespaces/{NS}/pods/two/log?container=c")
    assert _lines(r)[-1] == "Error from server (BadRequest): container c is not valid for pod two"
    r = kubectl(server, "get", "--raw", f"/api/v1/namespaces/{NS}/pods/two/log")
    assert _lines(r)[-1] == "Error from server (BadRequest): a container name must be specified for pod two, choose one of: [a b]"
    r = kubectl(server, "logs", "lost", "-n", NS)
    assert _lines(r)[-1] == 'Error from server (NotFound): nodes "ghost" not found'
    r = kubectl(server, "logs", "noaddr", "-n", NS)
    assert _lines(r)[-1] == "Error from server: no preferred addresses found; known addresses: []"
    # no node: an empty log, and exec is refused
    r = kubectl(server, "logs", "pending", "-n", NS)
    assert (r.returncode, r.stdout) == (0, "")
    r = kubectl(server, "exec", "pending", "-n", NS, "--", "true")
    assert _lines(r)[-1] == "Error from server (BadRequest): pod pending does not have a host assigned"


def test_a_lab_process_log_is_pointed_at(server, tmp_path):
    log = tmp_path / "policy.log"
    podconnect.register_container_log(server.state_dir, NS, {"app": "policy"}, "webhook", log)
    r = kubectl(server, "logs", "backend", "-n", NS)
    assert (f"Warning: labkit runs no kubelet for node 'n1': the process that stands for container 'webhook' "
            f"of this Pod writes its output to {log}") in r.stderr
    r = kubectl(server, "logs", "web", "-n", NS)
    assert str(log) not in r.stderr


def test_in_process_status_objects(server):
    """The Status as kube-apiserver encodes it: an error that is no Status has code 500 and no
    reason (StatusReasonUnknown is empty); PUT of a log is not served."""
    c = server.client()
    code, body = c.request("GET", f"/api/v1/namespaces/{NS}/pods/noaddr/log")
    assert code == 500 and body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                    "message": "no preferred addresses found; known addresses: []", "code": 500}
    code, body = c.request("PUT", f"/api/v1/namespaces/{NS}/pods/web/log", body={})
    assert code == 405
    code, body = c.request("POST", f"/api/v1/namespaces/{NS}/pods/pending/exec", query={"command": "true"})
    assert (code, body["reason"]) == (400, "BadRequest")


def test_container_choice_and_log_options():
    pod = {"metadata": {"name": "p"}, "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"},
                                                                                                {"name": "b"}]}}
    with pytest.raises(podconnect.ApiError) as e:
        podconnect.choose_container(pod, "")
    assert (e.value.code, e.value.message) == (400, "a container name must be specified for pod p, choose one of: [i a b]")
    assert podconnect.choose_container(pod, "i") == "i"
    with pytest.raises(podconnect.ApiError) as e:
        podconnect.log_query({"tailLines": "-1", "limitBytes": "0"}, "p")
    assert e.value.code == 422 and "tailLines: Invalid value: -1: must be greater than or equal to 0" in e.value.message
    assert "limitBytes: Invalid value: 0: must be greater than 0" in e.value.message
    assert podconnect.log_query({"follow": "true", "sinceSeconds": "10"}, "p") == "follow=true&sinceSeconds=10"


def test_dial_texts(closed_port):
    assert podconnect.dial("127.0.0.1", closed_port) == f"dial tcp 127.0.0.1:{closed_port}: connect: connection refused"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        assert podconnect.dial("127.0.0.1", listener.getsockname()[1]) is None
    finally:
        listener.close()
