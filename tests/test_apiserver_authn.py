"""The authenticators and the audit policy checker on their own, with cases ported from
upstream's tests: x509_test.go TestX509 and TestCertificateIdentifier, the serviceaccount
claims/jwt tests, authn_audit_test.go TestFailedAuthnAudit*, checker_test.go TestChecker and
TestCheckerPolicyOmitStages."""

from __future__ import annotations

import ssl

import hashlib
import re
import time
from datetime import datetime, timedelta, timezone

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from labkit.apiserver import authn
from labkit.apiserver.auditpolicy import Policy, validate
from labkit.apiserver.authorizer import Attributes
from labkit.apiserver.trace import Trace

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=timezone.utc)


def _name(cn: str | None = None, orgs=(), uids=()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs += [x509.NameAttribute(NameOID.USER_ID, u) for u in uids]
    if cn is not None:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _ca(name="labkit-ca"):
    key = _key()
    subject = _name(name)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(NOW - timedelta(days=365)).not_valid_after(NOW + timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def _leaf(ca, subject: x509.Name, usages=(ExtendedKeyUsageOID.CLIENT_AUTH,), not_before=None, not_after=None,
          serial=42) -> bytes:
    ca_cert, ca_key = ca
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
               .public_key(_key().public_key()).serial_number(serial)
               .not_valid_before(not_before or NOW - timedelta(hours=1))
               .not_valid_after(not_after or NOW + timedelta(days=1)))
    if usages is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    return builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


@pytest.fixture(scope="module")
def ca():
    return _ca()


# -- x509 (x509_test.go TestX509) ------------------------------------------------------------------

def test_x509_client_certificate_names_the_user_and_groups(ca):
    der = _leaf(ca, _name("client_cn", ["My Org", "Other Org"]))
    user = authn.X509Authenticator(ca[0]).authenticate(der, now=NOW)
    assert (user.name, user.groups, user.uid) == ("client_cn", ["My Org", "Other Org"], "")
    # TestCertificateIdentifier / CommonNameUserConversion: the credential ID is the leaf's SHA-256
    assert user.extra == {authn.CREDENTIAL_ID: ["X509SHA256=" + hashlib.sha256(der).hexdigest()]}


def test_x509_no_certificate_or_no_common_name_is_no_opinion(ca):
    auth = authn.X509Authenticator(ca[0])
    assert auth.authenticate(None, now=NOW) is None
    assert auth.authenticate(_leaf(ca, _name(None, ["dev"])), now=NOW) is None


@pytest.mark.parametrize("case, make, message", [
    ("self signed", lambda ca: _leaf(_ca("someone-else"), _name("x")),
     r"verifying certificate SN=42, SKID=, AKID= failed: x509: certificate signed by unknown authority$"),
    ("same CA name, other key", lambda ca: _leaf(_ca("labkit-ca"), _name("x")),
     r'x509: certificate signed by unknown authority \(possibly because of "x509: ECDSA verification failure" '
     r'while trying to verify candidate authority certificate "labkit-ca"\)'),
    ("server cert", lambda ca: _leaf(ca, _name("x"), usages=[ExtendedKeyUsageOID.SERVER_AUTH]),
     r"x509: certificate specifies an incompatible key usage"),
    ("expired cert", lambda ca: _leaf(ca, _name("x"), not_before=NOW - timedelta(days=2),
                                      not_after=NOW - timedelta(days=1)),
     r"x509: certificate has expired or is not yet valid: current time 2026-06-01T12:00:00Z is after "
     r"2026-05-31T12:00:00Z"),
    ("future cert", lambda ca: _leaf(ca, _name("x"), not_before=NOW + timedelta(days=1),
                                     not_after=NOW + timedelta(days=2)),
     r"current time 2026-06-01T12:00:00Z is before 2026-06-02T12:00:00Z"),
    ("multiple UIDs", lambda ca: _leaf(ca, _name("x", uids=["a", "b"])), r"expected 1 UID, but found multiple: \[a b\]"),
    ("empty UID", lambda ca: _leaf(ca, _name("x", uids=[""])), r"UID cannot be an empty string"),
])
def test_x509_certificates_that_do_not_verify_are_errors(ca, case, make, message):
    with pytest.raises(ValueError) as exc:
        authn.X509Authenticator(ca[0]).authenticate(make(ca), now=NOW)
    assert re.search(message, str(exc.value)), (case, str(exc.value))


def test_x509_accepts_certificates_without_extended_usage_and_reads_the_uid(ca):
    user = authn.X509Authenticator(ca[0]).authenticate(_leaf(ca, _name("x", uids=["1234"]), usages=None), now=NOW)
    assert (user.name, user.uid) == ("x", "1234")


def test_certificate_identifier_is_serial_and_key_ids(ca):
    ca_cert, ca_key = ca
    key = _key()
    cert = (x509.CertificateBuilder().subject_name(_name("x")).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(0x1234).not_valid_before(NOW).not_valid_after(NOW)
            .add_extension(x509.SubjectKeyIdentifier(b"\x01\x02\xab"), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier(b"\xff\x00", None, None), critical=False)
            .sign(ca_key, hashes.SHA256()))
    assert authn.certificate_identifier(cert) == "SN=4660, SKID=01:02:AB, AKID=FF:00"


# -- ServiceAccount tokens (pkg/serviceaccount claims_test.go, jwt_test.go) ------------------------

class Objects:
    def __init__(self):
        self.items = {}

    def put(self, resource, namespace, name, uid, deleted: str | None = None, **extra):
        meta = {"name": name, "uid": uid}
        if namespace:
            meta["namespace"] = namespace
        if deleted:
            meta["deletionTimestamp"] = deleted
        self.items[(resource, namespace, name)] = {"metadata": meta, **extra}
        return self.items[(resource, namespace, name)]

    def lookup(self, resource, namespace, name):
        return self.items.get((resource, namespace, name))


@pytest.fixture(scope="module")
def signing_key():
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture
def objects():
    o = Objects()
    o.put("serviceaccounts", "ns", "robot", "sa-uid")
    return o


def _tokens(signing_key, objects):
    return authn.ServiceAccountTokens(signing_key, objects.lookup)


def test_service_account_token_claims_and_identity(signing_key, objects):
    tokens = _tokens(signing_key, objects)
    sa = objects.lookup("serviceaccounts", "ns", "robot")
    objects.put("pods", "ns", "web", "pod-uid")
    token, jti = tokens.issue(sa, authn.API_AUDIENCES, 3600,
                              [authn.BoundObject("Pod", "web", "pod-uid"), authn.BoundObject("Node", "n1", "node-uid")])
    claims = __import__("json").loads(authn._unb64(token.split(".")[1]))
    assert claims["sub"] == "system:serviceaccount:ns:robot" and claims["iss"] == authn.ISSUER
    assert claims["exp"] - claims["iat"] == 3600 and claims["nbf"] == claims["iat"] and claims["jti"] == jti
    assert claims["kubernetes.io"] == {"namespace": "ns", "serviceaccount": {"name": "robot", "uid": "sa-uid"},
                                       "pod": {"name": "web", "uid": "pod-uid"},
                                       "node": {"name": "n1", "uid": "node-uid"}}
    user = tokens.authenticate(token)
    assert (user.name, user.uid) == ("system:serviceaccount:ns:robot", "sa-uid")
    assert user.groups == ["system:serviceaccounts", "system:serviceaccounts:ns"]
    assert user.extra == {authn.POD_NAME: ["web"], authn.POD_UID: ["pod-uid"], authn.NODE_NAME: ["n1"],
                          authn.NODE_UID: ["node-uid"], authn.CREDENTIAL_ID: [f"JTI={jti}"]}


@pytest.mark.parametrize("case, change, message", [
    ("expired", lambda o: None, "service account token has expired"),
    ("service account deleted", lambda o: o.items.pop(("serviceaccounts", "ns", "robot")),
     'serviceaccounts "robot" not found'),
    ("service account recreated", lambda o: o.put("serviceaccounts", "ns", "robot", "other-uid"),
     r"service account UID \(other-uid\) does not match claim \(sa-uid\)"),
    ("service account being deleted", lambda o: o.put("serviceaccounts", "ns", "robot", "sa-uid",
                                                      deleted="2020-01-01T00:00:00Z"),
     "service account ns/robot has been deleted"),
])
def test_service_account_token_validation(signing_key, objects, case, change, message):
    tokens = _tokens(signing_key, objects)
    sa = objects.lookup("serviceaccounts", "ns", "robot")
    issued = time.time() - 7200 if case == "expired" else None
    token, _ = tokens.issue(sa, authn.API_AUDIENCES, 3600, now=issued)
    change(objects)
    with pytest.raises(ValueError, match=message):
        tokens.authenticate(token)


@pytest.mark.parametrize("kind, resource, message", [
    ("Pod", "pods", r"pod UID \(new\) does not match service account pod ref claim \(old\)"),
    ("Secret", "secrets", r"secret UID \(new\) does not match service account secret ref claim \(old\)"),
    ("Node", "nodes", r"node UID \(new\) does not match service account node ref claim \(old\)"),
])
def test_bound_tokens_die_with_their_object(signing_key, objects, kind, resource, message):
    tokens = _tokens(signing_key, objects)
    namespace = None if kind == "Node" else "ns"
    objects.put(resource, namespace, "bound", "old")
    token, _ = tokens.issue(objects.lookup("serviceaccounts", "ns", "robot"), authn.API_AUDIENCES, 3600,
                            [authn.BoundObject(kind, "bound", "old")])
    assert tokens.authenticate(token).name == "system:serviceaccount:ns:robot"
    objects.put(resource, namespace, "bound", "new")           # deleted and made again
    with pytest.raises(ValueError, match=message):
        tokens.authenticate(token)
    objects.items.pop((resource, namespace, "bound"))
    with pytest.raises(ValueError, match="service account token has been invalidated"):
        tokens.authenticate(token)


def test_audience_signature_and_issuer(signing_key, objects):
    tokens = _tokens(signing_key, objects)
    sa = objects.lookup("serviceaccounts", "ns", "robot")
    token, _ = tokens.issue(sa, ["vault"], 3600)
    with pytest.raises(ValueError, match=re.escape('token audiences ["vault"] is invalid for the target audiences '
                                                   '["https://kubernetes.default.svc.cluster.local"]')):
        tokens.authenticate(token)
    other = authn.ServiceAccountTokens(ec.generate_private_key(ec.SECP256R1()), objects.lookup)
    forged, _ = other.issue(sa, authn.API_AUDIENCES, 3600)
    with pytest.raises(ValueError, match="error in cryptographic primitive"):
        tokens.authenticate(forged)
    foreign = authn.ServiceAccountTokens(signing_key, objects.lookup, issuer="https://elsewhere")
    assert tokens.authenticate(foreign.issue(sa, authn.API_AUDIENCES, 3600)[0]) is None      # not ours
    assert tokens.authenticate("not-a-jwt") is None


def test_stale_token_annotation_after_warnafter(signing_key, objects):
    tokens = _tokens(signing_key, objects)
    objects.put("pods", "ns", "web", "pod-uid")
    token, _ = tokens.issue(objects.lookup("serviceaccounts", "ns", "robot"), authn.API_AUDIENCES, 365 * 86400,
                            [authn.BoundObject("Pod", "web", "pod-uid")], warnafter=3607, now=time.time() - 3700)
    annotations = {}
    tokens.authenticate(token, annotations)
    assert re.fullmatch(r"subject: system:serviceaccount:ns:robot, seconds after warning threshold: (9[0-9]|1[0-9]{2})",
                        annotations[authn.STALE_TOKEN])


# -- the chain (union, fail-on-error anonymous, group adder) ----------------------------------------

def test_union_fail_on_error_and_anonymous(ca, signing_key, objects):
    tokens = _tokens(signing_key, objects)
    users = {"good": authn.User("static", ["team"], "7")}
    chain = authn.Authenticator(authn.X509Authenticator(ca[0]), authn.TokenFileAuthenticator(users), tokens)
    anonymous = chain.authenticate(None, "", Trace())
    assert (anonymous.name, anonymous.groups) == ("system:anonymous", ["system:unauthenticated"])
    static = chain.authenticate(None, "Bearer good", Trace())
    assert (static.name, static.groups, static.uid) == ("static", ["team", "system:authenticated"], "7")
    assert users["good"].groups == ["team"]          # the adder does not change the token file's record
    trace = Trace()
    with pytest.raises(authn.Unauthenticated) as exc:
        chain.authenticate(None, "Bearer wrong", trace)
    assert exc.value.errors == ["invalid bearer token"]
    assert [s.outcome for s in trace.steps] == ["error", "unauthenticated"]
    # a certificate that does not verify is an error, but a valid token still authenticates
    expired = x509.load_der_x509_certificate(_leaf(ca, _name("x"), not_before=NOW - timedelta(days=800),
                                                   not_after=NOW - timedelta(days=700)))
    der = expired.public_bytes(serialization.Encoding.DER)
    assert chain.authenticate(der, "Bearer good", Trace()).name == "static"
    with pytest.raises(authn.Unauthenticated, match="certificate has expired"):
        chain.authenticate(der, "", Trace())
    # "Basic" and malformed Authorization headers carry no bearer token: anonymous
    assert chain.authenticate(None, "Basic dTpw", Trace()).name == "system:anonymous"


def test_token_cache_keeps_successes_for_ten_seconds(signing_key, objects):
    """cached_token_authenticator.go with kube-apiserver's TokenSuccessCacheTTL (10 s) and no
    failure cache."""
    tokens = _tokens(signing_key, objects)
    clock = [1000.0]
    chain = authn.Authenticator(None, authn.TokenFileAuthenticator({}), tokens, clock=lambda: clock[0])
    token, _ = tokens.issue(objects.lookup("serviceaccounts", "ns", "robot"), authn.API_AUDIENCES, 3600)
    assert chain.authenticate(None, f"Bearer {token}", Trace()).name == "system:serviceaccount:ns:robot"
    objects.items.pop(("serviceaccounts", "ns", "robot"))
    clock[0] += 9.5
    trace = Trace()
    assert chain.authenticate(None, f"Bearer {token}", trace).name == "system:serviceaccount:ns:robot"
    assert [s.name for s in trace.steps] == ["token-cache"]
    clock[0] += 1
    with pytest.raises(authn.Unauthenticated, match='serviceaccounts "robot" not found'):
        chain.authenticate(None, f"Bearer {token}", Trace())
    with pytest.raises(authn.Unauthenticated):       # failures are not cached: checked every time
        chain.authenticate(None, f"Bearer {token}", Trace())


@pytest.mark.parametrize("authorization, access_token, certificate, message", [
    ("Basic dXNlcm5hbWU6cGFzc3dvcmQ=", "", False, "Authentication failed, attempted: basic"),
    ("Basic dXNlcm5hbWU6cGFzc3dvcmQ=", "", True, "Authentication failed, attempted: basic, x509"),
    ("Bearer abc", "tok", True, "Authentication failed, attempted: bearer, access_token, x509"),
    ("", "", False, "Authentication failed, no credentials provided"),
])
def test_failed_authentication_audit_message(authorization, access_token, certificate, message):
    """authn_audit_test.go TestFailedAuthnAudit, TestFailedMultipleAuthnAudit,
    TestFailedAuthnAuditWithoutAuthorization."""
    assert authn.attempted_methods(authorization, access_token, certificate) == message


# -- the audit policy checker (checker_test.go) ----------------------------------------------------

TIM = ("tim@k8s.io", ["humans", "developers"])
ATTRS = {
    "namespaced": Attributes(*TIM, "get", "default", "", "v1", "pods", "", "busybox",
                             "/api/v1/namespaces/default/pods/busybox"),
    "cluster": Attributes(*TIM, "get", "", "rbac.authorization.k8s.io", "v1beta1", "clusterroles", "", "edit",
                          "/apis/rbac.authorization.k8s.io/v1beta1/clusterroles/edit"),
    "nonResource": Attributes(*TIM, "get", path="/logs/kubelet.log"),
    "subresource": Attributes(*TIM, "get", "default", "", "v1", "pods", "log", "busybox",
                              "/api/v1/namespaces/default/pods/busybox"),
    "Unauthorized": Attributes("", [], "get", "default", "", "v1", "pods", "", "busybox",
                               "/api/v1/namespaces/default/pods/busybox"),
}
RULES = {
    "default": {"level": "Metadata"},
    "create": {"level": "Request", "verbs": ["create"]},
    "tims": {"level": "Metadata", "users": ["tim@k8s.io"]},
    "humans": {"level": "Metadata", "userGroups": ["humans"]},
    "serviceAccounts": {"level": "Request", "userGroups": ["system:serviceaccounts"]},
    "getPods": {"level": "RequestResponse", "verbs": ["get"], "resources": [{"resources": ["pods"]}]},
    "getPodLogs": {"level": "Request", "verbs": ["get"], "resources": [{"resources": ["pods/log"]}]},
    "getPodWildcardMatching": {"level": "Request", "verbs": ["get"], "resources": [{"resources": ["*"]}]},
    "getPodResourceWildcardMatching": {"level": "Request", "verbs": ["get"], "resources": [{"resources": ["*/log"]}]},
    "getPodSubResourceWildcardMatching": {"level": "Request", "verbs": ["get"],
                                          "resources": [{"resources": ["pods/*"]}]},
    "getClusterRoles": {"level": "RequestResponse", "verbs": ["get"], "namespaces": [""],
                        "resources": [{"group": "rbac.authorization.k8s.io", "resources": ["clusterroles"]}]},
    "getLogs": {"level": "RequestResponse", "verbs": ["get"], "nonResourceURLs": ["/logs*"]},
    "getMetrics": {"level": "Request", "verbs": ["get"], "nonResourceURLs": ["/metrics"]},
    "clusterRoleEdit": {"level": "Request", "resources": [{"group": "rbac.authorization.k8s.io",
                                                            "resources": ["clusterroles"], "resourceNames": ["edit"]}]},
    "omit RequestReceived": {"level": "Request", "omitStages": ["RequestReceived"]},
    "only audit panic": {"level": "Request", "omitStages": ["RequestReceived", "ResponseStarted", "ResponseComplete"]},
}
LEVEL_CASES = [
    ("namespaced", "Metadata", ["default"]), ("namespaced", "None", ["create"]), ("namespaced", "Metadata", ["tims"]),
    ("namespaced", "Metadata", ["humans"]), ("namespaced", "None", ["serviceAccounts"]),
    ("namespaced", "RequestResponse", ["getPods"]), ("namespaced", "None", ["getClusterRoles"]),
    ("namespaced", "None", ["getLogs"]), ("namespaced", "None", ["getMetrics"]),
    ("namespaced", "Metadata", ["getMetrics", "serviceAccounts", "default"]),
    ("namespaced", "RequestResponse", ["getMetrics", "getPods", "default"]),
    ("namespaced", "RequestResponse", ["getPodLogs", "getPods"]),
    ("cluster", "Metadata", ["default"]), ("cluster", "None", ["create"]), ("cluster", "Metadata", ["tims"]),
    ("cluster", "Metadata", ["humans"]), ("cluster", "None", ["serviceAccounts"]), ("cluster", "None", ["getPods"]),
    ("cluster", "RequestResponse", ["getClusterRoles"]), ("cluster", "Request", ["clusterRoleEdit", "getClusterRoles"]),
    ("cluster", "None", ["getLogs"]), ("cluster", "None", ["getMetrics"]),
    ("cluster", "Metadata", ["getMetrics", "serviceAccounts", "default"]),
    ("cluster", "RequestResponse", ["getMetrics", "getClusterRoles", "default"]),
    ("cluster", "None", ["getPodLogs", "getPods"]),
    ("nonResource", "Metadata", ["default"]), ("nonResource", "None", ["create"]),
    ("nonResource", "Metadata", ["tims"]), ("nonResource", "Metadata", ["humans"]),
    ("nonResource", "None", ["serviceAccounts"]), ("nonResource", "None", ["getPods"]),
    ("nonResource", "None", ["getClusterRoles"]), ("nonResource", "RequestResponse", ["getLogs"]),
    ("nonResource", "None", ["getMetrics"]), ("nonResource", "Metadata", ["getMetrics", "serviceAccounts", "default"]),
    ("nonResource", "RequestResponse", ["getLogs", "getClusterRoles", "default"]),
    ("nonResource", "None", ["getPodLogs", "getPods"]),
    ("subresource", "Request", ["getPodLogs", "getPods"]), ("subresource", "Request", ["getPodWildcardMatching"]),
    ("subresource", "Request", ["getPodResourceWildcardMatching"]),
    ("subresource", "Request", ["getPodSubResourceWildcardMatching"]),
    ("Unauthorized", "None", ["tims"]), ("Unauthorized", "Metadata", ["tims", "default"]),
    ("Unauthorized", "None", ["humans"]), ("Unauthorized", "Metadata", ["humans", "default"]),
]


def _policy(rules, omit=()):
    return Policy.from_dict({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": list(omit),
                             "rules": [RULES[r] for r in rules]})


@pytest.mark.parametrize("stages", [[], ["RequestReceived", "ResponseStarted"]])
def test_checker_levels(stages):
    """TestChecker (testAuditLevel without policy stages) and TestCheckerPolicyOmitStages."""
    for request, level, rules in LEVEL_CASES:
        config = _policy(rules, stages).evaluate(ATTRS[request])
        assert (config.level, set(config.omit_stages)) == (level, set(stages)), (request, rules)


@pytest.mark.parametrize("stages, request_name, rules, level, omitted", [
    ([], "namespaced", ["omit RequestReceived", "getPods", "default"], "Request", {"RequestReceived"}),
    ([], "cluster", ["only audit panic", "getPods", "default"], "Request",
     {"RequestReceived", "ResponseStarted", "ResponseComplete"}),
    (["RequestReceived", "ResponseStarted"], "namespaced", ["omit RequestReceived", "getPods", "default"], "Request",
     {"RequestReceived", "ResponseStarted"}),
    (["RequestReceived", "ResponseStarted"], "nonResource", ["default", "omit RequestReceived", "getPods"],
     "Metadata", {"RequestReceived", "ResponseStarted"}),
    (["RequestReceived", "ResponseStarted"], "nonResource", ["only audit panic", "getPods", "default"], "Request",
     {"RequestReceived", "ResponseStarted", "ResponseComplete"}),
])
def test_checker_omit_stages_union(stages, request_name, rules, level, omitted):
    config = _policy(rules, stages).evaluate(ATTRS[request_name])
    assert (config.level, set(config.omit_stages)) == (level, omitted)


def test_policy_validation_messages():
    assert validate({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                     "rules": [{"level": "Everything"}, {"level": "None", "omitStages": ["Later"]},
                               {"level": "None", "resources": [{"resources": ["pods"]}], "nonResourceURLs": ["/x"]}]}) == [
        'rules[0].level: Unsupported value: "Everything": supported values: "None", "Metadata", "Request", '
        '"RequestResponse"',
        'rules[1].omitStages[0]: Unsupported value: "Later": supported values: "RequestReceived", "ResponseStarted", '
        '"ResponseComplete", "Panic"',
        "rules[2].nonResourceURLs: Invalid value: rules cannot apply to both regular resources and non-resource URLs"]


def test_the_serving_context_asks_for_certificates_and_verifies_none_itself(tmp_path):
    """kube-apiserver serves with tls.RequestClientCert: a certificate from any CA, or none,
    completes the handshake, and the server sees what was sent (the x509 authenticator judges
    it afterwards). The ssl module's CERT_OPTIONAL would abort the handshake on a foreign one."""
    import socket
    import threading

    from labkit.apiserver import certs
    directory = certs.ensure_certificates(tmp_path / "pki")
    serving = certs.apiserver_context(directory)
    foreign_ca, foreign_key = certs.self_signed_ca("somewhere-else")
    (tmp_path / "ca.pem").write_bytes(foreign_ca)
    (tmp_path / "ca.key").write_bytes(foreign_key)
    listener = socket.create_server(("127.0.0.1", 0))
    seen = []

    def serve(n):
        for _ in range(n):
            raw, _ = listener.accept()
            tls = serving.wrap_socket(raw, server_side=True)
            seen.append((tls.getpeercert(binary_form=True), tls.selected_alpn_protocol(), tls.version()))
            tls.sendall(b"ok")
            tls.close()

    thread = threading.Thread(target=serve, args=(2,), daemon=True)
    thread.start()
    for with_certificate in (True, False):
        client = ssl.create_default_context(cafile=str(directory / certs.CA_CERT))
        client.set_alpn_protocols(["http/1.1"])
        if with_certificate:
            client.load_cert_chain(tmp_path / "ca.pem", tmp_path / "ca.key")
        with client.wrap_socket(socket.create_connection(listener.getsockname()),
                                server_hostname="127.0.0.1") as conn:
            assert conn.recv(2) == b"ok"
    thread.join(10)
    listener.close()
    sent = x509.load_pem_x509_certificate(foreign_ca).public_bytes(serialization.Encoding.DER)
    assert seen[0] == (sent, "http/1.1", seen[0][2]) and seen[0][2] in ("TLSv1.2", "TLSv1.3")
    assert seen[1][0] is None
