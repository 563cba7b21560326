"""Namespace lab figures: how long the namespace controller takes to empty and remove a namespace
of 1,000 ConfigMaps, 200 Secrets and 100 Deployments (the workload controllers do not run),
measured from its first pass (upstream waits 5 s after the
DELETE before it looks, which is not counted), and one pass over a namespace held by a
finalizer (discovery, deletecollection and list of every resource type, conditions).

Run as `scripts/bench namespace`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from figures import Figure  # noqa: E402

CONFIGMAPS, SECRETS, DEPLOYMENTS = 1000, 200, 100


def _fill(c, namespace: str) -> int:
    for i in range(CONFIGMAPS):
        c.create("v1", "configmaps", {"metadata": {"name": f"cm-{i}"}, "data": {"k": "v" * 64}}, namespace)
    for i in range(SECRETS):
        c.create("v1", "secrets", {"metadata": {"name": f"s-{i}"}, "stringData": {"k": "v"}}, namespace)
    for i in range(DEPLOYMENTS):
        labels = {"app": f"d{i}"}
        c.create("apps/v1", "deployments", {"metadata": {"name": f"d-{i}"}, "spec": {
            "replicas": 0, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}},
            namespace)
    return CONFIGMAPS + SECRETS + DEPLOYMENTS


def run() -> list[Figure]:
    from labkit.apiserver.server import EmbeddedServer
    from labkit.controllers import namespace as nsc

    with tempfile.TemporaryDirectory(prefix="labkit-ns-bench-") as tmp:
        server = EmbeddedServer(Path(tmp), controllers=["garbagecollector", "namespace"]).start()
        try:
            c = server.client()
            c.create("v1", "namespaces", {"metadata": {"name": "bench"}})
            total = _fill(c, "bench")
            stored = sum(len(c.list(v, r, "bench")[0]) for v, r in (("v1", "configmaps"), ("v1", "secrets"),
                                                                     ("apps/v1", "deployments")))
            assert stored == total, (stored, total)
            controller = server.controllers.get("namespace")
            controller.grace_period = 0.0       # start the clock at the controller's first pass
            start = time.perf_counter()
            c.delete("v1", "namespaces", "bench")
            done = False
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if c.request("GET", "/api/v1/namespaces/bench")[0] == 404:
                    done = True
                    break
                time.sleep(0.02)
            emptied = time.perf_counter() - start
            left = sum(len(c.list(v, r, "bench")[0]) for v, r in (("v1", "configmaps"), ("v1", "secrets"),
                                                                   ("apps/v1", "deployments")))

            c.create("v1", "namespaces", {"metadata": {"name": "held"}})
            c.create("v1", "configmaps", {"metadata": {"name": "keep", "finalizers": ["example.com/keep"]}}, "held")
            c.delete("v1", "namespaces", "held")
            time.sleep(1.0)
            deleter = nsc.NamespacedResourcesDeleter(c, server.decisions)
            passes = []
            for _ in range(5):
                t = time.perf_counter()
                try:
                    deleter.delete("held")
                except nsc.ResourcesRemaining:
                    pass
                passes.append(time.perf_counter() - t)
            passes.sort()
            return [
                Figure("namespace", f"empty and remove a namespace of {total} objects, "
                       "from the controller's first pass", round(emptied, 2), "s", target="< 10 s",
                       met=done and not left and emptied < 10,
                       note="" if done and not left else f"not finished in 120 s or {left} objects left"),
                Figure("namespace", "one deleter pass over a namespace held by a finalizer (median of 5)",
                       round(passes[2] * 1000, 1), "ms"),
            ]
        finally:
            server.stop()


if __name__ == "__main__":
    for figure in run():
        print(f"{figure.name}: {figure.shown()}")
