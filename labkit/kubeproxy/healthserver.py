"""kube-proxy's service health server for one lab node (standard library only).

Run as a script inside a node's network namespace:

    healthserver.py --config FILE [--ready-fd N]

FILE is JSON written by labkit at every sync of the node (labkit.kubeproxy.live):

    {"services": [{"namespace": "default", "name": "shop-lb", "port": 31234, "localEndpoints": 2}]}

Like kube-proxy's (Kubernetes v1.34, pkg/proxy/healthcheck/service_health.go, hcHandler.ServeHTTP),
it listens on each Service's healthCheckNodePort and answers any path with 200 when the node has
ready local endpoints for the Service and 503 when it has none, so a load balancer stops sending to
nodes that would drop the traffic (externalTrafficPolicy: Local). The body is the JSON kube-proxy
writes (json.MarshalIndent with a tab):

    {"service": {"namespace": ..., "name": ...}, "localEndpoints": N, "serviceProxyHealthy": true}

with the headers Content-Type: application/json, X-Content-Type-Options: nosniff and
X-Load-Balancing-Endpoint-Weight: N. The file is re-read when it changes: listeners open and close
as Services gain or lose a healthCheckNodePort.
"""

import argparse
import json
import os
import selectors
import signal
import socket
import threading

POLL_SECONDS = 0.2


def _reply(conn: socket.socket, service: dict) -> None:
    try:
        conn.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data and b"\n\n" not in data and len(data) < 16384:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        count = int(service.get("localEndpoints", 0))
        body = json.dumps({"service": {"namespace": service["namespace"], "name": service["name"]},
                           "localEndpoints": count, "serviceProxyHealthy": True}, indent="\t").encode()
        status = b"200 OK" if count > 0 else b"503 Service Unavailable"
        head = (b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"
                + f"X-Load-Balancing-Endpoint-Weight: {count}\r\nContent-Length: {len(body)}\r\n".encode()
                + b"Connection: close\r\n\r\n")
        conn.sendall(head + (b"" if data.startswith(b"HEAD ") else body))
    except OSError:
        pass
    finally:
        conn.close()


class Server:
    def __init__(self, path: str):
        self.path = path
        self.selector = selectors.DefaultSelector()
        self.listeners: dict[int, socket.socket] = {}
        self.services: dict[int, dict] = {}
        self.stamp = None

    def reload(self) -> None:
        try:
            stamp = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            stamp = None
        if stamp == self.stamp:
            return
        self.stamp = stamp
        try:
            with open(self.path) as f:
                wanted = {int(s["port"]): s for s in json.load(f).get("services", [])}
        except (OSError, ValueError, KeyError, TypeError):
            return
        for port in set(self.listeners) - set(wanted):
            self.selector.unregister(self.listeners[port])
            self.listeners.pop(port).close()
        for port in set(wanted) - set(self.listeners):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind(("0.0.0.0", port))
            except OSError as exc:
                print(f"healthCheckNodePort {port}: {exc}", flush=True)
                listener.close()
                continue
            listener.listen(64)
            self.listeners[port] = listener
            self.selector.register(listener, selectors.EVENT_READ, port)
        self.services = wanted

    def serve(self) -> None:
        while True:
            self.reload()
            for key, _ in self.selector.select(POLL_SECONDS):
                try:
                    conn, _ = key.fileobj.accept()
                except OSError:
                    continue
                service = self.services.get(key.data)
                if service is None:
                    conn.close()
                    continue
                threading.Thread(target=_reply, args=(conn, service), daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(description="kube-proxy's service health server for a lab node")
    parser.add_argument("--config", required=True)
    parser.add_argument("--ready-fd", type=int)
    args = parser.parse_args()
    server = Server(args.config)
    server.reload()
    if args.ready_fd is not None:
        os.write(args.ready_fd, b"1")
        os.close(args.ready_fd)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server.serve()


if __name__ == "__main__":
    main()
