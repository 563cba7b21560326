"""The requests lab's webhook CA and the serving certificates it signs, made with openssl like the
API server's own (labkit.apiserver.certs). Keys are mode 0600.

The API server verifies a webhook's serving certificate against the configuration's
`clientConfig.caBundle`, and for `clientConfig.service` it dials `<service>.<namespace>.svc`
(staging/src/k8s.io/apiserver/pkg/util/webhook/authentication.go, serviceresolver.go): the
certificate's subjectAltName must hold that DNS name, or the IP/host of `clientConfig.url`.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
import tempfile
from pathlib import Path

from labkit.apiserver.certs import _openssl
from labkit.errors import LabkitError

CA_CERT, CA_KEY = "ca.crt", "ca.key"
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def ensure_ca(directory: Path) -> Path:
    """The webhook CA in `directory` (made once)."""
    directory = Path(directory)
    if (directory / CA_CERT).exists() and (directory / CA_KEY).exists():
        return directory
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    old = os.umask(0o077)
    try:
        with tempfile.TemporaryDirectory(dir=directory, prefix=".ca-") as tmp:
            _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", CA_KEY, "-out", CA_CERT, "-days", "3650", "-subj", "/CN=labkit-webhook-ca",
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=Path(tmp))
            for name in (CA_CERT, CA_KEY):
                os.replace(Path(tmp) / name, directory / name)
    finally:
        os.umask(old)
    return directory


def sans_for(name: str, namespace: str | None = None, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> list[str]:
    """subjectAltNames: the Service DNS names the API server dials (when `namespace` is given), and `hosts`."""
    sans = []
    if namespace:
        sans += [f"DNS:{name}.{namespace}.svc", f"DNS:{name}.{namespace}.svc.cluster.local"]
    for host in hosts:
        try:
            ipaddress.ip_address(host)
            sans.append(f"IP:{host}")
        except ValueError:
            sans.append(f"DNS:{host}")
    return sans


def issue_serving(directory: Path, name: str, sans: list[str]) -> tuple[Path, Path]:
    """A serving certificate `<name>.crt` / `<name>.key` in `directory`, signed by its CA."""
    if not NAME_RE.match(name):
        raise LabkitError(f"webhook name {name!r}: use lowercase letters, digits and dashes")
    directory = ensure_ca(directory)
    old = os.umask(0o077)
    try:
        with tempfile.TemporaryDirectory(dir=directory, prefix=".issue-") as tmp:
            work = Path(tmp)
            _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=work)
            (work / "ext.cnf").write_text(f"subjectAltName={','.join(sans)}\nextendedKeyUsage=serverAuth\n"
                                          "keyUsage=critical,digitalSignature,keyEncipherment\n")
            _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", str(directory / CA_CERT), "-CAkey",
                     str(directory / CA_KEY), "-CAcreateserial", "-out", f"{name}.crt", "-days", "825",
                     "-extfile", "ext.cnf", cwd=work)
            for suffix in (".crt", ".key"):
                os.replace(work / f"{name}{suffix}", directory / f"{name}{suffix}")
    finally:
        os.umask(old)
    return directory / f"{name}.crt", directory / f"{name}.key"


def ca_bundle(directory: Path) -> str:
    """The CA certificate, base64-encoded as `clientConfig.caBundle` takes it."""
    return base64.b64encode((Path(directory) / CA_CERT).read_bytes()).decode()
