"""The server's TLS material: a private CA and a serving certificate for 127.0.0.1 / localhost,
made once per state directory in-process with the cryptography package (EC P-256 keys, mode
0600). The CA is also the client CA (--client-ca-file) and the signer of approved
CertificateSigningRequests. `self_signed_ca` and `issue_serving` are the same steps for other
CAs (the requests lab's webhook CA).

TLS is not optional: client-go (kubectl) sends bearer tokens only over HTTPS.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import ssl
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT, CA_KEY = "ca.crt", "ca.key"
SERVER_CERT, SERVER_KEY = "apiserver.crt", "apiserver.key"
SERVER_SANS = ("IP:127.0.0.1", "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default")


def write_private(path: Path, data: str | bytes) -> None:
    """Replace `path` with `data`, mode 0600 from the start, durably (keys, tokens, kubeconfigs)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def general_names(sans: list[str] | tuple[str, ...]) -> list[x509.GeneralName]:
    """subjectAltNames written as openssl writes them ("IP:127.0.0.1", "DNS:localhost")."""
    names: list[x509.GeneralName] = []
    for san in sans:
        kind, _, value = san.partition(":")
        if kind == "IP":
            names.append(x509.IPAddress(ipaddress.ip_address(value)))
        elif kind == "DNS":
            names.append(x509.DNSName(value))
        else:
            raise ValueError(f"subjectAltName {san!r}: expected IP:<address> or DNS:<name>")
    return names


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: x509.Name, issuer: x509.Name, public_key, days: int) -> x509.CertificateBuilder:
    now = datetime.now(timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(secrets.randbits(127) + 1)
            .not_valid_before(now).not_valid_after(now + timedelta(days=days))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False))


def self_signed_ca(common_name: str, days: int = 3650) -> tuple[bytes, bytes]:
    """A new CA: (certificate PEM, key PEM), basicConstraints CA:TRUE and keyCertSign/cRLSign, both critical."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(_name(common_name), _name(common_name), key.public_key(), days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue_serving(ca_cert_pem: bytes, ca_key_pem: bytes, common_name: str, sans: list[str] | tuple[str, ...],
                  days: int) -> tuple[bytes, bytes]:
    """A serving certificate for `sans` signed by the CA, and its new key: (certificate PEM, key PEM)."""
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(_name(common_name), ca_cert.subject, key.public_key(), days)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(general_names(sans)), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def ensure_certificates(directory: Path) -> Path:
    """Create the CA and serving certificate in `directory` unless present; returns the directory."""
    directory = Path(directory)
    if all((directory / f).exists() for f in (CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY)):
        return directory
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_cert, ca_key = self_signed_ca("labkit-ca")
    server_cert, server_key = issue_serving(ca_cert, ca_key, "kube-apiserver", SERVER_SANS, 3650)
    # the CA last: a directory interrupted half-way has no CA and is made again whole
    for name, data in ((SERVER_KEY, server_key), (SERVER_CERT, server_cert), (CA_KEY, ca_key), (CA_CERT, ca_cert)):
        write_private(directory / name, data)
    return directory


def server_context(directory: Path) -> ssl.SSLContext:
    """The ssl module's serving context for labkit's other HTTPS servers (the namespace lab's
    metrics backend): no client certificates asked for."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["http/1.1"])
    ctx.load_cert_chain(directory / SERVER_CERT, directory / SERVER_KEY)
    return ctx


def apiserver_context(directory: Path):
    """The API server's serving context: client certificates requested and accepted whatever
    they are, verified afterwards by the x509 authenticator (tlsserve.py says why pyOpenSSL)."""
    from labkit.apiserver.tlsserve import ServingContext
    return ServingContext(directory / SERVER_CERT, directory / SERVER_KEY)


def client_context(directory: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(directory / CA_CERT))
    return ctx
