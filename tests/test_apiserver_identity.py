"""Who a request is, over real HTTPS with real kubectl and the `kubernetes` client: client
certificates (and expired or foreign ones: 401), `kubectl create token` and requests with the
token, the CertificateSigningRequest flow with openssl (the way a student makes user alice), the
401 body and its failed-authentication audit event, and the audit policy's levels and stages."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest
from kubernetes import client as k8s, config as k8s_config

from labkit.apiserver import audit, certificates, users
from labkit.apiserver.server import EmbeddedServer
from support import host_lock, wait_until

UNAUTHORIZED = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized",'
                b'"reason":"Unauthorized","code":401}\n')


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with host_lock(False):
        s = EmbeddedServer(tmp_path_factory.mktemp("identity") / "apiserver", controllers=["csrsigning", "serviceaccount"]).start()
    admin = s.client()
    admin.create("v1", "serviceaccounts", {"metadata": {"name": "robot"}}, "default")
    yield s
    with host_lock(False):
        s.stop()


def kubectl(kubeconfig, *args, input: str | None = None, check: bool = True):
    result = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                            input=input, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def whoami(kubeconfig) -> dict:
    return json.loads(kubectl(kubeconfig, "auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]


def events(server, predicate) -> list[dict]:
    return [e for e in audit.read(server.state_dir / "audit.log") if predicate(e)]


def trace(server, audit_id: str) -> dict:
    client = server.client()
    return client.check(*client.request("GET", f"/labkit/v1/traces/{audit_id}"))


def test_client_certificate_kubeconfig_is_the_user(server, tmp_path):
    cert, key = users.client_certificate(server.pki, "alice", ["dev", "qa"])
    kubeconfig = users.write_kubeconfig(tmp_path / "alice", server.url, server.pki, "alice", certificate=cert, key=key)
    me = whoami(kubeconfig)
    assert (me["username"], me["groups"]) == ("alice", ["dev", "qa", "system:authenticated"])
    assert me["extra"]["authentication.kubernetes.io/credential-id"][0].startswith("X509SHA256=")
    # RBAC decides what alice may do: nothing yet, then what a Role bound to her allows
    refused = kubectl(kubeconfig, "create", "configmap", "from-alice", check=False)
    assert 'User "alice" cannot create resource "configmaps"' in refused.stderr
    kubectl(server.kubeconfig, "create", "role", "configmap-writer", "--verb=create", "--resource=configmaps")
    kubectl(server.kubeconfig, "create", "rolebinding", "alice-writes", "--role=configmap-writer", "--user=alice")
    kubectl(kubeconfig, "create", "configmap", "from-alice")
    created = events(server, lambda e: e["verb"] == "create" and e.get("objectRef", {}).get("name") == "from-alice"
                     and e["responseStatus"]["code"] == 201)
    assert created[0]["user"]["username"] == "alice" and created[0]["requestObject"]["metadata"]["name"] == "from-alice"
    steps = [s for s in trace(server, created[0]["auditID"])["steps"] if s["stage"] == "authentication"]
    assert [(s["name"], s["outcome"]) for s in steps] == [("x509", "authenticated")]


@pytest.mark.parametrize("case", ["expired", "foreign"])
def test_expired_or_foreign_certificates_are_401_not_anonymous(server, tmp_path, case):
    if case == "expired":
        cert, key = certificates.client_certificate(server.pki, "alice", ["dev"], ttl=3600,
                                                    now=datetime.now(timezone.utc) - timedelta(days=2))
    else:
        other = tmp_path / "other-pki"
        from labkit.apiserver import certs
        certs.ensure_certificates(other)
        cert, key = users.client_certificate(other, "alice", ["system:masters"])
    kubeconfig = users.write_kubeconfig(tmp_path / "kc", server.url, server.pki, "alice", certificate=cert, key=key)
    result = kubectl(kubeconfig, "get", "configmaps", check=False)
    assert result.returncode == 1 and "error: You must be logged in to the server" in result.stderr
    # (kubectl's first request is refused: discovery, or the list when discovery is cached)
    failed = events(server, lambda e: e["stage"] == "ResponseStarted" and e["responseStatus"]["code"] == 401)
    assert failed[-1]["user"] == {} and failed[-1]["verb"] in ("get", "list")
    assert failed[-1]["requestURI"].startswith("/api")
    assert failed[-1]["responseStatus"] == {"metadata": {}, "message": "Authentication failed, attempted: x509",
                                            "code": 401}
    reason = {"expired": "x509: certificate has expired or is not yet valid",
              "foreign": "x509: certificate signed by unknown authority"}[case]
    steps = trace(server, failed[-1]["auditID"])["steps"]
    assert reason in steps[0]["detail"] and steps[-2]["outcome"] == "unauthenticated"


def test_401_body_and_anonymous(server):
    context = ssl.create_default_context(cafile=str(server.pki / "ca.crt"))
    request = urllib.request.Request(server.url + "/api/v1/namespaces/default/pods",
                                     headers={"Authorization": "Bearer not-a-token"})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(request, context=context)
    assert exc.value.code == 401 and exc.value.read() == UNAUTHORIZED
    failed = events(server, lambda e: e["responseStatus"].get("message") == "Authentication failed, attempted: bearer")
    assert failed[-1]["objectRef"] == {"resource": "pods", "namespace": "default", "apiVersion": "v1"}
    # no credentials at all: system:anonymous, which may read /version (system:public-info-viewer)
    with urllib.request.urlopen(server.url + "/version", context=context) as answer:
        assert answer.status == 200
    seen = events(server, lambda e: e["requestURI"] == "/version" and e["user"].get("username") == "system:anonymous")
    assert seen[-1]["user"]["groups"] == ["system:unauthenticated"]


def test_kubectl_create_token_and_requests_with_it(server, tmp_path):
    token = kubectl(server.kubeconfig, "create", "token", "robot").stdout.strip()
    kubeconfig = users.write_kubeconfig(tmp_path / "robot", server.url, server.pki, "robot", token=token)
    me = whoami(kubeconfig)
    assert me["username"] == "system:serviceaccount:default:robot"
    assert me["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert me["extra"]["authentication.kubernetes.io/credential-id"] == [f"JTI={claims['jti']}"]
    assert claims["exp"] - claims["iat"] == 3600 and claims["aud"] == ["https://kubernetes.default.svc.cluster.local"]
    issued = events(server, lambda e: e.get("objectRef", {}).get("subresource") == "token")
    assert issued[-1]["annotations"]["authentication.kubernetes.io/issued-credential-id"] == f"JTI={claims['jti']}"
    # the kubernetes client with the same token
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(str(kubeconfig), client_configuration=configuration)
    with k8s.ApiClient(configuration) as api:
        who = k8s.AuthenticationV1Api(api).create_self_subject_review(k8s.V1SelfSubjectReview()).status.user_info
        assert who.username == "system:serviceaccount:default:robot"
    # upstream's limits and the audience
    short = kubectl(server.kubeconfig, "create", "token", "robot", "--duration=1m", check=False)
    assert short.stderr.strip() == ('error: failed to create token: TokenRequest.authentication.k8s.io "" is invalid: '
                                    "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than "
                                    "10 minutes")
    vault = kubectl(server.kubeconfig, "create", "token", "robot", "--audience=vault", "--duration=2h").stdout.strip()
    kubeconfig = users.write_kubeconfig(tmp_path / "vault", server.url, server.pki, "robot", token=vault)
    assert "You must be logged in" in kubectl(kubeconfig, "get", "pods", check=False).stderr


def test_bound_tokens_end_with_their_pod(server, tmp_path):
    admin = server.client()
    admin.create("v1", "pods", {"metadata": {"name": "runner"}, "spec": {
        "serviceAccountName": "robot", "containers": [{"name": "c", "image": "busybox"}]}}, "default")
    admin.create("v1", "pods", {"metadata": {"name": "stranger"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}]}}, "default")
    wrong = kubectl(server.kubeconfig, "create", "token", "robot", "--bound-object-kind=Pod",
                    "--bound-object-name=stranger", check=False)
    assert wrong.stderr.strip() == ('error: failed to create token: cannot bind token for serviceaccount "robot" to '
                                    "pod running with different serviceaccount name.")
    def bound_token():
        return kubectl(server.kubeconfig, "create", "token", "robot", "--bound-object-kind=Pod",
                       "--bound-object-name=runner").stdout.strip()

    used, unused = bound_token(), bound_token()
    kubeconfig = users.write_kubeconfig(tmp_path / "bound", server.url, server.pki, "robot", token=used)
    me = whoami(kubeconfig)
    uid = admin.get("v1", "pods", "runner", "default")["metadata"]["uid"]
    assert me["extra"]["authentication.kubernetes.io/pod-name"] == ["runner"]
    assert me["extra"]["authentication.kubernetes.io/pod-uid"] == [uid]
    admin.delete("v1", "pods", "runner", "default", {"gracePeriodSeconds": 0})
    assert wait_until(lambda: not admin.list("v1", "pods", "default", field_selector="metadata.name=runner")[0])
    # a token checked less than 10 s ago is taken from the token cache; a fresh one is checked
    assert whoami(kubeconfig)["username"] == "system:serviceaccount:default:robot"
    kubeconfig = users.write_kubeconfig(tmp_path / "unused", server.url, server.pki, "robot", token=unused)
    assert "You must be logged in" in kubectl(kubeconfig, "get", "pods", check=False).stderr
    failed = events(server, lambda e: e["stage"] == "ResponseStarted" and e["responseStatus"]["code"] == 401)
    steps = trace(server, failed[-1]["auditID"])["steps"]
    assert "service account token has been invalidated" in steps[0]["detail"]


def test_certificate_signing_request_flow_with_openssl(server, tmp_path):
    """openssl key and CSR → CertificateSigningRequest → approve → .status.certificate →
    kubectl config set-credentials → requests as alice."""
    def run(*argv):
        subprocess.run(argv, cwd=tmp_path, check=True, capture_output=True, timeout=60)

    run("openssl", "genrsa", "-out", "alice.key", "2048")
    run("openssl", "req", "-new", "-key", "alice.key", "-out", "alice.csr", "-subj", "/CN=alice/O=dev")
    request = base64.b64encode((tmp_path / "alice.csr").read_bytes()).decode()
    manifest = (f"apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: alice\n"
                f"spec:\n  request: {request}\n  signerName: kubernetes.io/kube-apiserver-client\n"
                f"  expirationSeconds: 86400\n  usages: [client auth]\n")
    kubectl(server.kubeconfig, "apply", "-f", "-", input=manifest)
    csr = server.client().get("certificates.k8s.io/v1", "certificatesigningrequests", "alice")
    assert csr["spec"]["username"] == "labkit-admin" and csr["spec"]["groups"] == ["kubeadm:cluster-admins",
                                                                                  "system:authenticated"]
    assert "Pending" in kubectl(server.kubeconfig, "get", "csr", "alice").stdout
    kubectl(server.kubeconfig, "certificate", "approve", "alice")
    assert wait_until(lambda: kubectl(server.kubeconfig, "get", "csr", "alice", "-o",
                                      "jsonpath={.status.certificate}").stdout != "")
    assert "Approved,Issued" in kubectl(server.kubeconfig, "get", "csr", "alice").stdout
    cert = kubectl(server.kubeconfig, "get", "csr", "alice", "-o", "jsonpath={.status.certificate}").stdout
    (tmp_path / "alice.crt").write_bytes(base64.b64decode(cert))
    dates = subprocess.run(["openssl", "x509", "-in", "alice.crt", "-noout", "-startdate", "-enddate"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout
    start, end = (datetime.strptime(line.split("=", 1)[1].strip(), "%b %d %H:%M:%S %Y %Z")
                  for line in dates.splitlines())
    assert end - start == timedelta(seconds=86400)      # expirationSeconds, NotBefore backdated 5 minutes
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(server.kubeconfig.read_text())
    kubectl(kubeconfig, "config", "set-credentials", "alice", f"--client-certificate={tmp_path / 'alice.crt'}",
            f"--client-key={tmp_path / 'alice.key'}", "--embed-certs")
    kubectl(kubeconfig, "config", "set-context", "alice", "--cluster=labkit", "--user=alice")
    kubectl(kubeconfig, "config", "use-context", "alice")
    me = whoami(kubeconfig)
    assert (me["username"], me["groups"]) == ("alice", ["dev", "system:authenticated"])
    # kubectl will not deny an approved request; the approval subresource refuses both conditions
    # and the removal of one
    denied = kubectl(server.kubeconfig, "certificate", "deny", "alice", check=False)
    assert denied.stderr.strip() == 'error: certificate signing request "alice" is already Approved'
    admin = server.client()
    csr = admin.get("certificates.k8s.io/v1", "certificatesigningrequests", "alice")
    both = dict(csr, status=dict(csr["status"], conditions=csr["status"]["conditions"] + [
        {"type": "Denied", "status": "True", "reason": "Changed", "message": "mind"}]))
    code, body = admin.request("PUT", "/apis/certificates.k8s.io/v1/certificatesigningrequests/alice/approval",
                               body=both)
    assert code == 422 and body["message"].endswith(
        'status.conditions: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive')
    code, body = admin.request("PUT", "/apis/certificates.k8s.io/v1/certificatesigningrequests/alice/approval",
                               body=dict(csr, status=dict(csr["status"], conditions=[])))
    assert code == 422 and 'updates may not remove a condition of type "Approved"' in body["message"]


def test_signer_fails_requests_it_may_not_sign_and_deny_leaves_them_unsigned(server, tmp_path):
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "k", "-out", "r", "-subj", "/CN=web"], cwd=tmp_path, check=True, capture_output=True)
    request = base64.b64encode((tmp_path / "r").read_bytes()).decode()
    admin = server.client()
    for name, usages in (("serving", ["server auth"]), ("refused", ["client auth"])):
        admin.create("certificates.k8s.io/v1", "certificatesigningrequests", {
            "metadata": {"name": name}, "spec": {"request": request, "usages": usages,
                                                 "signerName": "kubernetes.io/kube-apiserver-client"}})
    kubectl(server.kubeconfig, "certificate", "approve", "serving")
    kubectl(server.kubeconfig, "certificate", "deny", "refused")

    def condition(name, kind):
        csr = admin.get("certificates.k8s.io/v1", "certificatesigningrequests", name)
        return next((c for c in csr.get("status", {}).get("conditions", []) if c["type"] == kind), None)

    assert wait_until(lambda: condition("serving", "Failed") is not None)
    failed = condition("serving", "Failed")
    assert (failed["reason"], failed["message"]) == ("SignerValidationFailure",
                                                     "invalid usage for client certificate: server auth")
    assert condition("refused", "Denied")["reason"] == "KubectlDeny"
    table = kubectl(server.kubeconfig, "get", "csr", "serving", "refused", "--no-headers").stdout.splitlines()
    assert [line.split()[-1] for line in table] == ["Approved,Failed", "Denied"]
    assert "certificate" not in admin.get("certificates.k8s.io/v1", "certificatesigningrequests", "refused")["status"]
    # validation as upstream
    code, body = admin.request("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", body={
        "metadata": {"name": "bad"}, "spec": {"request": base64.b64encode(b"junk").decode(), "usages": [],
                                              "signerName": "kubernetes.io/kube-apiserver-client",
                                              "expirationSeconds": 60}})
    assert code == 422
    assert "spec.request: Invalid value: []byte{0x6a, 0x75, 0x6e, 0x6b}: PEM block type must be CERTIFICATE REQUEST" \
        in body["message"]
    assert "spec.usages: Required value" in body["message"]
    assert "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)" \
        in body["message"]


def test_audit_policy_levels_stages_and_watches(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted]
rules:
- level: None
  resources: [{group: "", resources: [secrets]}]
- level: RequestResponse
  omitManagedFields: true
  resources: [{group: "", resources: [configmaps]}]
- level: Metadata
  omitStages: [RequestReceived]
""")
    with host_lock(False):
        server = EmbeddedServer(tmp_path / "apiserver", controllers=[], audit_policy=policy).start()
    try:
        admin = server.client()
        admin.create("v1", "configmaps", {"metadata": {"name": "cm"}, "data": {"a": "b"}}, "default")
        admin.create("v1", "secrets", {"metadata": {"name": "s"}}, "default")
        admin.create("v1", "services", {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}, "default")
        log = audit.read(server.state_dir / "audit.log")
        created = next(e["auditID"] for e in log if e.get("objectRef", {}).get("name") == "cm")
        cm = [e for e in log if e["auditID"] == created]
        assert [e["stage"] for e in cm] == ["RequestReceived", "ResponseComplete"]
        assert "responseStatus" not in cm[0] and "requestObject" not in cm[0]
        assert cm[1]["level"] == "RequestResponse" and cm[1]["responseObject"]["data"] == {"a": "b"}
        assert "managedFields" not in cm[1]["responseObject"]["metadata"]
        assert cm[1]["responseStatus"] == {"metadata": {}, "code": 201}
        assert not [e for e in log if e.get("objectRef", {}).get("resource") == "secrets"]
        svc = [e for e in log if e.get("objectRef", {}).get("name") == "svc"]
        assert [(e["stage"], e["level"]) for e in svc] == [("ResponseComplete", "Metadata")]
        assert "requestObject" not in svc[0]
        # a failure's Status is in responseStatus
        code, _ = admin.request("GET", "/api/v1/namespaces/default/configmaps/missing")
        missing = [e for e in audit.read(server.state_dir / "audit.log")
                   if e.get("objectRef", {}).get("name") == "missing" and e["stage"] == "ResponseComplete"]
        assert code == 404 and missing[0]["responseStatus"] == {
            "metadata": {}, "status": "Failure", "message": 'configmaps "missing" not found', "reason": "NotFound",
            "details": {"name": "missing", "kind": "configmaps"}, "code": 404}
        # a watch: ResponseStarted is omitted by the policy, ResponseComplete comes when it ends
        watch = admin.open_watch("/api/v1/namespaces/default/services", {"watch": "true", "timeoutSeconds": "1"})
        watch.stop()
        stages = [e["stage"] for e in audit.read(server.state_dir / "audit.log") if e["verb"] == "watch"]
        assert stages == ["ResponseComplete"]
    finally:
        with host_lock(False):
            server.stop()


def test_an_invalid_audit_policy_stops_the_server_with_one_line(tmp_path):
    from labkit.apiserver.__main__ import main
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Verbose\n")
    assert main(["--state", str(tmp_path / "state"), "--controllers", "none", "--audit-policy", str(policy)]) == 2


def test_token_request_defaults_extension_and_bindings(server):
    """token.go TokenREST.Create: the 3607-second pod-bound token lives a year and warns after
    3607 s; Node bindings; objects a token cannot be bound to."""
    admin = server.client()
    path = "/api/v1/namespaces/default/serviceaccounts/robot/token"
    admin.create("v1", "pods", {"metadata": {"name": "kubelet-made"}, "spec": {
        "serviceAccountName": "robot", "nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}},
        "default")
    node = admin.create("v1", "nodes", {"metadata": {"name": "n1"}})
    answer = admin.check(*admin.request("POST", path, body={"spec": {"expirationSeconds": 3607, "boundObjectRef": {
        "kind": "Pod", "apiVersion": "v1", "name": "kubelet-made"}}}))
    claims = json.loads(base64.urlsafe_b64decode(answer["status"]["token"].split(".")[1] + "=="))
    assert claims["exp"] - claims["iat"] == 365 * 24 * 3600
    assert claims["kubernetes.io"]["warnafter"] - claims["iat"] == 3607
    assert claims["kubernetes.io"]["node"] == {"name": "n1", "uid": node["metadata"]["uid"]}
    created = datetime.strptime(answer["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    expires = datetime.strptime(answer["status"]["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    assert expires - created == timedelta(seconds=3607)
    default = admin.check(*admin.request("POST", path, body={}))
    assert default["spec"] == {"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 3600}
    bound = admin.check(*admin.request("POST", path, body={"spec": {"boundObjectRef": {
        "kind": "Node", "apiVersion": "v1", "name": "n1"}}}))
    claims = json.loads(base64.urlsafe_b64decode(bound["status"]["token"].split(".")[1] + "=="))
    assert claims["kubernetes.io"]["node"] == {"name": "n1", "uid": node["metadata"]["uid"]}
    code, body = admin.request("POST", path, body={"spec": {"boundObjectRef": {
        "kind": "ConfigMap", "apiVersion": "v1", "name": "x"}}})
    assert (code, body["message"]) == (400, "cannot bind token to object of type /v1, Kind=ConfigMap")
    code, body = admin.request("POST", path, body={"spec": {"boundObjectRef": {
        "kind": "Node", "apiVersion": "v1", "name": "n1", "uid": "not-its-uid"}}})
    assert code == 409 and body["message"] == (
        'Operation cannot be fulfilled on Node "n1": the UID in the bound object reference (not-its-uid) does not '
        "match the UID in record. The object might have been deleted and then recreated")
    code, body = admin.request("POST", "/api/v1/namespaces/default/serviceaccounts/nobody/token", body={})
    assert (code, body["message"]) == (404, 'serviceaccounts "nobody" not found')


def test_csr_admission_with_kubectl(server, tmp_path):
    """CertificateSubjectRestriction and CertificateApproval as kubectl reports them."""
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "k", "-out", "r", "-subj", "/CN=mallory/O=system:masters"], cwd=tmp_path, check=True,
                   capture_output=True)
    request = base64.b64encode((tmp_path / "r").read_bytes()).decode()
    manifest = (f"apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: root\n"
                f"spec:\n  request: {request}\n  signerName: kubernetes.io/kube-apiserver-client\n"
                f"  usages: [client auth]\n")
    refused = kubectl(server.kubeconfig, "create", "-f", "-", input=manifest, check=False)
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": certificatesigningrequests.certificates.k8s.io '
        '"root" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not '
        "allowed")
    kubectl(server.kubeconfig, "create", "-f", "-", input=manifest.replace("name: root", "name: approve-me").replace(
        request, base64.b64encode(subprocess.run(
            ["openssl", "req", "-new", "-key", "k", "-subj", "/CN=mallory"], cwd=tmp_path, check=True,
            capture_output=True).stdout).decode()))
    kubectl(server.kubeconfig, "create", "clusterrole", "csr-approval-only", "--verb=get,list,update",
            "--resource=certificatesigningrequests,certificatesigningrequests/approval")
    kubectl(server.kubeconfig, "create", "clusterrolebinding", "csr-approval-only", "--clusterrole=csr-approval-only",
            "--user=carol")
    denied = kubectl(server.kubeconfig, "certificate", "approve", "approve-me", "--as=carol", check=False)
    assert 'user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client"' in \
        denied.stderr, denied.stderr
    assert "Pending" in kubectl(server.kubeconfig, "get", "csr", "approve-me").stdout
