"""TLS for the embedded API server: every client is asked for a certificate and the handshake
accepts whatever it presents, as Go's tls.RequestClientCert does for kube-apiserver
(staging/src/k8s.io/apiserver/pkg/server/options/serving.go, SecureServingOptions.ApplyTo:
`ClientAuth = tls.RequestClientCert` once a client CA is configured). The x509 authenticator
verifies the certificate afterwards (authn.py), so an expired or foreign certificate is a 401 with
its reason, not a failed handshake.

Python's ssl module cannot do this: CERT_OPTIONAL is Go's VerifyClientCertIfGiven (a certificate
that is sent is verified during the handshake, and an error aborts it), and the module has no
verify callback (python/cpython#75425, open). pyOpenSSL's `Context.set_verify` takes one, so the
server's connections are pyOpenSSL connections, dressed here as the few socket methods
http.server and the handler use (makefile, sendall, recv, settimeout, setblocking, fileno,
getpeercert, close).

pyOpenSSL reads and writes the file descriptor itself, so a Python socket timeout (which puts the
descriptor in non-blocking mode) would turn every read into WantReadError; timeouts are kernel
socket options here instead (SO_RCVTIMEO, SO_SNDTIMEO) on a blocking descriptor."""
from __future__ import annotations

import io
import socket
import ssl
import struct
from pathlib import Path

from cryptography.hazmat.primitives.serialization import Encoding
from OpenSSL import SSL

HANDSHAKE_TIMEOUT = 30.0


def _accept_any(connection, certificate, errnum, depth, ok) -> bool:
    return True


class ServingContext:
    """The API server's TLS settings: its serving certificate, TLS 1.2 or later, ALPN http/1.1,
    client certificates requested and not verified during the handshake. `wrap_socket` has the
    ssl module's signature for a server socket."""

    def __init__(self, cert_file: Path, key_file: Path):
        ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
        ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
        ctx.use_certificate_chain_file(str(cert_file))
        ctx.use_privatekey_file(str(key_file))
        ctx.check_privatekey()
        ctx.set_verify(SSL.VERIFY_PEER, _accept_any)        # request, never require or verify
        ctx.set_alpn_select_callback(lambda conn, offered: b"http/1.1" if b"http/1.1" in offered
                                     else SSL.NO_OVERLAPPING_PROTOCOLS)
        ctx.set_session_id(b"labkit-apiserver")
        self._ctx = ctx

    def wrap_socket(self, sock: socket.socket, server_side: bool = True) -> "TLSSocket":
        if not server_side:
            raise ValueError("the serving context serves only")
        wrapped = TLSSocket(SSL.Connection(self._ctx, sock), sock)
        wrapped.settimeout(sock.gettimeout() or HANDSHAKE_TIMEOUT)
        wrapped.do_handshake()
        return wrapped


def _translated(exc: Exception) -> OSError:
    """pyOpenSSL's errors as the ssl module's and the socket module's, which the server's
    handlers already tell apart (a client that went away is not reported)."""
    if isinstance(exc, SSL.ZeroReturnError):
        return ConnectionResetError("TLS connection closed")
    if isinstance(exc, SSL.SysCallError):
        code = exc.args[0] if exc.args else -1
        if code in (11, -1):                       # EAGAIN on SO_RCVTIMEO, or EOF without close_notify
            return socket.timeout("timed out") if code == 11 else ConnectionResetError("unexpected EOF")
        return ConnectionResetError(code, str(exc))
    if isinstance(exc, SSL.WantReadError):
        return ssl.SSLWantReadError("read would block")
    if isinstance(exc, SSL.WantWriteError):
        return ssl.SSLWantWriteError("write would block")
    return ssl.SSLError(str(exc))


class TLSSocket:
    """A pyOpenSSL server connection with the ssl.SSLSocket methods the HTTP server uses."""

    def __init__(self, connection: SSL.Connection, sock: socket.socket):
        self._conn = connection
        self._sock = sock
        self._blocking = True
        self._timeout: float | None = None
        connection.set_accept_state()

    # -- timeouts as kernel options on a blocking descriptor ---------------------------------------
    def settimeout(self, timeout: float | None) -> None:
        self._sock.setblocking(True)
        self._blocking = True
        self._timeout = timeout
        seconds = timeout or 0.0
        value = struct.pack("ll", int(seconds), int((seconds - int(seconds)) * 1_000_000))
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)

    def gettimeout(self) -> float | None:
        return self._timeout if self._blocking else 0.0

    def setblocking(self, flag: bool) -> None:
        if flag:
            self.settimeout(self._timeout)
        else:
            self._sock.setblocking(False)
            self._blocking = False

    def do_handshake(self) -> None:
        try:
            self._conn.do_handshake()
        except SSL.Error as exc:
            raise self._error(exc) from exc

    def _error(self, exc: Exception) -> OSError:
        if self._blocking and isinstance(exc, (SSL.WantReadError, SSL.WantWriteError)):
            return socket.timeout("timed out")      # SO_RCVTIMEO/SO_SNDTIMEO ran out
        return _translated(exc)

    # -- reading and writing -----------------------------------------------------------------------
    def recv(self, size: int) -> bytes:
        try:
            return self._conn.recv(size)
        except SSL.ZeroReturnError:
            return b""
        except SSL.SysCallError as exc:
            if exc.args and exc.args[0] == -1:      # the peer closed without close_notify
                return b""
            raise self._error(exc) from exc
        except SSL.Error as exc:
            raise self._error(exc) from exc

    def recv_into(self, buffer, nbytes: int = 0) -> int:
        data = self.recv(nbytes or len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def send(self, data) -> int:
        try:
            return self._conn.send(bytes(data))
        except SSL.Error as exc:
            raise self._error(exc) from exc

    def sendall(self, data) -> None:
        try:
            self._conn.sendall(bytes(data))
        except SSL.Error as exc:
            raise self._error(exc) from exc

    def makefile(self, mode: str = "rb", buffering: int = -1):
        if mode != "rb":
            raise ValueError("only reading files are made (http.server writes with sendall)")
        raw = socket.SocketIO(self, "rb")
        return io.BufferedReader(raw, io.DEFAULT_BUFFER_SIZE if buffering in (-1, 0, None) else buffering)

    def _decref_socketios(self) -> None:        # socket.SocketIO.close calls it
        pass

    def pending(self) -> int:
        return self._conn.pending()

    # -- what the handler asks of the connection --------------------------------------------------
    def fileno(self) -> int:
        return self._sock.fileno()

    def getpeercert(self, binary_form: bool = False):
        """The client's certificate, DER (binary_form) as the authenticator reads it; None when
        the client sent none."""
        if not binary_form:
            raise ValueError("only the DER form is served")
        certificate = self._conn.get_peer_certificate(as_cryptography=True)
        return None if certificate is None else certificate.public_bytes(Encoding.DER)

    def selected_alpn_protocol(self) -> str | None:
        protocol = self._conn.get_alpn_proto_negotiated()
        return protocol.decode() if protocol else None

    def version(self) -> str | None:
        return self._conn.get_protocol_version_name()

    def close(self) -> None:
        try:
            self._conn.shutdown()
        except SSL.Error:
            pass
        self._sock.close()
