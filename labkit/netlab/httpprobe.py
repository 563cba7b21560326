"""Send HTTP requests from inside a lab host and report every reply (standard library only).

Run as a script inside a lab network namespace:

    httpprobe.py IP PORT [--count N] [--source IP] [--timeout S] [--parallel P]

Every request opens a new TCP connection (a new conntrack entry, so kube-proxy's `statistic`
and `recent` matches decide afresh for each one), sends `GET /`, and reads the reply. One JSON
line per request is printed in the order the requests were made:

    {"ok": true, "ms": 1.2, "status": 200, "body": {...the who-am-I reply...}}
    {"ok": false, "ms": 1000.4, "error": "timeout"}

`error` is one of refused, timeout, unreachable, reset, bad-reply or the OS error's name.
"""

import argparse
import errno
import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def _error_name(exc: OSError) -> str:
    if isinstance(exc, socket.timeout):
        return "timeout"
    return {
        errno.ECONNREFUSED: "refused",
        errno.EHOSTUNREACH: "unreachable",
        errno.ENETUNREACH: "unreachable",
        errno.ECONNRESET: "reset",
        errno.ETIMEDOUT: "timeout",
        errno.EADDRNOTAVAIL: "no-such-source",
    }.get(exc.errno, errno.errorcode.get(exc.errno or 0, type(exc).__name__))


def one_request(ip: str, port: int, source: str | None, timeout: float) -> dict:
    start = time.monotonic()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        if source:
            sock.bind((source, 0))
        sock.connect((ip, port))
        sock.sendall(f"GET / HTTP/1.0\r\nHost: {ip}:{port}\r\nUser-Agent: labkit-probe\r\n\r\n".encode())
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return {"ok": False, "ms": round((time.monotonic() - start) * 1000, 1), "error": _error_name(exc)}
    finally:
        sock.close()
    ms = round((time.monotonic() - start) * 1000, 1)
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
        reply = json.loads(body) if body.strip() else None
    except (IndexError, ValueError):
        return {"ok": False, "ms": ms, "error": "bad-reply", "raw": data[:200].decode(errors="replace")}
    return {"ok": status == 200, "ms": ms, "status": status, "body": reply}


def main() -> int:
    parser = argparse.ArgumentParser(description="HTTP requests from a lab host")
    parser.add_argument("ip")
    parser.add_argument("port", type=int)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--source")
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args()
    run = lambda _i: one_request(args.ip, args.port, args.source, args.timeout)
    if args.parallel > 1:
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            results = list(pool.map(run, range(args.count)))
    else:
        results = [run(i) for i in range(args.count)]
    sys.stdout.write("".join(json.dumps(r) + "\n" for r in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
