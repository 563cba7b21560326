"""A tiny HTTP server for lab pods: every request is answered with who answered and who asked.

Run as a script inside a pod's network namespace (standard library only, so that it starts in a
few milliseconds with `python -I -S`):

    whoami.py --pod web-1 --node node1 --port 8080 [--port 9376] [--ready-fd N]

Each reply is `200 OK` with a one-line JSON body:

    {"pod": "web-1", "node": "node1", "address": "10.244.1.2", "port": 8080,
     "client": "10.244.2.1", "client_port": 40312}

`address`/`port` are where the connection arrived (after any DNAT: the pod's own address), and
`client`/`client_port` the peer the pod saw (after any SNAT/masquerade). With --ready-fd, one
byte is written to that file descriptor once every port is listening, then it is closed.
"""

import argparse
import json
import os
import selectors
import signal
import socket
import threading

MAX_HEADER = 16384


def _answer(conn: socket.socket, identity: dict) -> None:
    try:
        conn.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data and b"\n\n" not in data and len(data) < MAX_HEADER:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        here, there = conn.getsockname(), conn.getpeername()
        body = json.dumps({**identity, "address": here[0], "port": here[1],
                           "client": there[0], "client_port": there[1]}) + "\n"
        head = data.split(b" ", 1)[0]
        payload = b"" if head == b"HEAD" else body.encode()
        conn.sendall(
            b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode() + payload
        )
    except OSError:
        pass
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="who-am-I HTTP server for lab pods")
    parser.add_argument("--pod", required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--port", type=int, action="append", required=True)
    parser.add_argument("--ready-fd", type=int)
    args = parser.parse_args()
    identity = {"pod": args.pod, "node": args.node}

    selector = selectors.DefaultSelector()
    for port in args.port:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", port))
        listener.listen(128)
        selector.register(listener, selectors.EVENT_READ)
    if args.ready_fd is not None:
        os.write(args.ready_fd, b"1")
        os.close(args.ready_fd)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        for key, _ in selector.select():
            try:
                conn, _ = key.fileobj.accept()
            except OSError:
                continue
            threading.Thread(target=_answer, args=(conn, identity), daemon=True).start()


if __name__ == "__main__":
    main()
