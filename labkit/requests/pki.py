"""The requests lab's webhook CA and the serving certificates it signs, made in-process like the
API server's own (labkit.apiserver.certs). Keys are mode 0600.

The API server verifies a webhook's serving certificate against the configuration's
`clientConfig.caBundle`, and for `clientConfig.service` it dials `<service>.<namespace>.svc`
(staging/src/k8s.io/apiserver/pkg/util/webhook/authentication.go, serviceresolver.go): the
certificate's subjectAltName must hold that DNS name, or the IP/host of `clientConfig.url`.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from pathlib import Path

from labkit.errors import LabkitError

CA_CERT, CA_KEY = "ca.crt", "ca.key"
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def ensure_ca(directory: Path) -> Path:
    """The webhook CA in `directory` (made once)."""
    directory = Path(directory)
    if (directory / CA_CERT).exists() and (directory / CA_KEY).exists():
        return directory
    from labkit.apiserver.certs import self_signed_ca, write_private   # cryptography: only when certificates are made

    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    cert, key = self_signed_ca("labkit-webhook-ca")
    write_private(directory / CA_KEY, key)          # the certificate last: it marks the CA complete
    write_private(directory / CA_CERT, cert)
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
    from labkit.apiserver.certs import issue_serving as _issue, write_private

    directory = ensure_ca(directory)
    cert, key = _issue((directory / CA_CERT).read_bytes(), (directory / CA_KEY).read_bytes(), name, sans, 825)
    write_private(directory / f"{name}.key", key)
    write_private(directory / f"{name}.crt", cert)
    return directory / f"{name}.crt", directory / f"{name}.key"


def ca_bundle(directory: Path) -> str:
    """The CA certificate, base64-encoded as `clientConfig.caBundle` takes it."""
    return base64.b64encode((Path(directory) / CA_CERT).read_bytes()).decode()
