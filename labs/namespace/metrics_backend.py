"""The namespace lab's metrics-server stand-in: a real HTTPS server, run by the lab as the process of
the Pod behind the Service kube-system/metrics-server, that answers the discovery requests an
aggregated API server must answer (what kube-aggregator's availability check and proxy ask for):

  GET /apis/metrics.k8s.io/v1beta1   the APIResourceList metrics-server serves (nodes, pods)
  GET /apis/metrics.k8s.io           the APIGroup
  GET .../nodes, .../pods, .../namespaces/<ns>/pods   empty NodeMetricsList / PodMetricsList
  GET /livez, /readyz, /healthz      ok

Everything else answers 404. It measures nothing (its lists are empty): the lab needs its
discovery, and clients that list every discovered resource need its lists to answer.

    python metrics_backend.py --address 127.0.89.2 --pki DIR --port-file FILE

listens on an unused port of `--address` (TLS with a certificate made in DIR) and writes that
port to FILE once it listens.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from labkit.apiserver import certs

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
RESOURCES = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}",
             "resources": [{"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics",
                            "verbs": ["get", "list"]},
                           {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics",
                            "verbs": ["get", "list"]}]}
GROUP_DOC = {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
             "versions": [{"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}],
             "preferredVersion": {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}}


def _is_list(path: str) -> bool:
    parts = path.split("/")[4:]         # after /apis/metrics.k8s.io/v1beta1
    return parts in (["nodes"], ["pods"]) or (len(parts) == 3 and parts[0] == "namespaces" and parts[2] == "pods")


class Handler(BaseHTTPRequestHandler):
    # headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and the
    # API server's delayed ACK would add 40 ms to every answer
    disable_nagle_algorithm = True

    def do_GET(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/livez", "/readyz", "/healthz"):
            self._send(200, b"ok", "text/plain; charset=utf-8")
        elif path == f"/apis/{GROUP}/{VERSION}":
            self._send(200, json.dumps(RESOURCES).encode(), "application/json")
        elif path == f"/apis/{GROUP}":
            self._send(200, json.dumps(GROUP_DOC).encode(), "application/json")
        elif _is_list(path):
            kind = "NodeMetricsList" if path.endswith("/nodes") else "PodMetricsList"
            body = {"kind": kind, "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": []}
            self._send(200, json.dumps(body).encode(), "application/json")
        else:
            body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "the server could not find the requested resource", "reason": "NotFound", "code": 404}
            self._send(404, json.dumps(body).encode(), "application/json")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):     # one line per request in the lab's log
        print(f"{self.address_string()} {fmt % args}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--pki", required=True)
    parser.add_argument("--port-file", required=True)
    args = parser.parse_args()
    pki = certs.ensure_certificates(Path(args.pki))
    server = ThreadingHTTPServer((args.address, 0), Handler)
    server.socket = certs.server_context(pki).wrap_socket(server.socket, server_side=True)
    tmp = Path(args.port_file + ".tmp")
    tmp.write_text(f"{server.server_address[1]}\n")
    os.replace(tmp, args.port_file)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server.serve_forever()


if __name__ == "__main__":
    main()
