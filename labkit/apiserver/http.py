"""The HTTP front end: HTTPS (HTTP/1.1, keep-alive) on 127.0.0.1, each request through the
handler chain with authentication (filters/chain.py; authn.py: client certificates, bearer
tokens, ServiceAccount tokens, anonymous), request bodies by Content-Length or chunked (kubectl
`replace --raw` streams them), a 3 MiB body limit like kube-apiserver's, and streamed (chunked)
watch responses. Every failure is answered with
a Kubernetes Status object; no request can stop the server.
"""

from __future__ import annotations

import json
import select
import socket
import ssl
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from labkit.apiserver.authn import Authenticator
from labkit.apiserver.errors import ApiError, bad_request, too_large
from labkit.apiserver.filters.chain import build_handler_chain
from labkit.apiserver.handler import Api
from labkit.apiserver.response import Response
from labkit.apiserver.request import Request
from labkit.apiserver.trace import Trace

MAX_BODY_BYTES = 3 * 1024 * 1024
DRAIN_LIMIT = 64 * 1024 * 1024        # a larger body is not even read: the connection is closed


def encode(body) -> bytes:
    """JSON as Go's json.Encoder writes it: compact, one newline at the end."""
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    # Go's encoding/json escapes <, > and & in strings (HTMLEscape); they occur only in strings
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return text.encode() + b"\n"


class ApiHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, api: Api, authenticator: Authenticator, ssl_context=None):
        # ssl_context: anything with the ssl module's wrap_socket(sock, server_side=True) (tlsserve.py)
        self.api = api
        self.authenticator = authenticator
        self.handler = build_handler_chain(api, authenticator)     # filters/chain.py
        self.ssl_context = ssl_context
        super().__init__(address, _Handler)
        self.api.server_address = f"{self.server_address[0]}:{self.server_address[1]}"

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ssl.SSLError, socket.timeout, OSError)):
            return      # a client that went away
        print(f"labkit-apiserver: connection from {client_address[0]} failed: {exc!r}", file=sys.stderr)

    def finish_request(self, request, client_address):
        # headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and
        # the client's delayed ACK would add 40 ms to every answer
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is None:
            return super().finish_request(request, client_address)
        # the TLS handshake happens here, in the connection's own thread, not in accept()
        request.settimeout(30)
        try:
            tls = self.ssl_context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "labkit-apiserver"
    sys_version = ""
    timeout = 600                    # idle keep-alive connections are closed after this

    def log_message(self, format, *args):   # access logging is the audit log's job
        pass

    def send_error(self, code, message=None, explain=None):
        """Protocol-level errors (bad request line, huge headers) as Status objects too."""
        reason = {400: "BadRequest", 404: "NotFound", 405: "MethodNotAllowed", 408: "Timeout",
                  413: "RequestEntityTooLarge", 414: "RequestURITooLong", 431: "RequestHeaderFieldsTooLarge",
                  501: "MethodNotAllowed", 505: "BadRequest"}.get(code, "BadRequest")
        status = ApiError(code, reason, message or self.responses.get(code, ("error",))[0]).status()
        try:
            self.close_connection = True
            self._send(Response(code, status))
        except OSError:
            pass

    def do_GET(self):
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    # -- request -------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks, total, chunks_dropped = [], 0, False
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    raise bad_request("unexpected end of chunked request body")
                try:
                    size = int(line.split(b";")[0].strip() or b"x", 16)
                except ValueError:
                    raise bad_request("malformed chunked request body")
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    if chunks_dropped:
                        raise too_large(MAX_BODY_BYTES)
                    return b"".join(chunks)
                total += size
                if total > DRAIN_LIMIT:
                    self.close_connection = True
                    raise too_large(MAX_BODY_BYTES)
                data = self.rfile.read(size)
                if total <= MAX_BODY_BYTES:
                    chunks.append(data)
                self.rfile.readline(16)
                if total > MAX_BODY_BYTES and not chunks_dropped:
                    chunks, chunks_dropped = [], True     # read on to the end, then refuse
        length = self.headers.get("Content-Length")
        if not length:
            return b""
        try:
            length = int(length)
        except ValueError:
            self.close_connection = True
            raise bad_request("invalid Content-Length")
        if length < 0:
            self.close_connection = True
            raise bad_request("invalid Content-Length")
        if length > MAX_BODY_BYTES:
            if length <= DRAIN_LIMIT:       # read it away, so the client gets to read the answer
                while length > 0:
                    data = self.rfile.read(min(length, 1 << 20))
                    if not data:
                        break
                    length -= len(data)
            else:
                self.close_connection = True
            raise too_large(MAX_BODY_BYTES)
        return self.rfile.read(length)

    def _serve(self):
        try:
            url = urlsplit(self.path)
            query = dict(parse_qsl(url.query, keep_blank_values=True))
            headers = {k.lower(): v for k, v in self.headers.items()}
            if "Authorization" in self.headers:     # the first one, as Go's Header.Get reads it
                headers["authorization"] = self.headers.get("Authorization")
            trace = Trace(str(uuid.uuid4()))
            certificate = self.connection.getpeercert(binary_form=True) \
                if self.server.ssl_context is not None else None
            request = Request(self.command, url.path, query, headers, self._read_body(),
                              source=self.client_address[0], trace=trace, certificate=certificate, uri=self.path)
            request.impersonation = [(k.lower(), v) for k, v in self.headers.items()
                                     if k.lower().startswith("impersonate-")]
            response = self.server.handler(request)
        except ApiError as exc:
            response = Response(exc.code, exc.status())
        except Exception as exc:
            print(f"labkit-apiserver: request failed: {exc!r}", file=sys.stderr)
            response = Response(500, ApiError(500, "InternalError", f"Internal error occurred: {exc}").status())
            self.close_connection = True
        try:
            if response.stream is not None:
                self._stream(response)
            else:
                self._send(response)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            self.close_connection = True
            if response.stream is not None:
                response.stream.close()

    # -- response ------------------------------------------------------------------------------
    def _send(self, response: Response) -> None:
        data = encode(response.body) if response.body is not None else b""
        self.send_response(response.code)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Length", str(len(data)))
        for text in response.warnings:
            self.send_header("Warning", f"299 - {json.dumps(text)}")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _stream(self, response: Response) -> None:
        self.send_response(response.code)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for event in response.stream.events():
            if event is None:
                if self._client_gone():
                    response.stream.close()
                    self.close_connection = True
                    return
                continue
            data = encode(event)
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _client_gone(self) -> bool:
        """Whether the client of a streaming watch closed the connection (it sends nothing else)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            self.connection.setblocking(False)
            try:
                return self.connection.recv(1) == b""
            except (ssl.SSLWantReadError, BlockingIOError):
                return False        # e.g. a TLS record that carried no data
            finally:
                self.connection.settimeout(self.timeout)
        except (OSError, ValueError):
            return True


class HttpFrontend:
    """The HTTP server running in a background thread."""

    def __init__(self, api: Api, authenticator: Authenticator, port: int = 0, host: str = "127.0.0.1",
                 ssl_context=None):
        self.httpd = ApiHTTPServer((host, port), api, authenticator, ssl_context)
        self.scheme = "https" if ssl_context else "http"
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.httpd.server_address[0]}:{self.port}"

    def start(self) -> None:
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="apiserver-http", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.thread:
            self.thread.join(timeout=5)

