"""The CertificateSigningRequest admission plugins of kube-apiserver v1.34, on by default:
CertificateApproval, CertificateSigning, CertificateSubjectRestriction.

Expected texts from kubernetes v1.34: plugin/pkg/admission/certificates/approval/admission.go
(Plugin.Validate), signing/admission.go (Plugin.Validate), subjectrestriction/admission.go
(Plugin.Validate) and certificates/util.go (IsAuthorizedForSignerName: the signer's name, then
`<domain>/*`); admission.NewForbidden's `<resource> "<name>" is forbidden: <reason>`.
"""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store

C = "certificates.k8s.io/v1"
R = "rbac.authorization.k8s.io/v1"
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"


def csr_pem(cn: str, orgs=()) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
                        + [x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    return base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()


def self_signed() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + timedelta(hours=1)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def csr(name: str, cn: str, orgs=(), signer=CLIENT_SIGNER) -> dict:
    return {"metadata": {"name": name}, "spec": {"request": csr_pem(cn, orgs), "signerName": signer,
                                                 "usages": ["client auth"]}}


@pytest.fixture
def api(tmp_path):
    return Api(Registry(Store(tmp_path / "objects.db")))


@pytest.fixture
def admin(api):
    return LocalClient(api, "admin", ["system:masters", "system:authenticated"])


def grant(admin, user: str, rules: list[dict], name: str = "csr") -> None:
    admin.create(R, "clusterroles", {"metadata": {"name": name}, "rules": rules})
    admin.create(R, "clusterrolebindings", {"metadata": {"name": name},
                                            "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                        "kind": "ClusterRole", "name": name},
                                            "subjects": [{"kind": "User", "name": user,
                                                          "apiGroup": "rbac.authorization.k8s.io"}]})


def refused(fn, *args) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args)
    return info.value


def approve(client, name: str) -> dict:
    obj = client.get(C, "certificatesigningrequests", name)
    obj.setdefault("status", {})["conditions"] = [{"type": "Approved", "status": "True", "reason": "Test",
                                                   "message": "ok"}]
    return client.update(C, "certificatesigningrequests", obj, None, "approval")


CSR_RULES = [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
              "verbs": ["get", "list", "create"]},
             {"apiGroups": ["certificates.k8s.io"],
              "resources": ["certificatesigningrequests/approval", "certificatesigningrequests/status"],
              "verbs": ["update"]}]


def test_system_masters_in_a_client_certificate_request_is_refused_at_creation(admin):
    err = refused(admin.create, C, "certificatesigningrequests", csr("root", "mallory", ["dev", "system:masters"]))
    assert err.code == 403
    assert err.message == ('certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of '
                           "kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed")
    # the group, not the signer alone, nor the requester, is the cause
    admin.create(C, "certificatesigningrequests", csr("dev", "alice", ["dev"]))
    admin.create(C, "certificatesigningrequests", csr("other", "alice", ["system:masters"], signer="example.com/mine"))


def test_approval_needs_approve_on_the_signer(api, admin):
    admin.create(C, "certificatesigningrequests", csr("alice", "alice", ["dev"]))
    grant(admin, "bob", CSR_RULES)
    bob = LocalClient(api, "bob", ["system:authenticated"])
    err = refused(approve, bob, "alice")
    assert err.code == 403
    assert err.message == ('certificatesigningrequests.certificates.k8s.io "alice" is forbidden: user not permitted '
                           'to approve requests with signerName "kubernetes.io/kube-apiserver-client"')
    assert not admin.get(C, "certificatesigningrequests", "alice").get("status", {}).get("conditions")
    # approve on the signer's domain with /* is enough
    grant(admin, "bob", [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                          "resourceNames": ["kubernetes.io/*"], "verbs": ["approve"]}], name="domain")
    assert approve(bob, "alice")["status"]["conditions"][0]["type"] == "Approved"


def test_approval_by_the_signer_name_and_not_another(api, admin):
    admin.create(C, "certificatesigningrequests", csr("alice", "alice", ["dev"]))
    grant(admin, "bob", CSR_RULES + [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                                      "resourceNames": ["kubernetes.io/kubelet-serving"], "verbs": ["approve"]}])
    bob = LocalClient(api, "bob", ["system:authenticated"])
    assert refused(approve, bob, "alice").code == 403
    grant(admin, "bob", [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                          "resourceNames": [CLIENT_SIGNER], "verbs": ["approve"]}], name="approver")
    assert approve(bob, "alice")["status"]["conditions"][0]["type"] == "Approved"


def test_writing_the_certificate_needs_sign_on_the_signer(api, admin):
    admin.create(C, "certificatesigningrequests", csr("alice", "alice", ["dev"]))
    approve(admin, "alice")
    grant(admin, "bob", CSR_RULES)
    bob = LocalClient(api, "bob", ["system:authenticated"])
    obj = bob.get(C, "certificatesigningrequests", "alice")
    obj["status"]["certificate"] = base64.b64encode(self_signed()).decode()
    err = refused(bob.update, C, "certificatesigningrequests", obj, None, "status")
    assert err.code == 403
    assert err.message == ('certificatesigningrequests.certificates.k8s.io "alice" is forbidden: user not permitted '
                           'to sign requests with signerName "kubernetes.io/kube-apiserver-client"')
    # an update of the status that changes neither certificate nor conditions is not a signing
    same = bob.get(C, "certificatesigningrequests", "alice")
    bob.update(C, "certificatesigningrequests", same, None, "status")


def test_admission_listing_names_the_three_plugins_as_running(api):
    rows = {row["name"]: row for row in api.registry.admission.order()}
    for name in ("CertificateApproval", "CertificateSigning", "CertificateSubjectRestriction"):
        assert (rows[name]["state"], rows[name]["phases"]) == ("runs", ["validating"])
    names = [row["name"] for row in api.registry.admission.order() if row["state"] == "runs"]
    assert names.index("CertificateApproval") < names.index("CertificateSigning") < \
        names.index("CertificateSubjectRestriction") < names.index("MutatingAdmissionWebhook")
