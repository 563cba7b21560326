"""Admission: the chain in upstream's order, webhooks called over real HTTPS with AdmissionReview,
ValidatingAdmissionPolicy with CEL.

Cases ported from k8s.io/apiserver v1.34: webhook/testing/testcase.go (NewNonMutatingTestCases,
NewMutatingTestCases, with webhook_server.go's answers), errors/statuserror_test.go
(TestToStatusErr), predicates/rules/rules_test.go, and the validating policy tests' plain
outcomes. The webhook server is a real HTTPS server on loopback, its certificate signed by a CA
made for the test and given to the configurations as caBundle.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from labkit.apiserver.admission import ALL_ORDERED_PLUGINS, Attributes
from labkit.apiserver.admission.webhook import rule_matches, to_status_error
from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.request import Request
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store

AR = "admissionregistration.k8s.io/v1"
EVERYTHING = [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}]


# -- the webhook server (webhook_server.go's paths, AdmissionReview v1) -------------------------------

def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(directory):
    """A CA and a serving certificate for 127.0.0.1 and hooks.default.svc."""
    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign", cwd=directory)
    _openssl("req", "-new", *curve, "-keyout", "hook.key", "-out", "hook.csr", "-subj", "/CN=hooks", cwd=directory)
    (directory / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:hooks.default.svc\n"
                                       "extendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "hook.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "hook.crt", "-days", "2", "-extfile", "ext.cnf", cwd=directory)
    return directory


def _patch(ops):
    return base64.b64encode(json.dumps(ops).encode()).decode()


ANSWERS = {
    "allow": lambda r: {"allowed": True, "auditAnnotations": {"key1": "value1"}},
    "disallow": lambda r: {"allowed": False, "status": {"code": 403}},
    "disallowReason": lambda r: {"allowed": False, "status": {"message": "you shall not pass", "code": 403}},
    "shouldNotBeCalled": lambda r: {"allowed": False, "status": {
        "message": "doesn't expect labels to match object selector", "code": 403}},
    "addLabel": lambda r: {"allowed": True, "patchType": "JSONPatch",
                           "patch": _patch([{"op": "add", "path": "/metadata/labels/added", "value": "test"}])},
    "removeLabel": lambda r: {"allowed": True, "patchType": "JSONPatch", "auditAnnotations": {"key1": "value1"},
                              "patch": _patch([{"op": "remove", "path": "/metadata/labels/remove"}])},
    "invalidPatch": lambda r: {"allowed": True, "patchType": "JSONPatch",
                               "patch": base64.b64encode(b"[{").decode()},
    "badBase64Patch": lambda r: {"allowed": True, "patchType": "JSONPatch", "patch": "W3t9XQ==x"},
    "patchMissingParent": lambda r: {"allowed": True, "patchType": "JSONPatch", "patch": _patch(
        [{"op": "add", "path": "/metadata/annotations/example.com~1owner", "value": "web-team"}])},
    "patchTestFails": lambda r: {"allowed": True, "patchType": "JSONPatch", "patch": _patch(
        [{"op": "test", "path": "/metadata/labels/pod.name", "value": "other"}])},
    "patchNotOperations": lambda r: {"allowed": True, "patchType": "JSONPatch", "patch": _patch([1])},
    "warn": lambda r: {"allowed": True, "warnings": ["mind the gap"]},
    "noop": lambda r: {"allowed": True},
}


class Hooks:
    """A real HTTPS webhook server on loopback; `calls` records (path, AdmissionReview request)."""

    def __init__(self, pki):
        hooks = self
        self.calls: list[tuple[str, dict]] = []
        self.urls: list[str] = []           # each call's path and query, as sent

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                path = self.path.split("?")[0].strip("/")
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hooks.calls.append((path, review["request"]))
                hooks.urls.append(self.path)
                if path == "internalErr":
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b"webhook internal server error")
                    return
                if path == "slow":
                    time.sleep(1.5)
                    path = "allow"
                if path == "nilResponse":
                    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
                else:
                    response = ANSWERS[path](review["request"])
                    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                            "response": {"uid": review["request"]["uid"], **response}}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki / "hook.crt", pki / "hook.key")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return {"url": f"https://127.0.0.1:{self.port}/{path}", "caBundle": self.ca}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def hooks(tmp_path_factory):
    h = Hooks(make_pki(tmp_path_factory.mktemp("pki")))
    yield h
    h.close()


@pytest.fixture
def api(tmp_path, hooks):
    store = Store(tmp_path / "objects.db")
    api = Api(Registry(store))
    admin = LocalClient(api, "admin", ["system:masters", "system:authenticated"])
    admin.create("v1", "namespaces", {"metadata": {"name": "ns", "labels": {"runlevel": "0"}}})
    admin.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")    # the controller's
    admin.create("v1", "pods", {"metadata": {"name": "my-pod", "labels": {"pod.name": "my-pod"}},
                                "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}, "ns")
    hooks.calls.clear()
    yield api
    store.close()


def admin(api):
    return LocalClient(api, "admin", ["system:masters", "system:authenticated"])


def hook(name, path_or_config, hooks, **fields):
    config = hooks.url(path_or_config) if isinstance(path_or_config, str) else path_or_config
    return {"name": name, "clientConfig": config, "rules": EVERYTHING, "sideEffects": "None",
            "admissionReviewVersions": ["v1"], **fields}


def configure(api, kind, webhooks, name="config"):
    resource = "validatingwebhookconfigurations" if kind == "validating" else "mutatingwebhookconfigurations"
    admin(api).create(AR, resource, {"metadata": {"name": name}, "webhooks": webhooks})


def write_pod(api, labels=None, name="my-pod", dry_run=False):
    """A request as the webhook tests make it: the pod updated (testcase.go's attributes are an UPDATE)."""
    client = admin(api)
    pod = client.get("v1", "pods", name, "ns")
    pod["metadata"]["labels"].update(labels or {})
    code, body = client.request("PUT", f"/api/v1/namespaces/ns/pods/{name}", {"dryRun": "All"} if dry_run else None,
                                pod)
    return code, body


def annotations(api):
    return api.traces.newest(1)[0]["annotations"]


# -- ToStatusErr (errors/statuserror_test.go) --------------------------------------------------------

@pytest.mark.parametrize("result,message,code", [
    (None, " without explanation", 400),
    ({"message": "you shall not pass"}, ": you shall not pass", 400),
    ({"reason": "Forbidden"}, ": Forbidden", 400),
    ({"message": "you shall not pass", "reason": "Forbidden"}, ": you shall not pass", 400),
    ({}, " without explanation", 400),
    ({"code": 401}, " without explanation", 401),
    ({"code": 500}, " without explanation", 500),
    ({"code": 200}, " without explanation", 400),
    ({"code": 300}, " without explanation", 400),
    ({"code": 399}, " without explanation", 400),
    ({"status": "Success"}, " without explanation", 400),
])
def test_to_status_err(result, message, code):
    error = to_status_error("test_webhook", result)
    assert error.message == 'admission webhook "test_webhook" denied the request' + message
    assert error.code == code
    assert error.status()["status"] == "Failure"


# -- rules (predicates/rules/rules_test.go) ----------------------------------------------------------

@pytest.mark.parametrize("rule,operation,gvr,sub,namespace,expected", [
    ({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]},
     "CREATE", ("apps", "v1", "deployments"), "", "ns", True),
    ({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]},
     "UPDATE", ("", "v1", "pods"), "status", "ns", False),            # "*" is not "*/*"
    ({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/status"]},
     "UPDATE", ("", "v1", "pods"), "status", "ns", True),
    ({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["pods/*"]},
     "UPDATE", ("", "v1", "pods"), "", "ns", True),                   # "/*" includes no subresource
    ({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]},
     "DELETE", ("", "v1", "pods"), "", "ns", False),
    ({"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["*"]},
     "CREATE", ("", "v1", "pods"), "", "ns", False),
    ({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["v1beta1"], "resources": ["*"]},
     "CREATE", ("", "v1", "pods"), "", "ns", False),
    ({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"},
     "CREATE", ("", "v1", "namespaces"), "", "ns", False),            # a namespace is cluster-scoped
    ({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"},
     "CREATE", ("", "v1", "namespaces"), "", "ns", True),
    ({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"},
     "CREATE", ("", "v1", "pods"), "", "ns", False),
    ({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"},
     "CREATE", ("", "v1", "nodes"), "", "", False),
])
def test_rule_matcher(rule, operation, gvr, sub, namespace, expected):
    assert rule_matches(rule, operation, gvr, sub, namespace) is expected


def test_chain_runs_enabled_plugins_in_order_and_says_what_it_left_out(api):
    chain = api.registry.admission
    assert [p.name for p in chain.plugins] == ["NamespaceLifecycle", "LimitRanger", "ServiceAccount",
                                                "TaintNodesByCondition", "PodSecurity", "Priority",
                                                "DefaultTolerationSeconds", "StorageObjectInUseProtection",
                                                "CertificateApproval", "CertificateSigning",
                                                "CertificateSubjectRestriction", "MutatingAdmissionWebhook",
                                                "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook",
                                                "ResourceQuota"]
    rows = {r["name"]: r for r in chain.order()}
    assert [r["name"] for r in chain.order()] == list(ALL_ORDERED_PLUGINS)
    assert rows["MutatingAdmissionPolicy"]["state"] == "inactive"
    assert rows["PodSecurity"]["state"] == "runs"
    assert rows["TaintNodesByCondition"]["state"] == "runs"
    assert rows["TaintNodesByCondition"]["phases"] == ["mutating"]
    assert rows["RuntimeClass"]["state"] == "not reconstructed"
    assert rows["AlwaysDeny"]["state"] == "off by default"


def test_a_new_node_is_tainted_not_ready_until_it_reports_ready(api):
    """TaintNodesByCondition (plugin/pkg/admission/nodetaint/admission.go): on create only, once."""
    code, node = admin(api).request("POST", "/api/v1/nodes", body={
        "metadata": {"name": "n1"}, "spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}})
    assert code == 201
    assert node["spec"]["taints"] == [{"key": "dedicated", "value": "db", "effect": "NoSchedule"},
                                      {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    step = next(s for s in api.traces.newest(1)[0]["steps"] if s["name"] == "TaintNodesByCondition")
    assert step["outcome"] == "mutated"
    # a Node that already has it (any value) keeps its own; an update adds nothing
    code, node = admin(api).request("POST", "/api/v1/nodes", body={
        "metadata": {"name": "n2"}, "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "value": "x",
                                                          "effect": "NoSchedule"}]}})
    assert node["spec"]["taints"] == [{"key": "node.kubernetes.io/not-ready", "value": "x", "effect": "NoSchedule"}]
    node["spec"]["taints"] = []
    code, node = admin(api).request("PUT", "/api/v1/nodes/n2", body=node)
    assert code == 200 and not node["spec"].get("taints")


def test_in_tree_plugins_trace_their_patch(api):
    code, _ = admin(api).request("POST", "/api/v1/namespaces/ns/persistentvolumeclaims", body={
        "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                              "resources": {"requests": {"storage": "1Gi"}}}})
    assert code == 201
    step = next(s for s in api.traces.newest(1)[0]["steps"] if s["name"] == "StorageObjectInUseProtection")
    assert step["outcome"] == "mutated"
    assert step["data"]["patch"] == [{"op": "add", "path": "/metadata/finalizers",
                                      "value": ["kubernetes.io/pvc-protection"]}]


# -- non-mutating cases (NewNonMutatingTestCases), for both kinds of webhooks ---------------------------

@pytest.mark.parametrize("kind", ["validating", "mutating"])
def test_no_match(api, hooks, kind):
    configure(api, kind, [hook("nomatch.example.com", "disallow", hooks,
                               rules=[{"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"],
                                       "resources": ["configmaps"]}])])
    code, _ = write_pod(api)
    assert code == 200 and hooks.calls == []


@pytest.mark.parametrize("kind", ["validating", "mutating"])
def test_match_and_allow_keeps_the_webhooks_audit_annotations(api, hooks, kind):
    configure(api, kind, [hook("allow.example.com", "allow", hooks)])
    code, _ = write_pod(api)
    assert code == 200
    assert annotations(api)["allow.example.com/key1"] == "value1"
    request = hooks.calls[-1][1]
    assert request["operation"] == "UPDATE" and request["userInfo"]["username"] == "admin"
    assert request["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert request["oldObject"]["metadata"]["name"] == "my-pod" and request["options"]["kind"] == "UpdateOptions"
    if kind == "mutating":
        assert annotations(api)["mutation.webhook.admission.k8s.io/round_0_index_0"] == \
            '{"configuration":"config","webhook":"allow.example.com","mutated":false}'


@pytest.mark.parametrize("kind", ["validating", "mutating"])
@pytest.mark.parametrize("path,message", [
    ("disallow", 'admission webhook "disallow.example.com" denied the request without explanation'),
    ("disallowReason", 'admission webhook "disallow.example.com" denied the request: you shall not pass')])
def test_match_and_disallow(api, hooks, kind, path, message):
    configure(api, kind, [hook("disallow.example.com", path, hooks)])
    code, body = write_pod(api)
    assert (code, body["message"]) == (403, message)


@pytest.mark.parametrize("expression", [{"key": "runlevel", "operator": "In", "values": ["1"]},
                                        {"key": "runlevel", "operator": "NotIn", "values": ["0"]}])
def test_namespace_selector_exempts_the_namespace(api, hooks, expression):
    configure(api, "validating", [hook("disallow.example.com", "disallow", hooks,
                                       namespaceSelector={"matchExpressions": [expression]})])
    assert write_pod(api)[0] == 200 and hooks.calls == []


@pytest.mark.parametrize("kind,prefix", [("validating", "failed-open.validating.webhook.admission.k8s.io/"),
                                         ("mutating", "failed-open.mutation.webhook.admission.k8s.io/")])
def test_fail_open(api, hooks, kind, prefix):
    configure(api, kind, [hook(f"internalerr-{x}.example.com", "internalErr", hooks, failurePolicy="Ignore")
                          for x in "abc"])
    assert write_pod(api)[0] == 200
    got = annotations(api)
    for i, x in enumerate("abc"):
        assert got[f"{prefix}round_0_index_{i}"] == f"internalerr-{x}.example.com"


@pytest.mark.parametrize("kind", ["validating", "mutating"])
def test_fail_closed(api, hooks, kind):
    configure(api, kind, [hook("internalerr.example.com", "internalErr", hooks)])      # failurePolicy defaults to Fail
    code, body = write_pod(api)
    assert code == 500
    assert body["message"] == ('Internal error occurred: failed calling webhook "internalerr.example.com": failed to '
                               'call webhook: an error on the server ("webhook internal server error") has prevented '
                               'the request from succeeding')


@pytest.mark.parametrize("policy,code", [("Ignore", 200), ("Fail", 500)])
def test_absent_response(api, hooks, policy, code):
    configure(api, "validating", [hook("nilresponse.example.com", "nilResponse", hooks, failurePolicy=policy)])
    got, body = write_pod(api)
    assert got == code
    if code == 500:
        assert "received invalid webhook response: webhook response was absent" in body["message"]
    else:
        assert annotations(api)["failed-open.validating.webhook.admission.k8s.io/round_0_index_0"] == \
            "nilresponse.example.com"


def test_skip_webhook_whose_object_selector_does_not_match(api, hooks):
    configure(api, "validating", [
        hook("allow.example.com", "allow", hooks),
        hook("shouldnotbecalled.example.com", "shouldNotBeCalled", hooks,
             objectSelector={"matchLabels": {"label": "nonexistent"}})])
    assert write_pod(api)[0] == 200
    assert [p for p, _ in hooks.calls] == ["allow"]


def test_a_down_webhook_fails_closed_with_upstreams_message(api, hooks):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    configure(api, "validating", [hook("down.example.com", {"url": f"https://127.0.0.1:{port}/x",
                                                            "caBundle": hooks.ca}, hooks)])
    code, body = write_pod(api)
    assert code == 500
    assert body["message"] == (f'Internal error occurred: failed calling webhook "down.example.com": failed to call '
                               f'webhook: Post "https://127.0.0.1:{port}/x?timeout=10s": dial tcp 127.0.0.1:{port}: '
                               'connect: connection refused')


def test_the_certificate_is_checked_against_ca_bundle(api, hooks, tmp_path):
    other = make_pki(tmp_path)
    configure(api, "validating", [hook("allow.example.com", {"url": f"https://127.0.0.1:{hooks.port}/allow",
                                                             "caBundle": base64.b64encode(
                                                                 (other / "ca.crt").read_bytes()).decode()}, hooks)])
    code, body = write_pod(api)
    assert code == 500 and "x509: certificate signed by unknown authority" in body["message"]


def test_warnings_come_back_as_warning_headers(api, hooks):
    configure(api, "validating", [hook("warn.example.com", "warn", hooks)])
    client = admin(api)
    client.create("v1", "configmaps", {"metadata": {"name": "cm"}}, "ns")
    response = api.handle(Request("DELETE", "/api/v1/namespaces/ns/configmaps/cm", user=client.user))
    assert response.code == 200 and response.warnings == ["mind the gap"]


def test_dry_run_refused_for_webhooks_with_side_effects(api, hooks):
    from labkit.apiserver.admission.webhook import MutatingWebhooks
    store = api.registry.store
    config = {"metadata": {"name": "legacy"}, "webhooks": [hook("some.example.com", "allow", hooks,
                                                                  sideEffects="Some")]}
    store.put("admissionregistration.k8s.io/mutatingwebhookconfigurations", "", "legacy", config)
    code, body = write_pod(api, dry_run=True)
    assert (code, body["message"]) == (400, 'admission webhook "some.example.com" does not support dry run')
    assert MutatingWebhooks.name == "MutatingAdmissionWebhook"


def test_a_slow_webhook_times_out_after_timeout_seconds(api, hooks):
    configure(api, "validating", [hook("slow.example.com", "slow", hooks, timeoutSeconds=1)])
    code, body = write_pod(api)
    assert code == 500
    assert body["message"] == ('Internal error occurred: failed calling webhook "slow.example.com": failed to call '
                               f'webhook: Post "https://127.0.0.1:{hooks.port}/slow?timeout=1s": context deadline '
                               'exceeded')


def test_the_webhook_is_told_the_time_left_of_the_call(api, hooks):
    """callHook: the webhook's timeoutSeconds, or the request's `?timeout=` when that is sooner,
    rounded up to whole seconds, goes to the webhook as `?timeout=`."""
    configure(api, "validating", [hook("allow.example.com", "allow", hooks, timeoutSeconds=7)])
    client = admin(api)
    pod = client.get("v1", "pods", "my-pod", "ns")
    hooks.urls.clear()
    assert client.request("PUT", "/api/v1/namespaces/ns/pods/my-pod", None, pod)[0] == 200
    assert client.request("PUT", "/api/v1/namespaces/ns/pods/my-pod", {"timeout": "2500ms"}, pod)[0] == 200
    assert client.request("PUT", "/api/v1/namespaces/ns/pods/my-pod", {"timeout": "30s"}, pod)[0] == 200
    assert hooks.urls == ["/allow?timeout=7s", "/allow?timeout=3s", "/allow?timeout=7s"]


@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
def test_a_webhook_call_ends_at_the_requests_deadline(api, hooks, policy):
    """The slow webhook (1.5 s) would answer within its 10 s, but the request asked for 1 s: the
    call is cut off at the request's deadline, the same instant WithTimeoutForNonLongRunningRequests
    answers 504 (filters/timeout.py), so the client gets the filter's Status whatever the
    failurePolicy (what the dispatcher then answers — a timeout even under Ignore — is dropped)."""
    import json

    configure(api, "mutating", [hook("slow.example.com", "slow", hooks, timeoutSeconds=10, failurePolicy=policy)])
    client = admin(api)
    pod = client.get("v1", "pods", "my-pod", "ns")
    code, body = client.request("PUT", "/api/v1/namespaces/ns/pods/my-pod", {"timeout": "1s"}, pod)
    status = json.loads(body)
    assert (code, status["reason"], status["message"]) == (
        504, "Timeout", "Timeout: request did not complete within the allotted timeout")
    assert [path for path, _ in hooks.calls] == ["slow"]


def test_subresources_and_deletes_reach_webhooks_as_upstream_sends_them(api, hooks):
    configure(api, "validating", [hook("allow.example.com", "allow", hooks, rules=[
        {"operations": ["UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"],
         "resources": ["pods/status", "configmaps"]}])])
    client = admin(api)
    pod = client.get("v1", "pods", "my-pod", "ns")
    pod["status"] = {"phase": "Running"}
    client.update("v1", "pods", pod, "ns")                           # the main resource: not matched
    pod = client.get("v1", "pods", "my-pod", "ns")
    pod["status"] = {"phase": "Running"}
    client.update("v1", "pods", pod, "ns", subresource="status")
    for name in ("a", "b"):
        client.create("v1", "configmaps", {"metadata": {"name": name, "labels": {"set": "x"}}}, "ns")
    client.request("DELETE", "/api/v1/namespaces/ns/configmaps/a")
    client.request("DELETE", "/api/v1/namespaces/ns/configmaps", {"labelSelector": "set=x"})
    status, delete, collection = [r for _, r in hooks.calls]
    assert (status["subResource"], status["requestSubResource"], status["object"]["status"]["phase"]) == \
        ("status", "status", "Running")
    assert delete["operation"] == "DELETE" and delete["name"] == "a" and "object" not in delete
    assert delete["oldObject"]["metadata"]["name"] == "a" and delete["options"]["kind"] == "DeleteOptions"
    # handlers/delete.go DeleteCollection: the attributes carry no name, the old object does
    assert "name" not in collection and collection["oldObject"]["metadata"]["name"] == "b"


def test_mutating_admission_policy_is_not_served(api):
    code, _ = admin(api).request("GET", "/apis/admissionregistration.k8s.io/v1beta1/mutatingadmissionpolicies")
    assert code == 404
    code, body = admin(api).request("GET", "/apis/admissionregistration.k8s.io")
    assert [v["version"] for v in body["versions"]] == ["v1"]


def test_each_plugin_leaves_a_step_in_the_trace(api, hooks):
    configure(api, "mutating", [hook("addlabel.example.com", "addLabel", hooks)])
    write_pod(api)
    steps = [(s["stage"], s["name"], s["outcome"], s["data"]["round"]) for s in api.traces.newest(1)[0]["steps"]
             if s["stage"].endswith("admission")]
    # the webhook changed the object: the mutating phase runs again (reinvocation.go), in-tree plugins
    # all, the webhook not (its reinvocationPolicy is Never)
    in_tree = ("NamespaceLifecycle", "LimitRanger", "Priority", "DefaultTolerationSeconds")
    assert steps == [*(("mutating-admission", name, "admitted", 0) for name in in_tree),
                     ("mutating-admission", "addlabel.example.com", "patched", 0),
                     *(("mutating-admission", name, "admitted", 1) for name in in_tree),
                     ("validating-admission", "LimitRanger", "admitted", 0),
                     ("validating-admission", "PodSecurity", "admitted", 0),
                     ("validating-admission", "Priority", "admitted", 0),
                     # the update runs the CSR plugins too (Handles(UPDATE)); they leave other resources alone
                     ("validating-admission", "CertificateApproval", "admitted", 0),
                     ("validating-admission", "CertificateSigning", "admitted", 0),
                     ("validating-admission", "ResourceQuota", "admitted", 0)]


@pytest.mark.parametrize("expression,policy,code,called", [
    ("object.metadata.name == 'my-pod'", "Fail", 200, True),
    ("object.metadata.name == 'other'", "Fail", 200, False),
    ("object.metadata.nosuchfield == 'x'", "Ignore", 200, False),
    ("object.metadata.nosuchfield == 'x'", "Fail", 403, False),
])
def test_match_conditions(api, hooks, expression, policy, code, called):
    """matchconditions.Matcher: false skips the webhook; an error follows failurePolicy (Fail: 403)."""
    configure(api, "validating", [hook("allow.example.com", "allow", hooks, failurePolicy=policy,
                                       matchConditions=[{"name": "only", "expression": expression}])])
    got, body = write_pod(api)
    assert got == code and bool(hooks.calls) is called
    if code == 403:
        assert body["message"] == ('pods "my-pod" is forbidden: expression \'object.metadata.nosuchfield == \'x\'\' '
                                   "resulted in error: no such key: nosuchfield")


# -- mutating cases (NewMutatingTestCases) -----------------------------------------------------------

def test_match_and_remove_label(api, hooks):
    configure(api, "mutating", [hook("removelabel.example.com", "removeLabel", hooks)])
    code, body = write_pod(api, {"remove": "me"})
    assert code == 200 and body["metadata"]["labels"] == {"pod.name": "my-pod"}
    got = annotations(api)
    assert got["removelabel.example.com/key1"] == "value1"
    assert got["mutation.webhook.admission.k8s.io/round_0_index_0"] == \
        '{"configuration":"config","webhook":"removelabel.example.com","mutated":true}'
    assert got["patch.webhook.admission.k8s.io/round_0_index_0"] == \
        '{"configuration":"config","webhook":"removelabel.example.com","patch":[{"op":"remove",' \
        '"path":"/metadata/labels/remove"}],"patchType":"JSONPatch"}'
    steps = [s for s in api.traces.newest(1)[0]["steps"] if s["name"] == "removelabel.example.com"]
    assert steps[0]["outcome"] == "patched" and steps[0]["data"]["patch"][0]["op"] == "remove"


def test_match_and_add_label(api, hooks):
    configure(api, "mutating", [hook("addlabel.example.com", "addLabel", hooks)])
    code, body = write_pod(api)
    assert body["metadata"]["labels"] == {"pod.name": "my-pod", "added": "test"}


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_match_and_invalid_patch(api, hooks, policy):
    """An undecodable patch is a failed call since v1.34 (kubernetes#131627, CHANGELOG-1.34
    alpha.1; mutating/dispatcher.go callAttrMutatingHook returns ErrCallingWebhook): failurePolicy
    Ignore lets the request go on, Fail answers the internal error that names the webhook."""
    configure(api, "mutating", [hook("invalidpatch.example.com", "invalidPatch", hooks, failurePolicy=policy)])
    code, body = write_pod(api)
    got = annotations(api)
    assert got["mutation.webhook.admission.k8s.io/round_0_index_0"] == \
        '{"configuration":"config","webhook":"invalidpatch.example.com","mutated":false}'
    if policy == "Fail":
        assert (code, body["message"]) == (500, 'Internal error occurred: failed calling webhook '
                                                '"invalidpatch.example.com": received undecodable patch in webhook '
                                                'response: unexpected end of JSON input')
    else:
        assert code == 200
        assert got["failed-open.mutation.webhook.admission.k8s.io/round_0_index_0"] == "invalidpatch.example.com"


@pytest.mark.parametrize("answer, message", [
    ("patchMissingParent", 'Internal error occurred: add operation does not apply: doc is missing path: '
                           '"/metadata/annotations/example.com~1owner": missing value'),
    ("patchTestFails", "Internal error occurred: testing value /metadata/labels/pod.name failed: test failed"),
    ("patchNotOperations", 'Internal error occurred: failed calling webhook "p.example.com": received undecodable '
                           'patch in webhook response: json: cannot unmarshal number into Go value of type '
                           'jsonpatch.Operation'),
])
def test_a_patch_that_does_not_apply_is_an_internal_error_with_the_librarys_words(api, hooks, answer, message):
    """mutating/dispatcher.go callAttrMutatingHook: patchObj.Apply's error as
    apierrors.NewInternalError(err), whatever the failurePolicy (it is not a failed call); a
    patch that does not decode into operations is a failed call (jsonpatch.DecodePatch)."""
    configure(api, "mutating", [hook("p.example.com", answer, hooks, failurePolicy="Ignore"
                                     if answer != "patchNotOperations" else "Fail")])
    code, body = write_pod(api)
    assert (code, body["message"]) == (500, message)


def test_a_patch_that_is_not_base64_fails_the_call(api, hooks):
    """The AdmissionReview is decoded into its Go type, whose response.patch is a []byte: Go's
    base64 error, as a failed call (failurePolicy Fail: an internal error)."""
    configure(api, "mutating", [hook("b64.example.com", "badBase64Patch", hooks)])
    code, body = write_pod(api)
    assert (code, body["message"]) == (500, 'Internal error occurred: failed calling webhook "b64.example.com": '
                                             "failed to call webhook: illegal base64 data at input byte 8")


@pytest.mark.parametrize("level, logged", [("Metadata", False), ("Request", True), ("RequestResponse", True)])
def test_the_patch_annotation_is_audited_at_request_level_and_above(api, hooks, tmp_path, level, logged):
    """webhookAnnotator.addPatchAnnotation: AddAnnotationWithLevel(..., LevelRequest), so a
    Metadata-level event has the mutation annotation but not the patch; before, labkit logged the
    patch at every level. The trace (labkit requests explain) keeps it whatever the level."""
    import yaml
    from labkit.apiserver import audit
    from labkit.apiserver.auditpolicy import Policy
    api.audit = audit.AuditLog(tmp_path / "audit.log")
    api.audit_policy = Policy.from_dict(yaml.safe_load(
        f"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: {level}\n"))
    configure(api, "mutating", [hook("removelabel.example.com", "removeLabel", hooks)])
    assert write_pod(api, {"remove": "me"})[0] == 200
    api.audit.close()
    event = [e for e in audit.read(tmp_path / "audit.log")
             if e["verb"] == "update" and e["stage"] == "ResponseComplete"][-1]
    assert '"mutated":true' in event["annotations"]["mutation.webhook.admission.k8s.io/round_0_index_0"]
    assert ("patch.webhook.admission.k8s.io/round_0_index_0" in event["annotations"]) is logged
    assert "patch.webhook.admission.k8s.io/round_0_index_0" in annotations(api)


def test_first_webhook_removes_labels_second_is_not_called(api, hooks):
    configure(api, "mutating", [
        hook("removelabel.example.com", "removeLabel", hooks, objectSelector={"matchLabels": {"remove": "me"}}),
        hook("shouldnotbecalled.example.com", "shouldNotBeCalled", hooks,
             objectSelector={"matchLabels": {"remove": "me"}})])
    hooks.calls.clear()
    code, body = write_pod(api, {"remove": "me"})
    # the old object still has no `remove` label and the new one lost it: the second is skipped
    assert code == 200 and body["metadata"]["labels"] == {"pod.name": "my-pod"}
    assert [p for p, _ in hooks.calls] == ["removeLabel"]


def test_reinvoke_if_needed(api, hooks):
    configure(api, "mutating", [hook("addlabel.example.com", "addLabel", hooks, reinvocationPolicy="IfNeeded"),
                                hook("removelabel.example.com", "removeLabel", hooks, reinvocationPolicy="IfNeeded")])
    hooks.calls.clear()
    code, body = write_pod(api, {"remove": "me"})
    assert code == 200 and body["metadata"]["labels"] == {"pod.name": "my-pod", "added": "test"}
    # round 0 both, round 1 only addLabel (called before removeLabel changed the object)
    assert [p for p, _ in hooks.calls] == ["addLabel", "removeLabel", "addLabel"]
    got = annotations(api)
    assert json.loads(got["mutation.webhook.admission.k8s.io/round_1_index_0"])["webhook"] == "addlabel.example.com"


# -- the configuration kinds -----------------------------------------------------------------------

def test_webhook_configuration_defaults_and_validation(api, hooks):
    client = admin(api)
    created = client.create(AR, "validatingwebhookconfigurations", {"metadata": {"name": "d"}, "webhooks": [
        {"name": "d.example.com", "clientConfig": {"service": {"name": "s", "namespace": "ns"}},
         "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
         "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
    w = created["webhooks"][0]
    assert (w["failurePolicy"], w["matchPolicy"], w["timeoutSeconds"], w["namespaceSelector"], w["objectSelector"],
            w["rules"][0]["scope"], w["clientConfig"]["service"]["port"]) == ("Fail", "Equivalent", 10, {}, {}, "*", 443)
    with pytest.raises(ApiError) as err:
        client.create(AR, "validatingwebhookconfigurations", {"metadata": {"name": "bad"}, "webhooks": [
            {"name": "bad", "clientConfig": {"url": "http://x"}, "rules": EVERYTHING, "sideEffects": "Some",
             "admissionReviewVersions": ["v1"], "timeoutSeconds": 31}]})
    message = err.value.message
    assert 'webhooks[0].name: Invalid value: "bad": should be a domain with at least three segments separated by dots' \
        in message
    assert 'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"' in message
    assert "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds" in message
    assert "webhooks[0].clientConfig.url: Invalid value: \"http://x\": 'https' is the only allowed URL scheme" in message


def test_webhooks_are_not_called_for_admission_configuration(api, hooks):
    configure(api, "validating", [hook("disallow.example.com", "disallow", hooks)])
    admin(api).create(AR, "validatingwebhookconfigurations", {"metadata": {"name": "second"},
                                                              "webhooks": [hook("x.example.com", "allow", hooks)]})
    assert hooks.calls == []


# -- ValidatingAdmissionPolicy ----------------------------------------------------------------------

def policy(api, name, validations, binding_actions=("Deny",), **spec):
    client = admin(api)
    rules = spec.pop("rules", [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                                "resources": ["deployments"]}])
    client.create(AR, "validatingadmissionpolicies", {"metadata": {"name": name}, "spec": {
        "matchConstraints": {"resourceRules": rules}, "validations": validations, **spec}})
    binding = {"policyName": name, "validationActions": list(binding_actions)}
    binding.update(spec.pop("binding", {}) if "binding" in spec else {})
    return client.create(AR, "validatingadmissionpolicybindings",
                         {"metadata": {"name": f"{name}-binding"}, "spec": binding})


def deployment(api, replicas=1, image="nginx:1.27", name="web"):
    return admin(api).request("POST", "/apis/apps/v1/namespaces/ns/deployments",
                              body=deployment_body(replicas, image, name))


def test_vap_denies_with_upstreams_message(api):
    policy(api, "demo-policy.example.com", [{"expression": "object.spec.replicas <= 5"}])
    assert deployment(api, 3)[0] == 201
    code, body = deployment(api, 6, name="big")
    assert code == 422 and body["reason"] == "Invalid"
    assert body["message"] == ('deployments.apps "big" is forbidden: ValidatingAdmissionPolicy '
                               "'demo-policy.example.com' with binding 'demo-policy.example.com-binding' denied "
                               "request: failed expression: object.spec.replicas <= 5")
    assert body["details"]["causes"] == [{"message": body["message"].split(" is forbidden: ", 1)[1]}]


def test_vap_message_expression_reason_and_params(api):
    client = admin(api)
    client.create("v1", "configmaps", {"metadata": {"name": "limits"}, "data": {"max": "2"}}, "ns")
    client.create(AR, "validatingadmissionpolicies", {"metadata": {"name": "max"}, "spec": {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"],
                                                "apiVersions": ["v1"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas <= int(params.data.max)", "reason": "Forbidden",
                         "messageExpression": "'object.spec.replicas must be no greater than ' + params.data.max"}]}})
    client.create(AR, "validatingadmissionpolicybindings", {"metadata": {"name": "max-binding"}, "spec": {
        "policyName": "max", "validationActions": ["Deny"],
        "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}})
    code, body = deployment(api, 3)
    assert code == 403 and body["message"].endswith("denied request: object.spec.replicas must be no greater than 2")


def test_vap_missing_params_follow_parameter_not_found_action(api):
    client = admin(api)
    client.create(AR, "validatingadmissionpolicies", {"metadata": {"name": "p"}, "spec": {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"],
                                                "apiVersions": ["v1"], "resources": ["deployments"]}]},
        "validations": [{"expression": "false"}]}})
    client.create(AR, "validatingadmissionpolicybindings", {"metadata": {"name": "b"}, "spec": {
        "policyName": "p", "validationActions": ["Deny"],
        "paramRef": {"name": "absent", "parameterNotFoundAction": "Deny"}}})
    code, body = deployment(api)
    assert code == 422 and body["message"].endswith(
        "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: no params found "
        "for policy binding with `Deny` parameterNotFoundAction")


def test_vap_warn_and_audit(api):
    policy(api, "warn", [{"expression": "object.spec.replicas <= 1", "message": "too many"}], ("Warn", "Audit"))
    client = admin(api)
    response = api.handle(Request("POST", "/apis/apps/v1/namespaces/ns/deployments", user=client.user,
                                  obj=json.loads(json.dumps(deployment_body(2)))))
    assert response.code == 201
    assert response.warnings == ["Validation failed for ValidatingAdmissionPolicy 'warn' with binding 'warn-binding': "
                                 "too many"]
    failure = json.loads(api.traces.newest(1)[0]["annotations"]["validation.policy.admission.k8s.io/validation_failure"])
    assert failure == [{"message": "too many", "policy": "warn", "binding": "warn-binding", "expressionIndex": 0,
                        "validationActions": ["Warn", "Audit"]}]


def test_vap_audit_annotations(api):
    """admission_test.go TestAuditAnnotations: `<policy>/<key>`, values of several bindings joined."""
    policy(api, "audited", [{"expression": "true"}], ("Audit",), auditAnnotations=[
        {"key": "replicas", "valueExpression": "'Deployment spec.replicas set to ' + string(object.spec.replicas)"}])
    assert deployment(api, 3)[0] == 201
    assert api.traces.newest(1)[0]["annotations"]["audited/replicas"] == "Deployment spec.replicas set to 3"


def test_vap_decisions_asked_again_are_the_same(api):
    """The same policy over the same data (a second binding, a second request alike) decides as it
    did the first time (validator.Validate's decisions are kept per spec and activation data): the
    same warning for each binding (in the order of their names), the audit annotation's value once, the same for the
    same request again; another object is evaluated afresh."""
    from labkit.apiserver.admission import policy as vap
    policy(api, "warned", [{"expression": "object.spec.replicas <= 1", "messageExpression": "'replicas ' + "
                            "string(object.spec.replicas)"}], ("Warn",), auditAnnotations=[
        {"key": "replicas", "valueExpression": "'set to ' + string(object.spec.replicas)"}])
    admin(api).create(AR, "validatingadmissionpolicybindings",
                      {"metadata": {"name": "warned-again"}, "spec": {"policyName": "warned",
                                                                       "validationActions": ["Warn"]}})
    client = admin(api)
    for _ in ("first", "again"):
        response = api.handle(Request("POST", "/apis/apps/v1/namespaces/ns/deployments", user=client.user,
                                      obj=deployment_body(3, name="same")))
        assert response.code == 201
        assert response.warnings == [f"Validation failed for ValidatingAdmissionPolicy 'warned' with binding '{b}': "
                                     "replicas 3" for b in ("warned-again", "warned-binding")]
        assert api.traces.newest(1)[0]["annotations"]["warned/replicas"] == "set to 3"
        client.delete("apps/v1", "deployments", "same", "ns")
    kept = len(vap._DECISIONS)
    assert deployment(api, 2, name="other")[0] == 201
    assert api.traces.newest(1)[0]["annotations"]["warned/replicas"] == "set to 2"
    assert len(vap._DECISIONS) == min(kept + 1, vap._DECISIONS_MAX)


def deployment_body(replicas, image="nginx:1.27", name="web"):
    return {"metadata": {"name": name}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": image}]}}}}


@pytest.mark.parametrize("failure_policy,code", [("Fail", 422), ("Ignore", 201)])
def test_vap_runtime_errors_follow_failure_policy(api, failure_policy, code):
    policy(api, "err", [{"expression": "object.spec.nosuchfield == 1"}], failurePolicy=failure_policy)
    got, body = deployment(api)
    assert got == code
    if code == 422:
        assert body["message"].endswith("denied request: expression 'object.spec.nosuchfield == 1' resulted in "
                                        "error: no such key: nosuchfield")


def test_vap_docs_examples_variables_and_namespace_object(api):
    """kubernetes.io ValidatingAdmissionPolicy page: variables, namespaceObject, messageExpression."""
    admin(api).patch("v1", "namespaces", "ns", {"metadata": {"labels": {"environment": "test"}}})
    policy(api, "image-matches-namespace-environment.policy.example.com", [{
        "expression": "variables.exempt || variables.containers.all(c, c.image.startsWith(variables.environment + '.'))",
        "messageExpression": "'only ' + variables.environment + ' images are allowed in namespace ' + "
                             "namespaceObject.metadata.name"}], variables=[
        {"name": "environment", "expression": "'environment' in namespaceObject.metadata.labels ? "
                                              "namespaceObject.metadata.labels['environment'] : 'prod'"},
        {"name": "exempt", "expression": "has(object.metadata.labels) && 'exempt' in object.metadata.labels && "
                                         "object.metadata.labels['exempt'] == 'true'"},
        {"name": "containers", "expression": "object.spec.template.spec.containers"}])
    code, body = deployment(api, image="nginx:1.27")
    assert code == 422 and body["message"].endswith("denied request: only test images are allowed in namespace ns")
    assert deployment(api, image="test.example.com/nginx:1.27", name="ok")[0] == 201


@pytest.mark.parametrize("expression", [
    "object.spec.containers.all(c, c.image.contains(':'))",
    "object.spec.containers.all(c, c.image.matches('^[^:@]+(:[^:@/]+)$'))"])
def test_vap_rejects_images_without_a_tag(api, expression):
    policy(api, "require-tag", [{"expression": expression, "message": "every image needs a tag"}],
           rules=[{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}])
    client = admin(api)
    code, body = client.request("POST", "/api/v1/namespaces/ns/pods", body={
        "metadata": {"name": "untagged"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    assert code == 422 and body["message"] == (
        "pods \"untagged\" is forbidden: ValidatingAdmissionPolicy 'require-tag' with binding 'require-tag-binding' "
        "denied request: every image needs a tag")
    assert client.request("POST", "/api/v1/namespaces/ns/pods", body={
        "metadata": {"name": "tagged"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}})[0] == 201


def test_vap_match_conditions_and_request_variables(api):
    policy(api, "demo", [{"expression": "!object.metadata.name.contains('demo') || object.metadata.namespace == 'demo'"}],
           rules=[{"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}],
           matchConditions=[
               {"name": "exclude-leases", "expression": '!(request.resource.group == "coordination.k8s.io" && '
                                                        'request.resource.resource == "leases")'},
               {"name": "exclude-kubelet-requests", "expression": '!("system:nodes" in request.userInfo.groups)'}])
    client = admin(api)
    assert client.request("POST", "/api/v1/namespaces/ns/configmaps", body={"metadata": {"name": "demo-x"}})[0] == 422
    kubelet = LocalClient(api, "system:node:n1", ["system:nodes", "system:masters", "system:authenticated"])
    assert kubelet.request("POST", "/api/v1/namespaces/ns/configmaps", body={"metadata": {"name": "demo-y"}})[0] == 201


@pytest.mark.parametrize("expression,expected", [
    ("'Hello'.lowerAscii() == 'hello'", True), ("'a,b'.split(',') == ['a', 'b']", True),
    ("'abc'.indexOf('c') == 2", True), ("[1, 2, 3].sum() == 6", True), ("[1, 2].isSorted()", True),
    ("'abc 123'.find('[0-9]+') == '123'", True), ("url('https://example.com:8080/p').getHostname() == 'example.com'", True),
    ("quantity('1Gi').isGreaterThan(quantity('100Mi'))", True), ("'  x '.trim() == 'x'", True),
    ("['a', 'b'].join('-') == 'a-b'", True), ("'abcdef'.substring(1, 3) == 'bc'", True)])
def test_kubernetes_cel_library(expression, expected):
    from labkit.apiserver.admission import cel
    assert cel.is_true(cel.evaluate(expression, {})) is expected


def test_attributes_user_info():
    from labkit.apiserver.request import User
    attrs = Attributes("CREATE", None, "ns", "x", {}, user=User("alice", ["dev", "system:authenticated"], "u1"))
    assert attrs.user_info() == {"username": "alice", "uid": "u1", "groups": ["dev", "system:authenticated"]}


def test_vap_namespace_selector_error_only_where_its_rules_match(api):
    """matching.go Matcher.Matches: a namespaceSelector that cannot be evaluated (the request's
    namespace is not found) is an error only for a request the policy's rules match. A policy about
    Pods, selecting namespaces by label, does not stand in the way of deleting a namespace."""
    from labkit.apiserver.admission.policy import resources_match
    from labkit.requests.reconstruct import pod_attributes
    selector = {"namespaceSelector": {"matchLabels": {"team": "a"}}}
    rules = lambda resource: [{"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"],  # noqa: E731
                               "resources": [resource]}]
    ghost = pod_attributes("ghost", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert resources_match(api.registry, {**selector, "resourceRules": rules("deployments")}, ghost) is None
    with pytest.raises(ApiError) as info:
        resources_match(api.registry, {**selector, "resourceRules": rules("pods")}, ghost)
    assert info.value.message == 'namespaces "ghost" not found'
    client = admin(api)
    client.create(AR, "validatingadmissionpolicies", {"metadata": {"name": "pods-of-team-a"}, "spec": {
        "matchConstraints": {"namespaceSelector": {"matchLabels": {"team": "a"}},
                             "resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                                                "apiVersions": ["v1"], "resources": ["pods"]}]},
        "validations": [{"expression": "false", "message": "no"}]}})
    client.create(AR, "validatingadmissionpolicybindings", {"metadata": {"name": "pods-of-team-a"}, "spec": {
        "policyName": "pods-of-team-a", "validationActions": ["Deny"]}})
    client.create("v1", "namespaces", {"metadata": {"name": "short-lived"}})
    code, body = client.request("DELETE", "/api/v1/namespaces/short-lived")
    assert code == 200, body


def test_vap_on_namespace_deletion_selects_the_namespace_itself(api):
    """A request about a namespace (its update, deletion) carries the namespace's own name as its
    namespace (handlers/namer.go ContextBasedNaming.Name: requestInfo.Namespace, which for
    /api/v1/namespaces/NAME is NAME), and namespace.Matcher.GetNamespaceLabels reads a namespace
    being deleted from the store: a namespaceSelector selects the namespace itself."""
    client = admin(api)
    client.create(AR, "validatingadmissionpolicies", {"metadata": {"name": "keep-team-a"}, "spec": {
        "matchConstraints": {"namespaceSelector": {"matchLabels": {"team": "a"}},
                             "resourceRules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"],
                                                "resources": ["namespaces"]}]},
        "validations": [{"expression": "request.namespace != oldObject.metadata.name", "message": "team a stays"}]}})
    client.create(AR, "validatingadmissionpolicybindings", {"metadata": {"name": "keep-team-a"}, "spec": {
        "policyName": "keep-team-a", "validationActions": ["Deny"]}})
    client.create("v1", "namespaces", {"metadata": {"name": "team-a", "labels": {"team": "a"}}})
    client.create("v1", "namespaces", {"metadata": {"name": "team-b", "labels": {"team": "b"}}})
    code, body = client.request("DELETE", "/api/v1/namespaces/team-a")
    assert code == 422 and body["message"].endswith("denied request: team a stays"), body
    assert client.request("DELETE", "/api/v1/namespaces/team-b")[0] == 200
