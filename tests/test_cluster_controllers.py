"""What a real control plane adds around the namespace and GC controllers, on the embedded server:
per-namespace defaults, EndpointSlices and Endpoints, APIService availability through a real
backend, the Node and pods that end like real pods — and real kubectl showing them."""

from __future__ import annotations

import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from labkit.apiserver import certs
from labkit.controllers.node import HOST_IP
import support
from support import embedded_server, wait_until

GROUP, VERSION = "widgets.example.io", "v1"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home")) as srv:
        yield srv


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    """An aggregated API server's discovery, over HTTPS on the node's address: what it was asked."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("X-Remote-User"), self.headers.get("X-Remote-Group")))
            if self.path.rstrip("/") == f"/apis/{GROUP}/{VERSION}":
                body = json.dumps({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}",
                                   "resources": [{"name": "widgets", "namespaced": True, "kind": "Widget",
                                                  "verbs": ["get"]}]}).encode()
                self.send_response(200)
            else:
                body = b"{}"
                self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    pki = certs.ensure_certificates(tmp_path_factory.mktemp("backend-pki"))
    httpd = ThreadingHTTPServer((HOST_IP, 0), Handler)
    httpd.socket = certs.server_context(pki).wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1], seen
    httpd.shutdown()
    httpd.server_close()


def kubectl(server, *args):
    return support.kubectl(server, *args, check=True).stdout


def available(c, name):
    svc = c.get("apiregistration.k8s.io/v1", "apiservices", name)
    return next((x for x in (svc.get("status") or {}).get("conditions") or [] if x["type"] == "Available"), {})


# -- per-namespace defaults ------------------------------------------------------------------------

def test_every_namespace_gets_its_defaults_and_loses_them_with_it(server):
    c = server.client()
    c.create("v1", "namespaces", {"metadata": {"name": "defaults"}})
    assert wait_until(lambda: c.get_or_none("v1", "serviceaccounts", "default", "defaults")
                      and c.get_or_none("v1", "configmaps", "kube-root-ca.crt", "defaults"))
    cm = c.get("v1", "configmaps", "kube-root-ca.crt", "defaults")
    assert cm["data"]["ca.crt"] == (server.pki / certs.CA_CERT).read_text()
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert c.get_or_none("v1", "serviceaccounts", "default", ns) is not None
    c.delete("v1", "namespaces", "defaults")
    assert wait_until(lambda: c.get_or_none("v1", "namespaces", "defaults") is None, timeout=40)
    assert c.list("v1", "serviceaccounts", "defaults")[0] == [] and c.list("v1", "configmaps", "defaults")[0] == []


# -- endpoints --------------------------------------------------------------------------------------

def test_services_publish_ready_pods_and_resolve_named_ports(server):
    c = server.client()
    c.create("v1", "namespaces", {"metadata": {"name": "shop"}})
    c.create("v1", "services", {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}, "shop")
    c.create("v1", "services", {"metadata": {"name": "manual"}, "spec": {"ports": [{"port": 80}]}}, "shop")
    for name, port in (("a", 8080), ("b", 9090)):
        c.create("v1", "pods", {"metadata": {"name": name, "labels": {"app": "web"}}, "spec": {"containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10", "ports": [{"name": "http", "containerPort": port}]}]}},
                 "shop")

    def slices(service):
        return c.list("discovery.k8s.io/v1", "endpointslices", "shop",
                      label_selector=f"kubernetes.io/service-name={service}")[0]
    assert wait_until(lambda: len(slices("web")) == 2 and all(s.get("endpoints") for s in slices("web")))
    assert sorted(s["ports"][0]["port"] for s in slices("web")) == [8080, 9090]      # one slice per port mapping
    endpoints = c.get("v1", "endpoints", "web", "shop")
    assert sorted(p["ports"][0]["port"] for p in endpoints["subsets"]) == [8080, 9090]
    # a Service without a selector gets nothing from the controllers
    assert slices("manual") == [] and c.get_or_none("v1", "endpoints", "manual", "shop") is None


# -- APIService availability -------------------------------------------------------------------------

def test_an_apiservice_is_available_only_through_a_backend_that_answers(server, backend):
    port, seen = backend
    c = server.client()
    c.create("v1", "namespaces", {"metadata": {"name": "ext"}})
    c.create("apiregistration.k8s.io/v1", "apiservices", {
        "metadata": {"name": f"{VERSION}.{GROUP}"},
        "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 100, "versionPriority": 100,
                 "insecureSkipTLSVerify": True, "service": {"namespace": "ext", "name": "widgets", "port": 443}}})
    c.create("v1", "services", {"metadata": {"name": "widgets"}, "spec": {
        "selector": {"app": "widgets"}, "ports": [{"name": "https", "port": 443, "targetPort": "https"}]}}, "ext")
    assert wait_until(lambda: available(c, f"{VERSION}.{GROUP}").get("reason") == "MissingEndpoints")
    c.create("v1", "pods", {"metadata": {"name": "widgets", "labels": {"app": "widgets"}}, "spec": {
        "hostNetwork": True, "containers": [{"name": "api", "image": "example.com/widgets:1",
                                             "ports": [{"name": "https", "containerPort": port}]}]}}, "ext")
    assert wait_until(lambda: available(c, f"{VERSION}.{GROUP}").get("status") == "True")
    assert available(c, f"{VERSION}.{GROUP}")["reason"] == "Passed"
    assert (f"/apis/{GROUP}/{VERSION}", "system:kube-aggregator", "system:masters") in seen
    # requests for the group go to the backend through the aggregator's proxy
    code, body = server.http_client().request("GET", f"/apis/{GROUP}/{VERSION}")
    assert code == 200 and body["resources"][0]["name"] == "widgets"
    # the Service now targets a port nothing listens on
    svc = c.get("v1", "services", "widgets", "ext")
    svc["spec"]["ports"][0]["targetPort"] = 1
    c.update("v1", "services", svc, "ext")
    assert wait_until(lambda: available(c, f"{VERSION}.{GROUP}").get("reason") == "FailedDiscoveryCheck")
    assert available(c, f"{VERSION}.{GROUP}")["message"] == (
        f"failing or missing response from https://{HOST_IP}:1/apis/{GROUP}/{VERSION}: "
        f'Get "https://{HOST_IP}:1/apis/{GROUP}/{VERSION}": dial tcp {HOST_IP}:1: connect: connection refused')
    assert server.http_client().request("GET", f"/apis/{GROUP}/{VERSION}")[0] == 503


# -- kubectl ------------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_shows_nodes_completed_pods_endpoints_and_the_defaults(server):
    c = server.client()
    c.create("v1", "namespaces", {"metadata": {"name": "kc-show"}})
    c.create("v1", "services", {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}, "kc-show")
    for name, command in (("done", None), ("killed", ["sleep", "3600"])):
        c.create("v1", "pods", {"metadata": {"name": name, "labels": {"app": "web"}, "finalizers": ["example.com/hold"]},
                                "spec": {"terminationGracePeriodSeconds": 1, "containers": [
                                    {"name": "c", "image": "busybox:1.36", **({"command": command} if command else
                                                                             {"command": ["nginx"]})}]}}, "kc-show")
    assert wait_until(lambda: len(c.get("v1", "endpoints", "web", "kc-show").get("subsets", [{}])[0]
                                  .get("addresses") or []) == 2)
    endpoints = kubectl(server, "get", "endpoints", "web", "-n", "kc-show")
    assert "8080" in endpoints and "web" in endpoints
    assert "web-" in kubectl(server, "get", "endpointslices", "-n", "kc-show")
    nodes = kubectl(server, "get", "nodes").splitlines()
    assert nodes[1].split()[:2] == ["labkit-node", "Ready"] and "v1.34.1" in nodes[1]
    defaults = kubectl(server, "get", "serviceaccounts,configmaps", "-n", "kc-show", "-o", "name").split()
    assert "serviceaccount/default" in defaults and "configmap/kube-root-ca.crt" in defaults
    for name in ("done", "killed"):
        c.delete("v1", "pods", name, "kc-show")
    # their finalizer keeps them after the kubelet's final delete: kubectl shows how they ended
    assert wait_until(lambda: all(c.get("v1", "pods", n, "kc-show")["status"]["phase"] in ("Succeeded", "Failed")
                                  for n in ("done", "killed")), timeout=10)
    rows = {line.split()[0]: line.split() for line in kubectl(server, "get", "pods", "-n", "kc-show").splitlines()[1:]}
    assert rows["done"][1:3] == ["0/1", "Completed"] and rows["killed"][1:3] == ["0/1", "Error"]
    for name in ("done", "killed"):
        c.patch("v1", "pods", name, {"metadata": {"finalizers": None}}, "merge", "kc-show")


# -- the pod garbage collector ------------------------------------------------------------------------

def test_the_pod_gc_collects_orphans_out_of_service_and_terminated_pods(server):
    """PodGC's rules with short periods (upstream's: 20 s, 40 s quarantine, 12500 terminated pods;
    tests/scenarios/slow/ plays them in real time)."""
    from labkit.controllers.podgc import OUT_OF_SERVICE_TAINT, PodGCController
    c = server.client()
    c.create("v1", "namespaces", {"metadata": {"name": "pgc"}})
    c.create("v1", "nodes", {"metadata": {"name": "down"}, "spec": {},
                             "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    pod = {"spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "c", "image": "busybox"}]}}
    for name, node in (("orphan", "gone"), ("on-down", "down")):
        c.create("v1", "pods", {"metadata": {"name": name}, "spec": dict(pod["spec"], nodeName=node)}, "pgc")
    c.delete("v1", "pods", "on-down", "pgc")            # terminating on a node that is not ready
    for name in ("done-1", "done-2"):
        c.create("v1", "pods", {"metadata": {"name": name}, "spec": dict(pod["spec"], nodeName="down")}, "pgc")
        done = c.get("v1", "pods", name, "pgc")
        c.update("v1", "pods", dict(done, status={"phase": "Succeeded"}), "pgc", "status")
        time.sleep(1.1)         # creationTimestamp has seconds: done-1 is the older
    gone = []
    server.store.add_listener(lambda e: gone.append((e.name, e.obj)) if e.key == "/pods" and e.type == "DELETED"
                              else None)
    gc = PodGCController(server.controllers.client("system:serviceaccount:kube-system:pod-garbage-collector"),
                         server.decisions, period=0.1, quarantine=0.5, threshold=1)
    gc.start()
    try:
        assert wait_until(lambda: {"orphan", "done-1"} <= {n for n, _ in gone}, timeout=10)
        orphan = dict(gone)["orphan"]
        assert orphan["status"]["phase"] == "Failed"
        assert {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists"}.items() <= next(
            x for x in orphan["status"]["conditions"] if x["type"] == "DisruptionTarget").items()
        # a NotReady node alone does not let it delete the terminating pod; the out-of-service taint does
        assert c.get_or_none("v1", "pods", "on-down", "pgc") is not None
        assert c.get_or_none("v1", "pods", "done-2", "pgc") is not None      # within the threshold
        c.patch("v1", "nodes", "down", {"spec": {"taints": [{"key": OUT_OF_SERVICE_TAINT, "effect": "NoExecute"}]}},
                "merge")
        assert wait_until(lambda: "on-down" in {n for n, _ in gone}, timeout=10)
    finally:
        gc.stop()
