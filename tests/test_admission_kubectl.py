"""Admission seen through real kubectl: a mutating webhook behind a Service, written here as a
real HTTPS server on loopback with a certificate from the lab's CA; a denial with upstream's
message; a down webhook with failurePolicy Fail blocking pod creation and Ignore letting it
through; a ValidatingAdmissionPolicy rejecting an image without a tag."""

from __future__ import annotations

import base64
import functools
import json
import shutil
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import support
from support import embedded_server

# the in-process API server (support.embedded_server) and a webhook on loopback: nothing on the host
pytestmark = [pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
              pytest.mark.host_free]


def _patch(ops):
    return base64.b64encode(json.dumps(ops).encode()).decode()


class LabelWebhook:
    """/mutate adds the label `injected: "true"`; /validate refuses pods named `bad`."""

    def __init__(self, pki_dir, work):
        subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", "hook.key", "-out", "hook.csr", "-subj", "/CN=hooks.default.svc"],
                       cwd=work, check=True, capture_output=True)
        (work / "ext.cnf").write_text("subjectAltName=DNS:hooks.default.svc,IP:127.0.0.1\n"
                                      "extendedKeyUsage=serverAuth\n")
        subprocess.run(["openssl", "x509", "-req", "-in", "hook.csr", "-CA", str(pki_dir / "ca.crt"),
                        "-CAkey", str(pki_dir / "ca.key"), "-CAcreateserial", "-CAserial", str(work / "ca.srl"),
                        "-out", "hook.crt", "-days", "2", "-extfile", "ext.cnf"],
                       cwd=work, check=True, capture_output=True)
        self.requests: list[dict] = []
        self.host_headers: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = review["request"]
                outer.requests.append(request)
                outer.host_headers.append(self.headers["Host"])
                response = {"uid": request["uid"], "allowed": True}
                if self.path.startswith("/mutate"):
                    labels = (request["object"].get("metadata") or {}).get("labels")
                    ops = [{"op": "add", "path": "/metadata/labels", "value": {}}] if labels is None else []
                    ops.append({"op": "add", "path": "/metadata/labels/injected", "value": "true"})
                    response.update(patchType="JSONPatch", patch=_patch(ops))
                elif request["name"] == "bad":
                    response.update(allowed=False, status={"code": 403, "message": "no pods named bad"})
                data = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": response}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(work / "hook.crt", work / "hook.key")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home")) as srv:
        srv.hook = LabelWebhook(srv.pki, tmp_path_factory.mktemp("hook"))
        yield srv
        srv.hook.close()


kubectl = functools.partial(support.kubectl, check=True)


def apply(server, doc: dict, check: bool = True):
    return kubectl(server, "apply", "-f", "-", input=json.dumps(doc), check=check)


def pod(name: str, image: str = "nginx:1.27") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": image}]}}


def ca_bundle(server) -> str:
    return base64.b64encode((server.pki / "ca.crt").read_bytes()).decode()


def webhook(name, client_config, failure_policy="Fail"):
    return {"name": name, "clientConfig": client_config, "failurePolicy": failure_policy, "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 5,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}


def test_webhooks_behind_a_service(server):
    """A Service without selector and an EndpointSlice naming the webhook's loopback port: the
    server calls https://hooks.default.svc:443/... at that endpoint and checks the certificate."""
    apply(server, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks", "namespace": "default"},
                   "spec": {"ports": [{"port": 443, "targetPort": server.hook.port}]}})
    apply(server, {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                   "metadata": {"name": "hooks-1", "namespace": "default",
                                "labels": {"kubernetes.io/service-name": "hooks"}},
                   "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
                   "ports": [{"port": server.hook.port}]})
    service = {"name": "hooks", "namespace": "default"}
    apply(server, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                   "metadata": {"name": "inject"}, "webhooks": [webhook(
                       "inject.labkit.example.com", {"service": {**service, "path": "/mutate"},
                                                     "caBundle": ca_bundle(server)})]})
    apply(server, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                   "metadata": {"name": "deny"}, "webhooks": [webhook(
                       "deny.labkit.example.com", {"service": {**service, "path": "/validate"},
                                                   "caBundle": ca_bundle(server)})]})
    try:
        apply(server, pod("web"))
        labels = json.loads(kubectl(server, "get", "pod", "web", "-o", "jsonpath={.metadata.labels}").stdout)
        assert labels == {"injected": "true"}
        request = server.hook.requests[0]
        assert request["userInfo"]["username"] == "labkit-admin" and request["operation"] == "CREATE"
        assert request["options"]["kind"] == "CreateOptions"
        assert server.hook.host_headers[0] == "hooks.default.svc:443"
        result = apply(server, pod("bad"), check=False)
        assert result.returncode == 1
        # the webhook's Status has a code and no reason: ToStatusErr keeps it so, and kubectl names no reason
        assert result.stderr.strip() == ('Error from server: error when creating "STDIN": admission webhook '
                                         '"deny.labkit.example.com" denied the request: no pods named bad')
    finally:
        kubectl(server, "delete", "mutatingwebhookconfiguration", "inject", "--ignore-not-found")
        kubectl(server, "delete", "validatingwebhookconfiguration", "deny", "--ignore-not-found")


def test_a_service_without_endpoints_is_a_call_failure(server):
    apply(server, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nobody", "namespace": "default"},
                   "spec": {"ports": [{"port": 443}]}})
    apply(server, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                   "metadata": {"name": "nobody"}, "webhooks": [webhook(
                       "nobody.labkit.example.com", {"service": {"name": "nobody", "namespace": "default",
                                                                 "path": "/validate"}})]})
    try:
        result = apply(server, pod("nobody"), check=False)
        assert result.stderr.strip() == (
            'Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed calling '
            'webhook "nobody.labkit.example.com": failed to call webhook: Post '
            '"https://nobody.default.svc:443/validate?timeout=5s": no endpoints available for service "nobody"')
    finally:
        kubectl(server, "delete", "validatingwebhookconfiguration", "nobody", "--ignore-not-found")


def test_a_down_webhook_blocks_pods_until_its_failure_policy_is_ignore(server):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = f"https://127.0.0.1:{port}/validate"
    config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
              "metadata": {"name": "down"},
              "webhooks": [webhook("down.labkit.example.com", {"url": url, "caBundle": ca_bundle(server)})]}
    apply(server, config)
    try:
        result = apply(server, pod("blocked"), check=False)
        assert result.stderr.strip() == (
            'Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed calling '
            f'webhook "down.labkit.example.com": failed to call webhook: Post "{url}?timeout=5s": dial tcp '
            f'127.0.0.1:{port}: connect: connection refused')
        config["webhooks"][0]["failurePolicy"] = "Ignore"
        apply(server, config)
        apply(server, pod("through"))
        assert kubectl(server, "get", "pod", "through", "-o", "name").stdout.strip() == "pod/through"
    finally:
        kubectl(server, "delete", "validatingwebhookconfiguration", "down", "--ignore-not-found")


def test_the_plugin_order_is_served(server):
    plugins = server.client().check(*server.client().request("GET", "/labkit/v1/admission"))["plugins"]
    running = [p["name"] for p in plugins if p["state"] == "runs"]
    # v1.34.1's AllOrderedPlugins (pkg/kubeapiserver/options/plugins.go), the ones labkit runs
    assert running == ["NamespaceLifecycle", "LimitRanger", "ServiceAccount", "TaintNodesByCondition",
                       "PodSecurity", "Priority", "DefaultTolerationSeconds",
                       "StorageObjectInUseProtection", "CertificateApproval", "CertificateSigning",
                       "CertificateSubjectRestriction", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy",
                       "ValidatingAdmissionWebhook", "ResourceQuota"]


def test_a_policy_rejects_images_without_a_tag(server):
    apply(server, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                   "metadata": {"name": "require-image-tag"}, "spec": {
                       "matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                                                               "apiVersions": ["v1"], "resources": ["pods"]}]},
                       "validations": [{"expression": "object.spec.containers.all(c, c.image.matches(':[^/]+$'))",
                                        "message": "every container image needs a tag"}]}})
    apply(server, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                   "metadata": {"name": "require-image-tag"},
                   "spec": {"policyName": "require-image-tag", "validationActions": ["Deny"]}})
    try:
        result = apply(server, pod("untagged", "nginx"), check=False)
        assert result.stderr.strip() == (
            'The pods "untagged" is invalid: : ValidatingAdmissionPolicy \'require-image-tag\' with binding '
            "'require-image-tag' denied request: every container image needs a tag")
        apply(server, pod("tagged", "registry.example.com:5000/nginx:1.27"))
    finally:
        kubectl(server, "delete", "validatingadmissionpolicybinding", "require-image-tag", "--ignore-not-found")
        kubectl(server, "delete", "validatingadmissionpolicy", "require-image-tag", "--ignore-not-found")


def test_optional_fields_in_a_policy_and_one_that_does_not_compile(server):
    """`object.spec.?initContainers.orValue([])` works (OptionalTypes, on since 1.28); a policy with
    an invalid regular expression literal is refused by kubectl apply with upstream's 422."""
    vap = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": "init-tags"}, "spec": {
               "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""],
                                                       "apiVersions": ["v1"], "resources": ["pods"]}]},
               "matchConditions": [{"name": "has-init", "expression": "object.spec.?initContainers.hasValue()"}],
               "validations": [{"expression": "object.spec.?initContainers.orValue([]).all(c, c.image.contains(':'))",
                                "message": "init containers need a tag"}]}}
    apply(server, vap)
    apply(server, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                   "metadata": {"name": "init-tags"}, "spec": {"policyName": "init-tags", "validationActions": ["Deny"]}})
    try:
        apply(server, pod("no-init"))
        with_init = pod("untagged-init")
        with_init["spec"]["initContainers"] = [{"name": "i", "image": "busybox"}]
        result = apply(server, with_init, check=False)
        assert result.stderr.strip() == (
            'The pods "untagged-init" is invalid: : ValidatingAdmissionPolicy \'init-tags\' with binding '
            "'init-tags' denied request: init containers need a tag")
        broken = {**vap, "metadata": {"name": "bad-regex"}}
        broken["spec"] = {**vap["spec"], "validations": [{"expression": "object.metadata.name.matches('[')"}]}
        result = apply(server, broken, check=False)
        assert result.returncode != 0
        assert result.stderr.strip() == (
            'The ValidatingAdmissionPolicy "bad-regex" is invalid: spec.validations[0].expression: Invalid value: '
            '"object.metadata.name.matches(\'[\')": compilation failed: ERROR: <input>:1:30: invalid matches '
            "argument\n | object.metadata.name.matches('[')\n | .............................^")
    finally:
        kubectl(server, "delete", "validatingadmissionpolicybinding", "init-tags", "--ignore-not-found")
        kubectl(server, "delete", "validatingadmissionpolicy", "init-tags", "--ignore-not-found")


def test_pods_get_their_service_account_and_token_volume(server):
    """The serviceaccount controller and root-ca-cert-publisher fill a new namespace; the
    ServiceAccount plugin gives each Pod `default` and the kube-api-access-<5> projected volume
    (plugin/pkg/admission/serviceaccount/admission.go), as `kubectl get pod -o yaml` shows."""
    import yaml
    kubectl(server, "create", "namespace", "sa-demo")
    # both objects by type/name (`get sa default cm` would ask for two ServiceAccounts, `default`
    # and `cm`, and wait out the whole bound)
    assert support.wait_until(lambda: kubectl(server, "get", "serviceaccount/default", "configmap/kube-root-ca.crt",
                                              "-n", "sa-demo", check=False).returncode == 0, timeout=20)
    assert "kube-root-ca.crt" in kubectl(server, "get", "configmap", "kube-root-ca.crt", "-n", "sa-demo").stdout
    kubectl(server, "run", "web", "-n", "sa-demo", "--image=nginx:1.27", "--restart=Never")
    pod = yaml.safe_load(kubectl(server, "get", "pod", "web", "-n", "sa-demo", "-o", "yaml").stdout)
    spec = pod["spec"]
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == ("default", "default")
    [volume] = spec["volumes"]
    assert volume["name"].startswith("kube-api-access-") and len(volume["name"]) == len("kube-api-access-") + 5
    assert volume["projected"]["defaultMode"] == 420
    assert [next(iter(s)) for s in volume["projected"]["sources"]] == ["serviceAccountToken", "configMap",
                                                                      "downwardAPI"]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": volume["name"], "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
    off = kubectl(server, "run", "quiet", "-n", "sa-demo", "--image=nginx:1.27", "--restart=Never",
                  "--overrides", '{"spec": {"automountServiceAccountToken": false}}', "-o", "yaml")
    assert "volumes" not in yaml.safe_load(off.stdout)["spec"]
    ghost = kubectl(server, "run", "ghost", "-n", "sa-demo", "--image=nginx:1.27", "--restart=Never",
                    "--overrides", '{"spec": {"serviceAccountName": "ghost"}}', check=False)
    assert ghost.stderr.strip() == ('Error from server (Forbidden): pods "ghost" is forbidden: error looking up '
                                    'service account sa-demo/ghost: serviceaccount "ghost" not found')
