"""Reference solution: remove the finalizer from the Backup that holds reports; the namespace
controller then empties the namespace and removes its kubernetes finalizer itself."""

import time


def solve(env):
    c = env.lab.environment_module().client(env)
    c.patch("example.com/v1", "backups", "nightly", [{"op": "remove", "path": "/metadata/finalizers"}], "json",
            "reports")
    deadline = time.monotonic() + 60
    while c.request("GET", "/api/v1/namespaces/reports")[0] == 200 and time.monotonic() < deadline:
        time.sleep(0.2)
