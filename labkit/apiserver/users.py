"""Users of the embedded server for labs: a client certificate for a user and groups, signed by
the lab CA as the kube-apiserver-client signer signs an approved CertificateSigningRequest
(CN = user, O = groups), and a kubeconfig for a user with a certificate or a bearer token.

    from labkit.apiserver import users
    cert, key = users.client_certificate(info.state_dir / "pki", "alice", ["dev"])
    users.write_kubeconfig(path, info.url, info.state_dir / "pki", "alice", certificate=cert, key=key)
    users.write_kubeconfig(path, info.url, info.state_dir / "pki", "robot", token=token)
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

from labkit.apiserver.certificates import DEFAULT_CERT_TTL, client_certificate as _client_certificate
from labkit.apiserver.certs import CA_CERT, write_private


def client_certificate(pki: str | os.PathLike, user: str, groups: list[str] | tuple[str, ...] = (),
                       ttl: int = DEFAULT_CERT_TTL) -> tuple[bytes, bytes]:
    """(certificate PEM, private key PEM) for `user` in `groups`, valid for `ttl` seconds."""
    return _client_certificate(Path(pki), user, list(groups), ttl)


def kubeconfig_text(url: str, ca_pem: bytes, user: str, *, token: str | None = None, certificate: bytes | None = None,
                    key: bytes | None = None, namespace: str = "default", cluster: str = "labkit") -> str:
    """A kubeconfig with one cluster, one user (a bearer token, or a client certificate and key,
    embedded) and one context, current."""
    if (token is None) == (certificate is None) or (certificate is None) != (key is None):
        raise ValueError("a kubeconfig user has either a token or a client certificate with its key")
    credentials = {"token": token} if token is not None else {
        "client-certificate-data": base64.b64encode(certificate).decode(),
        "client-key-data": base64.b64encode(key).decode()}
    context = cluster if user == "labkit-admin" else f"{user}@{cluster}"
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": cluster, "cluster": {"server": url,
                                                   "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user, "namespace": namespace}}],
        "current-context": context,
    }, sort_keys=False)


def write_kubeconfig(path: str | os.PathLike, url: str, pki: str | os.PathLike, user: str, **credentials) -> Path:
    """Write `kubeconfig_text` for `user` to `path` with mode 0600 (it holds a credential)."""
    path = Path(path)
    write_private(path, kubeconfig_text(url, (Path(pki) / CA_CERT).read_bytes(), user, **credentials))
    return path
