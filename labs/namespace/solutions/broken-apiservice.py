"""Reference solution: break it as the prompt says, see the discovery failure, then delete the
stale APIService (metrics-server is gone for good); the namespace finishes by itself."""

import time


def _wait(predicate, timeout=90):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.2)


def solve(env):
    c = env.lab.environment_module().uninstall_metrics_server(env)
    c.delete("apiregistration.k8s.io/v1", "apiservices", "v1beta1.metrics.k8s.io")
    _wait(lambda: c.request("GET", "/api/v1/namespaces/monitoring")[0] == 404)
