"""The three CertificateSigningRequest admission plugins of kube-apiserver v1.34, all in the
validating phase and on by default.

- CertificateApproval (plugin/pkg/admission/certificates/approval/admission.go, Plugin.Validate):
  an UPDATE of certificatesigningrequests/approval needs `approve` on the synthetic resource
  `signers` of certificates.k8s.io, named by the signer of the stored request (the old object,
  so that changing the signer through the approval subresource gains nothing) or by its domain
  with `/*` (plugin/pkg/admission/certificates/util.go, IsAuthorizedForSignerName); else 403
  `user not permitted to approve requests with signerName "<signer>"`.
- CertificateSigning (plugin/pkg/admission/certificates/signing/admission.go, Plugin.Validate):
  an UPDATE of certificatesigningrequests/status that changes status.certificate or
  status.conditions needs `sign` on `signers` the same way; else 403
  `user not permitted to sign requests with signerName "<signer>"`.
- CertificateSubjectRestriction (plugin/pkg/admission/certificates/subjectrestriction/
  admission.go, Plugin.Validate): a CREATE of a request for the kubernetes.io/kube-apiserver-client
  signer whose subject names the organization (the group) system:masters is refused with 403
  `use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`.

Both permission checks ask the server's authorizer (privileged group, then RBAC) about the user
of the request. labkit's in-process controllers are not authorized (authorizer.py): upstream
the csrsigning controller holds `sign` on signers through its bootstrap role
system:controller:certificate-controller, so leaving them unchecked decides as upstream does.
"""

from __future__ import annotations


from cryptography.x509.oid import NameOID

from labkit.apiserver.admission import Attributes, forbidden_by
from labkit.apiserver.authorizer import Attributes as AuthzAttributes
from labkit.apiserver.authorizer import Authorizer, current_request
from labkit.apiserver.certificates import KUBE_APISERVER_CLIENT, parse_request, request_bytes
from labkit.jsondata import json_copy

GROUP = "certificates.k8s.io"
PRIVILEGED_GROUP = "system:masters"


def _csr_request(attrs: Attributes, subresource: str) -> bool:
    return (attrs.rt.group, attrs.rt.resource) == (GROUP, "certificatesigningrequests") and \
        attrs.subresource == subresource


def authorized_for_signer(authorizer: Authorizer, user, verb: str, signer: str) -> bool:
    """util.go IsAuthorizedForSignerName: `verb` on signers named `signer`, else on `<domain>/*`."""
    for name in (signer, signer.split("/")[0] + "/*"):
        attributes = AuthzAttributes(user.name, list(user.groups), verb, "", GROUP, "*", "signers", name=name)
        if authorizer.authorize(attributes).allowed:
            return True
    return False


def _requesting_user(attrs: Attributes):
    """The user to authorize, or None for labkit's own unauthorized writes (controllers, the
    server itself), which current_request does not name."""
    request = current_request.get()
    if request is None:
        return None
    return attrs.user or request[0]


class CertificateApproval:
    def __init__(self, authorizer: Authorizer):
        self.authorizer = authorizer

    def validate(self, attrs: Attributes) -> None:
        if attrs.operation != "UPDATE" or not _csr_request(attrs, "approval"):
            return
        user = _requesting_user(attrs)
        if user is None:
            return
        signer = ((attrs.old or {}).get("spec") or {}).get("signerName", "")
        if not authorized_for_signer(self.authorizer, user, "approve", signer):
            raise forbidden_by(attrs, f'user not permitted to approve requests with signerName "{signer}"')


class CertificateSigning:
    def __init__(self, authorizer: Authorizer):
        self.authorizer = authorizer

    def validate(self, attrs: Attributes) -> None:
        if attrs.operation != "UPDATE" or not _csr_request(attrs, "status"):
            return
        old, new = (attrs.old or {}).get("status") or {}, (attrs.obj or {}).get("status") or {}
        # only when status.certificate or status.conditions changed
        if old.get("certificate") == new.get("certificate") and \
                (old.get("conditions") or []) == (new.get("conditions") or []):
            return
        user = _requesting_user(attrs)
        if user is None:
            return
        signer = ((attrs.old or {}).get("spec") or {}).get("signerName", "")
        if not authorized_for_signer(self.authorizer, user, "sign", signer):
            raise forbidden_by(attrs, f'user not permitted to sign requests with signerName "{signer}"')


def certificate_subject_restriction(attrs: Attributes) -> None:
    if attrs.operation != "CREATE" or not _csr_request(attrs, "") or not isinstance(attrs.obj, dict):
        return
    spec = attrs.obj.get("spec") or {}
    if spec.get("signerName") != KUBE_APISERVER_CLIENT:
        return
    try:
        request = parse_request(request_bytes(json_copy(attrs.obj)))
    except ValueError as exc:
        raise forbidden_by(attrs, f"failed to parse CSR: {exc}")
    for attribute in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME):
        if attribute.value == PRIVILEGED_GROUP:
            raise forbidden_by(attrs, f"use of {KUBE_APISERVER_CLIENT} signer with {PRIVILEGED_GROUP} group is "
                                      "not allowed")
