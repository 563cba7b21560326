"""The pod-policy webhook's backend in the requests lab: a real HTTPS admission webhook, run by
the lab as the process of the Pod behind the Service policy/pod-policy (host network, so the Pod's
IP is the node's address where this process listens).

  POST /validate   AdmissionReview v1: refuses Pods with a privileged container, allows the rest
  POST /mutate     AdmissionReview v1: allows, changes nothing

    python policy_backend.py --address 127.0.89.2 --cert CRT --key KEY --port-file FILE

listens on an unused port of `--address` and writes that port to FILE once it listens.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def privileged(pod: dict) -> list[str]:
    spec = pod.get("spec") or {}
    return [c.get("name", "?") for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
            if ((c.get("securityContext") or {}).get("privileged"))]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and the
    # API server's delayed ACK would add 40 ms to every call of the webhook
    disable_nagle_algorithm = True

    def log_message(self, format, *args):
        pass

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        request = review.get("request") or {}
        response = {"uid": request.get("uid", ""), "allowed": True}
        if self.path.split("?")[0] == "/validate":
            names = privileged(request.get("object") or {})
            if names:
                response = {"uid": request.get("uid", ""), "allowed": False,
                            "status": {"code": 403, "message": f"privileged containers are not allowed: {', '.join(names)}"}}
        data = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--port-file", type=Path, required=True)
    args = parser.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    server = ThreadingHTTPServer((args.address, 0), Handler)
    server.daemon_threads = True
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tmp = args.port_file.with_name(args.port_file.name + ".tmp")
    tmp.write_text(str(server.server_address[1]))
    os.replace(tmp, args.port_file)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
