"""Reference solution: break it as the prompt says, see the discovery failure, then delete the
stale APIService (metrics-server is gone for good); the namespace finishes by itself."""

import time

from labkit.apiserver.errors import ApiError


def _wait(predicate, timeout=90):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.2)


def solve(env):
    c = env.lab.environment_module().client(env)
    try:
        c.delete("v1", "services", "metrics-server", "kube-system")
    except ApiError as exc:         # already broken by hand
        if exc.code != 404:
            raise
    _wait(lambda: any(x.get("type") == "Available" and x.get("status") == "False" for x in c.get(
        "apiregistration.k8s.io/v1", "apiservices", "v1beta1.metrics.k8s.io").get("status", {}).get("conditions", [])))
    c.delete("v1", "namespaces", "monitoring", options={"propagationPolicy": "Background"})

    def discovery_failed():
        ns = c.get("v1", "namespaces", "monitoring")
        return any(x["type"] == "NamespaceDeletionDiscoveryFailure" and x["status"] == "True"
                   for x in ns.get("status", {}).get("conditions", []))

    _wait(discovery_failed)
    c.delete("apiregistration.k8s.io/v1", "apiservices", "v1beta1.metrics.k8s.io")
    _wait(lambda: c.request("GET", "/api/v1/namespaces/monitoring")[0] == 404)
