"""`labkit ns versions`: the same namespace deleted on a fresh embedded server emulating each
release, to show what OrderedNamespaceDeletion changed (pkg/controller/namespace/deletion/
namespaced_resources_deleter.go deleteAllContent; the gate: off by default in 1.30–1.32, on from
1.33, GA and locked on in 1.34 — labkit/apiserver/version.py).

The namespace holds a Deployment's pod that takes `grace` seconds to stop, a Service and a
ConfigMap. The timeline says when each object got its deletionTimestamp and when it was gone,
counted from the namespace's DELETE.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass

NAMESPACE = "demo"


@dataclass
class Timeline:
    version: str
    ordered: bool
    events: list[tuple[float, str]]     # (seconds after the DELETE, what happened)


def _objects(grace: int) -> list[tuple[str, str, dict]]:
    labels = {"app": "web"}
    return [
        ("apps/v1", "deployments", {"metadata": {"name": "web"}, "spec": {
            "replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "terminationGracePeriodSeconds": grace,
                # sleep as PID 1 ignores SIGTERM: the kubelet kills it when the grace period is over
                "containers": [{"name": "web", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}}}}),
        ("v1", "services", {"metadata": {"name": "web"}, "spec": {"selector": labels, "ports": [{"port": 80}]}}),
        ("v1", "configmaps", {"metadata": {"name": "settings"}, "data": {"mode": "demo"}}),
    ]


def deletion_timeline(emulated_version: str, grace: int = 3, timeout: float = 90.0) -> Timeline:
    from labkit.apiserver.errors import ApiError
    from labkit.apiserver.server import EmbeddedServer

    with tempfile.TemporaryDirectory(prefix="labkit-ns-versions-") as tmp:
        server = EmbeddedServer(tmp, controllers=["garbagecollector", "deployment", "replicaset", "node",
                                                  "serviceaccount", "namespace"],
                                emulated_version=emulated_version).start()
        try:
            c = server.client()
            c.create("v1", "namespaces", {"metadata": {"name": NAMESPACE}})
            for api_version, resource, body in _objects(grace):
                c.create(api_version, resource, body, NAMESPACE)
            watched = [("v1", "pods", "pod"), ("apps/v1", "replicasets", "replicaset"),
                       ("apps/v1", "deployments", "deployment"), ("v1", "services", "service"),
                       ("v1", "configmaps", "configmap")]
            deadline = time.monotonic() + 30
            while not c.list("v1", "pods", NAMESPACE)[0] or not server.idle():
                if time.monotonic() > deadline:
                    raise RuntimeError("the demo's pod did not start")
                time.sleep(0.05)
            start = time.monotonic()
            c.delete("v1", "namespaces", NAMESPACE)
            events: list[tuple[float, str]] = []
            seen: dict[str, str] = {}           # "kind/name" -> deleting | gone
            known: set[str] = set()
            while time.monotonic() - start < timeout:
                now = round(time.monotonic() - start, 1)
                present = set()
                for api_version, resource, kind in watched:
                    for obj in c.list(api_version, resource, NAMESPACE)[0]:
                        key = f"{kind}/{obj['metadata']['name']}"
                        present.add(key)
                        known.add(key)
                        if obj["metadata"].get("deletionTimestamp") and key not in seen:
                            seen[key] = "deleting"
                            events.append((now, f"{key} deleting"))
                for key in sorted(known - present):
                    if seen.get(key) != "gone":
                        seen[key] = "gone"
                        events.append((now, f"{key} gone"))
                try:
                    c.get("v1", "namespaces", NAMESPACE)
                except ApiError as exc:
                    if exc.code == 404:
                        events.append((now, f"namespace {NAMESPACE} gone"))
                        break
                    raise
                time.sleep(0.1)
            return Timeline(server.api.version.name, server.api.version.enabled("OrderedNamespaceDeletion"), events)
        finally:
            server.stop()


def render(timelines: list[Timeline], grace: int) -> str:
    lines = [f"Namespace {NAMESPACE!r}: a Deployment's pod that takes {grace} s to stop, a Service, a ConfigMap; "
             "deleted at 0 s (the controller's first pass comes 5 s later).", ""]
    for t in timelines:
        lines.append(f"Kubernetes {t.version}: OrderedNamespaceDeletion={'true' if t.ordered else 'false'}"
                     + (" — pods first; nothing else is deleted until they are gone" if t.ordered else
                        " — every resource is deleted in the same pass, pods included"))
        for at, what in t.events:
            lines.append(f"  {at:5.1f} s  {what}")
        lines.append("")
    return "\n".join(lines)
