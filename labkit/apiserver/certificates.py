"""CertificateSigningRequests (certificates.k8s.io/v1) and the lab CA that signs them.

The registry side follows pkg/registry/certificates/certificates/strategy.go: a create records
the requesting user in spec.username/uid/groups/extra and starts with an empty status; a normal
update changes neither spec nor status; the `approval` subresource changes only the conditions
(kubectl certificate approve|deny), the `status` subresource the certificate and the other
conditions. Validation is pkg/apis/certificates/validation/validation.go
(`validateCertificateSigningRequest`, `validateConditions`, `validateCertificateSigningRequestUpdate`).

Signing (`sign_request`) is the csrsigning controller's (pkg/controller/certificates/signer/
signer.go `signer.handle`, `signer.sign`, `signer.duration`; authority/policies.go
`PermissiveSigningPolicy`); the controller itself is labkit.controllers.csrsigning.
"""

from __future__ import annotations

import base64
import secrets
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from labkit.apiserver import tables
from labkit.apiserver.errors import (FieldError, RawJSON, field_forbidden, field_invalid, field_required,
                                     field_unsupported, invalid)
from labkit.apiserver.resources import STATUS_VERBS, Strategy, Subresource
from labkit.jsondata import json_copy

KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
LEGACY_UNKNOWN = "kubernetes.io/legacy-unknown"
APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"
TRUE_ONLY = (APPROVED, DENIED, FAILED)
# --cluster-signing-duration's default (kube-controller-manager): one year
DEFAULT_CERT_TTL = 365 * 24 * 3600

# certificates.KeyUsage values (pkg/apis/certificates/types.go) and what x509 makes of them
# (authority/policies.go keyUsageDict, extKeyUsageDict)
KEY_USAGES = {"signing": "digital_signature", "digital signature": "digital_signature",
              "content commitment": "content_commitment", "key encipherment": "key_encipherment",
              "key agreement": "key_agreement", "data encipherment": "data_encipherment",
              "cert sign": "key_cert_sign", "crl sign": "crl_sign", "encipher only": "encipher_only",
              "decipher only": "decipher_only"}
EXT_KEY_USAGES = {"any": ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE, "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
                  "client auth": ExtendedKeyUsageOID.CLIENT_AUTH, "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
                  "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
                  "s/mime": ExtendedKeyUsageOID.EMAIL_PROTECTION,
                  "ipsec end system": x509.ObjectIdentifier("1.3.6.1.5.5.7.3.5"),
                  "ipsec tunnel": x509.ObjectIdentifier("1.3.6.1.5.5.7.3.6"),
                  "ipsec user": x509.ObjectIdentifier("1.3.6.1.5.5.7.3.7"),
                  "timestamping": ExtendedKeyUsageOID.TIME_STAMPING, "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING,
                  "microsoft sgc": x509.ObjectIdentifier("1.3.6.1.4.1.311.10.3.3"),
                  "netscape sgc": x509.ObjectIdentifier("2.16.840.1.113730.4.1")}
ALL_USAGES = sorted([*KEY_USAGES, *EXT_KEY_USAGES])


def _go_bytes(data: bytes) -> RawJSON:
    """A []byte value as field.Invalid shows it (%#v)."""
    return RawJSON("[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}")


def request_bytes(csr: dict) -> bytes:
    try:
        return base64.b64decode((csr.get("spec") or {}).get("request") or "", validate=True)
    except ValueError:
        return b""


def parse_request(pem: bytes) -> x509.CertificateSigningRequest:
    """certificates.ParseCSR and CheckSignature; ValueError with upstream's message."""
    start = pem.find(b"-----BEGIN ")
    if start < 0 or not pem[start:].startswith(b"-----BEGIN CERTIFICATE REQUEST-----"):
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    try:
        request = x509.load_pem_x509_csr(pem[start:])
    except ValueError as exc:
        raise ValueError(f"x509: malformed certificate request: {exc}")
    if not request.is_signature_valid:
        raise ValueError("x509: ECDSA verification failure"
                         if isinstance(request.public_key(), ec.EllipticCurvePublicKey)
                         else "crypto/rsa: verification error")
    return request


def _conditions(csr: dict, kind: str) -> list[dict]:
    return [c for c in ((csr.get("status") or {}).get("conditions") or []) if c.get("type") == kind]


def has_condition(csr: dict, kind: str) -> bool:
    return any(c.get("status") == "True" for c in _conditions(csr, kind))


def _validate(csr: dict, old: dict | None = None, approval: bool = False, certificate: bool = False
              ) -> list[FieldError]:
    """validation.go: `validateCertificateSigningRequest` (+ `validateCertificateSigningRequestUpdate`
    when `old` is given) with the options of the endpoint."""
    spec, status = csr.get("spec") or {}, csr.get("status") or {}
    old_conditions = (old.get("status") or {}).get("conditions") or [] if old else []
    errors = []
    raw = request_bytes(csr)
    try:
        parse_request(raw)
    except ValueError as exc:
        errors.append(field_invalid("spec.request", _go_bytes(raw), str(exc)))
    usages = spec.get("usages") or []
    if not usages:
        errors.append(field_required("spec.usages"))
    for i, usage in enumerate(usages):
        if usage not in ALL_USAGES:
            errors.append(field_unsupported(f"spec.usages[{i}]", usage, ALL_USAGES))
    for i, usage in enumerate(usages):
        if usage in usages[:i]:
            errors.append(FieldError("Duplicate value", f"spec.usages[{i}]", "", usage, True))
    signer = spec.get("signerName") or ""
    if signer == LEGACY_UNKNOWN and not (old and (old.get("spec") or {}).get("signerName") == LEGACY_UNKNOWN):
        errors.append(field_invalid("spec.signerName", signer, "the legacy signerName is not allowed via this API version"))
    else:
        errors += _signer_name_errors(signer)
    seconds = spec.get("expirationSeconds")
    if seconds is not None and seconds < 600:
        errors.append(field_invalid("spec.expirationSeconds", seconds,
                                    "may not specify a duration less than 600 seconds (10 minutes)"))
    seen, approved, denied = set(), False, False
    both_before = bool(old) and any(c.get("type") == APPROVED for c in old_conditions) \
        and any(c.get("type") == DENIED for c in old_conditions)
    for i, c in enumerate(status.get("conditions") or []):
        path = f"status.conditions[{i}]"
        if not c.get("type"):
            errors.append(field_required(f"{path}.type"))
        allowed = ["True"] if c.get("type") in TRUE_ONLY else ["False", "True", "Unknown"]
        if not c.get("status"):
            errors.append(field_required(f"{path}.status"))
        elif c["status"] not in allowed:
            errors.append(field_unsupported(f"{path}.status", c["status"], allowed))
        if not both_before:
            if c.get("type") == APPROVED:
                approved = True
                if denied:
                    errors.append(field_invalid("status.conditions", APPROVED,
                                                "Approved and Denied conditions are mutually exclusive"))
            elif c.get("type") == DENIED:
                denied = True
                if approved:
                    errors.append(field_invalid("status.conditions", DENIED,
                                                "Approved and Denied conditions are mutually exclusive"))
        if c.get("type") in seen:
            errors.append(FieldError("Duplicate value", f"{path}.type", "", c.get("type"), True))
        seen.add(c.get("type"))
    cert = status.get("certificate")
    old_cert = (old.get("status") or {}).get("certificate") if old else None
    if cert and cert != old_cert:
        problem = _certificate_problem(cert)
        if problem:
            errors.append(field_invalid("status.certificate", "<certificate data>", problem))
    if old is None:
        return errors
    for kind in (APPROVED, DENIED, FAILED):
        if len(_conditions(csr, kind)) < len(_conditions(old, kind)):
            errors.append(field_forbidden("status.conditions", f'updates may not remove a condition of type "{kind}"'))
    if not approval:
        for kind in (APPROVED, DENIED):
            new_c, old_c = _conditions(csr, kind), _conditions(old, kind)
            if len(new_c) > len(old_c):
                errors.append(field_forbidden("status.conditions", f'updates may not add a condition of type "{kind}"'))
            elif len(new_c) == len(old_c) and new_c != old_c:
                errors.append(field_forbidden("status.conditions", f'updates may not modify a condition of type "{kind}"'))
    if (cert or None) != (old_cert or None):
        if not certificate:
            errors.append(field_forbidden("status.certificate", "updates may not set certificate content"))
        elif old_cert:
            errors.append(field_forbidden("status.certificate", "updates may not modify existing certificate content"))
    return errors


def _signer_name_errors(name: str) -> list[FieldError]:
    """apivalidation.ValidateSignerName: <domain>/<path>, the domain a DNS subdomain."""
    if not name:
        return [field_required("spec.signerName")]
    parts = name.split("/")
    if len(parts) < 2:
        return [field_invalid("spec.signerName", name, "must be a fully qualified domain and path of the form "
                                                       "'example.com/signer-name'")]
    from labkit.apiserver.validation import dns1123_subdomain_problems
    problems = dns1123_subdomain_problems(parts[0])
    return [field_invalid("spec.signerName", name, p) for p in problems]


def _certificate_problem(text: str) -> str | None:
    """validation.go `validateCertificate`: only CERTIFICATE PEM blocks, at least one."""
    data = text.encode() if isinstance(text, str) else bytes(text)
    try:
        data = base64.b64decode(data, validate=True)
    except ValueError:
        pass
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        return "must contain at least one CERTIFICATE PEM block"
    return None if certs else "must contain at least one CERTIFICATE PEM block"


def _stamp_conditions(new: dict, old: dict) -> None:
    """strategy.go `populateConditionTimestamps`."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    for c in (new.get("status") or {}).get("conditions") or []:
        if not c.get("lastUpdateTime"):
            c["lastUpdateTime"] = now
        if not c.get("lastTransitionTime"):
            before = [o for o in _conditions(old, c.get("type")) if o.get("status") == c.get("status")]
            c["lastTransitionTime"] = before[0].get("lastTransitionTime") if before and \
                before[0].get("lastTransitionTime") else now


class ApprovalSubresource(Subresource):
    """csrApprovalStrategy: only the conditions change (Approved/Denied may be added here)."""

    name = "approval"
    verbs = STATUS_VERBS

    def prepare_for_update(self, new: dict, old: dict) -> dict:
        new["spec"] = json_copy(old.get("spec") or {})
        status = new.setdefault("status", {})
        if (old.get("status") or {}).get("certificate"):
            status["certificate"] = old["status"]["certificate"]
        else:
            status.pop("certificate", None)
        _stamp_conditions(new, old)
        errors = _validate(new, old, approval=True)
        if errors:
            raise invalid("CertificateSigningRequest", "certificates.k8s.io", new["metadata"].get("name", ""), errors)
        return new


class CSRStatusSubresource(Subresource):
    """csrStatusStrategy: the certificate and the conditions other than Approved/Denied."""

    name = "status"
    verbs = STATUS_VERBS

    def prepare_for_update(self, new: dict, old: dict) -> dict:
        new["spec"] = json_copy(old.get("spec") or {})
        _stamp_conditions(new, old)
        errors = _validate(new, old, certificate=True)
        if errors:
            raise invalid("CertificateSigningRequest", "certificates.k8s.io", new["metadata"].get("name", ""), errors)
        return new


def _condition_text(csr: dict) -> str:
    """printers.go `extractCSRStatus`: Denied, else Approved, else Pending; then Failed and Issued."""
    types = {c.get("type") for c in (csr.get("status") or {}).get("conditions") or []}
    text = DENIED if DENIED in types else APPROVED if APPROVED in types else "Pending"
    if FAILED in types:
        text += ",Failed"
    if (csr.get("status") or {}).get("certificate"):
        text += ",Issued"
    return text


def _csr_row(obj: dict) -> list:
    spec = obj.get("spec") or {}
    seconds = spec.get("expirationSeconds")
    return [obj["metadata"].get("name", ""), tables.age(obj), spec.get("signerName", ""), spec.get("username", ""),
            tables.human_duration(seconds) if seconds is not None else "<none>", _condition_text(obj)]


class CertificateSigningRequestStrategy(Strategy):
    subresources = (ApprovalSubresource(), CSRStatusSubresource())
    printer = ([tables.NAME, tables.AGE, tables._col("SignerName"), tables._col("Requestor"),
                tables._col("RequestedDuration"), tables._col("Condition")], _csr_row)

    def set_requester(self, obj: dict, user) -> dict:
        """PrepareForCreate's user.Info from the request (what the client sent is replaced)."""
        if not isinstance(obj, dict):
            return obj
        obj = json_copy(obj)
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return obj
        for key in ("username", "uid", "groups", "extra"):
            spec.pop(key, None)
        spec.update(user.info())
        return obj

    def prepare_for_create(self, obj):
        obj["status"] = {}       # users cannot create pre-approved requests

    def prepare_for_update(self, new, old):
        new["spec"] = json_copy(old.get("spec") or {})
        new["status"] = json_copy(old.get("status") or {})

    def validate(self, obj):
        return _validate(obj)

    def validate_update(self, new, old):
        return _validate(new, old)


# -- signing ------------------------------------------------------------------------------------

def api_client_usage_problem(usages: list[str]) -> str | None:
    """signer.go `validAPIServerClientUsages`."""
    has_client_auth = False
    for usage in usages:
        if usage in ("digital signature", "key encipherment"):
            continue
        if usage == "client auth":
            has_client_auth = True
            continue
        return f"invalid usage for client certificate: {usage}"
    if not has_client_auth:
        return "missing required usage for client certificate: client auth"
    return None


def duration(expiration_seconds: int | None, ttl: int = DEFAULT_CERT_TTL) -> int:
    """signer.go `signer.duration`: the requested duration, at most the signer's TTL and at
    least 10 minutes."""
    if expiration_seconds is None:
        return ttl
    return max(600, min(int(expiration_seconds), ttl))


def load_ca(pki: Path):
    cert = x509.load_pem_x509_certificate((Path(pki) / "ca.crt").read_bytes())
    key = serialization.load_pem_private_key((Path(pki) / "ca.key").read_bytes(), None)
    return cert, key


def issue(ca_cert, ca_key, subject: x509.Name, public_key, usages: list[str], ttl: int,
          sans: list | None = None, now: datetime | None = None) -> bytes:
    """authority.go `CertificateAuthority.Sign` with policies.go `PermissiveSigningPolicy`
    (Backdate 5 minutes, Short 8 hours): NotBefore is backdated 5 minutes; a certificate shorter
    than 8 hours is not backdated at its end. Returns the PEM."""
    now = now or datetime.now(timezone.utc)
    backdate = timedelta(minutes=5)
    not_before = now - backdate
    not_after = now + timedelta(seconds=ttl) if ttl < 8 * 3600 else not_before + timedelta(seconds=ttl)
    if not_after > ca_cert.not_valid_after_utc:
        not_after = ca_cert.not_valid_after_utc
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
               .public_key(public_key).serial_number(secrets.randbits(127) + 1)
               .not_valid_before(not_before).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
    flags = {v: False for v in set(KEY_USAGES.values())}
    for usage in usages:
        if usage in KEY_USAGES:
            flags[KEY_USAGES[usage]] = True
    if any(flags.values()):
        builder = builder.add_extension(x509.KeyUsage(**flags), critical=True)
    ext = sorted({EXT_KEY_USAGES[u].dotted_string for u in usages if u in EXT_KEY_USAGES})
    if ext:
        builder = builder.add_extension(x509.ExtendedKeyUsage([x509.ObjectIdentifier(o) for o in ext]),
                                        critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    algorithm = None if isinstance(ca_key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return builder.sign(ca_key, algorithm).public_bytes(serialization.Encoding.PEM)


def sign_request(csr: dict, ca_cert, ca_key) -> tuple[bytes | None, str | None]:
    """What the kube-apiserver-client signer makes of an approved request: (certificate PEM,
    None), or (None, the Failed condition's message) when the request is not one it may sign."""
    request = parse_request(request_bytes(csr))
    spec = csr.get("spec") or {}
    problem = api_client_usage_problem(spec.get("usages") or [])
    if problem:
        return None, problem
    try:
        sans = list(request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        sans = None
    return issue(ca_cert, ca_key, request.subject, request.public_key(), spec.get("usages") or [],
                 duration(spec.get("expirationSeconds")), sans), None


def client_certificate(pki: Path, user: str, groups: list[str] = (), ttl: int = DEFAULT_CERT_TTL,
                       now: datetime | None = None) -> tuple[bytes, bytes]:
    """A client certificate for `user` (CN) in `groups` (O values) signed by the lab CA, as the
    kube-apiserver-client signer would issue it, and its new EC P-256 key: (certificate PEM, key PEM)."""
    ca_cert, ca_key = load_ca(pki)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
                        + [x509.NameAttribute(NameOID.COMMON_NAME, user)])
    cert = issue(ca_cert, ca_key, subject, key.public_key(), ["digital signature", "client auth"], ttl, now=now)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    return cert, key_pem

