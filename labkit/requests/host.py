"""Serves a student's admission webhook function over HTTPS: the process `labkit requests webhook
serve FILE` starts for the requests lab.

FILE defines `review(admission_review: dict) -> dict`: it gets the AdmissionReview the API server
POSTs (admission.k8s.io/v1, the object under `request`) and returns the AdmissionReview to answer
(`response.uid` echoing `request.uid`, `allowed`, and for a mutation `patchType: JSONPatch` with
`patch` the base64 of a JSON Patch). The host does only HTTPS and JSON: what goes into the answer
is the student's, as in a webhook they would deploy. A function that raises answers 500, and the
traceback goes to the log.

    python -m labkit.requests.host --file FILE --cert CRT --key KEY --port PORT
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import ssl
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def load(path: Path):
    spec = importlib.util.spec_from_file_location("student_webhook", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    fn = getattr(module, "review", None)
    if not callable(fn):
        raise SystemExit(f"{path} defines no function review(admission_review): see `labkit requests webhook serve --help`")
    return fn


def summary(review: dict, answer) -> str:
    req = review.get("request") or {}
    what = f"{req.get('operation', '?')} {req.get('resource', {}).get('resource', '?')} " \
           f"{req.get('namespace') or ''}/{req.get('name') or (req.get('object') or {}).get('metadata', {}).get('generateName', '')}"
    if not isinstance(answer, dict):
        return f"{what} -> answered {type(answer).__name__}, not an AdmissionReview"
    resp = answer.get("response") or {}
    patch = " with a patch" if resp.get("patch") else ""
    return f"{what} (uid {req.get('uid', '?')}) -> allowed={resp.get('allowed')}{patch}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    review = load(args.file)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and
        # the API server's delayed ACK would add 40 ms to every call of the webhook
        disable_nagle_algorithm = True

        def log_message(self, format, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                incoming = json.loads(body)
                answer = review(incoming)
                data = json.dumps(answer).encode()
                code = 200
                print(f"POST {self.path}: {summary(incoming, answer)}", flush=True)
            except Exception:
                data, code = b'{"error": "the webhook function failed: see its log"}', 500
                print(f"POST {self.path}: the function raised:\n{traceback.format_exc()}", flush=True)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"serving review() of {args.file} on https://{args.host}:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
