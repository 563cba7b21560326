"""The server's TLS material: a private CA and a serving certificate for 127.0.0.1 / localhost,
made once per state directory with the openssl command (keys mode 0600). The CA is also the
client CA (--client-ca-file) and the signer of approved CertificateSigningRequests.

TLS is not optional: client-go (kubectl) sends bearer tokens only over HTTPS.
"""

from __future__ import annotations

import ctypes
import os
import ssl
import subprocess
import tempfile
from pathlib import Path

from labkit.errors import LabkitError

CA_CERT, CA_KEY = "ca.crt", "ca.key"
SERVER_CERT, SERVER_KEY = "apiserver.crt", "apiserver.key"


def _openssl(*args: str, cwd: Path) -> None:
    try:
        subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise LabkitError("the openssl command is missing: run scripts/setup (it installs the openssl package)")
    except subprocess.CalledProcessError as exc:
        raise LabkitError(f"openssl {' '.join(args[:2])} failed: {exc.stderr.strip()}")


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


def ensure_certificates(directory: Path) -> Path:
    """Create the CA and serving certificate in `directory` unless present; returns the directory."""
    directory = Path(directory)
    if all((directory / f).exists() for f in (CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY)):
        return directory
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    old_umask = os.umask(0o077)
    try:
        with tempfile.TemporaryDirectory(dir=directory, prefix=".certs-") as tmp:
            work = Path(tmp)
            curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
            _openssl("req", "-x509", *curve, "-keyout", CA_KEY, "-out", CA_CERT, "-days", "3650",
                     "-subj", "/CN=labkit-ca", "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=work)
            _openssl("req", "-new", *curve, "-keyout", SERVER_KEY, "-out", "apiserver.csr",
                     "-subj", "/CN=kube-apiserver", cwd=work)
            (work / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,"
                                          "DNS:kubernetes.default\nextendedKeyUsage=serverAuth\n"
                                          "keyUsage=critical,digitalSignature,keyEncipherment\n")
            _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", CA_CERT, "-CAkey", CA_KEY,
                     "-CAcreateserial", "-out", SERVER_CERT, "-days", "3650", "-extfile", "ext.cnf", cwd=work)
            for name in (CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY):
                os.chmod(work / name, 0o600)
                os.replace(work / name, directory / name)
    finally:
        os.umask(old_umask)
    return directory


def server_context(directory: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["http/1.1"])
    ctx.load_cert_chain(directory / SERVER_CERT, directory / SERVER_KEY)
    if not request_client_certificates(ctx):
        # this Python's ssl module cannot be reached: verify during the handshake instead, so a
        # foreign or expired certificate fails the handshake rather than earning a 401
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(cafile=str(directory / CA_CERT))
    return ctx


# int verify_callback(int preverify_ok, X509_STORE_CTX *ctx)
_VERIFY_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_ACCEPT_ANY = _VERIFY_CALLBACK(lambda preverify_ok, store: 1)   # kept alive as long as the module


def request_client_certificates(ctx: ssl.SSLContext) -> bool:
    """Ask every client for a certificate and accept the handshake whatever it presents, as Go's
    tls.RequestClientCert does for kube-apiserver (server/options/serving.go): the x509
    authenticator verifies the certificate afterwards, so an expired or foreign one is a 401
    with a reason in the trace, not a failed handshake.

    Python's ssl module can only ask for a certificate with verification on (CERT_OPTIONAL);
    an OpenSSL verify callback that accepts every certificate turns that into "request". It is
    set on the SSL_CTX under the SSLContext object (the first field after the object header in
    every CPython 3), checked through SSL_CTX_get_verify_mode before it is trusted. Returns False,
    with the context still asking for certificates (CERT_OPTIONAL), where that cannot be done."""
    import _ssl
    ctx.verify_mode = ssl.CERT_OPTIONAL
    try:
        lib = ctypes.CDLL(getattr(_ssl, "__file__", None))
    except OSError:
        return False
    lib.SSL_CTX_get_verify_mode.restype = ctypes.c_int
    lib.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
    lib.SSL_CTX_set_verify.restype = None
    lib.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VERIFY_CALLBACK]
    pointer = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
    if not pointer or lib.SSL_CTX_get_verify_mode(pointer) != 1:        # SSL_VERIFY_PEER
        return False
    lib.SSL_CTX_set_verify(pointer, 1, _ACCEPT_ANY)
    return True


def client_context(directory: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(directory / CA_CERT))
    return ctx
