"""Common wrong repairs of broken-apiservice: each breaks the API as the prompt says, lets the
namespace wait on the failing discovery, then brings back a Service that a real kube-aggregator
would still not route to."""

import time

from labkit.apiserver.errors import ApiError
from labkit.exercises import mistake

NAMESPACE, SERVICE = "monitoring", ("kube-system", "metrics-server")


def _wait(predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"the situation the mistake starts from was not reached within {timeout} s "
                                 f"({predicate.__doc__ or predicate.__name__})")
        time.sleep(0.2)


def _break(env):
    """What the prompt asks: delete the Service, then the namespace, and see it wait."""
    return env.lab.environment_module().uninstall_metrics_server(env)


def _service(selector, target_port, port_name="https"):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE[1]},
            "spec": {"selector": selector, "ports": [{"name": port_name, "port": 443, "targetPort": target_port}]}}


@mistake("no ready endpoints")
def empty_service(env):
    """Brings the Service back with `kubectl -n kube-system create service clusterip metrics-server
    --tcp=443:10250`: its selector (app=metrics-server) matches no Pod."""
    c = _break(env)
    c.create("v1", "services", _service({"app": "metrics-server"}, 10250, "443-10250"), SERVICE[0])


@mistake("no ready endpoints")
def nothing_ready_behind_it(env):
    """Brings the Service back exactly as it was, but metrics-server's Deployment is scaled to zero:
    nothing ready behind the selector."""
    c = _break(env)
    c.patch("apps/v1", "deployments", SERVICE[1], {"spec": {"replicas": 0}}, "merge", SERVICE[0])
    c.create("v1", "services", _service({"k8s-app": "metrics-server"}, "https"), SERVICE[0])


@mistake("does not answer discovery")
def wrong_target_port(env):
    """Brings the Service back selecting the metrics-server Pod, but with targetPort 10250 (the
    kubelet's port, as in many manifests), where metrics-server's process does not listen."""
    c = _break(env)
    c.create("v1", "services", _service({"k8s-app": "metrics-server"}, 10250), SERVICE[0])


@mistake("besides v1beta1.metrics.k8s.io", "stay as they were")
def deletes_every_apiservice(env):
    """`kubectl delete apiservice --all`: the stale one goes, and with it the Local APIServices of
    the API server's own groups."""
    c = _break(env)
    for item in c.list("apiregistration.k8s.io/v1", "apiservices")[0]:
        try:
            c.delete("apiregistration.k8s.io/v1", "apiservices", item["metadata"]["name"])
        except ApiError as exc:
            if exc.code != 404:
                raise


@mistake("even if you put it back later", "patch: service none")
def makes_it_local_for_a_while(env):
    """Patches the APIService to Local (`spec.service: null`): discovery no longer fails on the group and
    monitoring finishes; then patches it back to kube-system/metrics-server and brings the Service back as it
    was, so that everything looks as it should."""
    c = _break(env)
    apiservices = ("apiregistration.k8s.io/v1", "apiservices", "v1beta1.metrics.k8s.io")
    c.patch(*apiservices, {"spec": {"service": None, "insecureSkipTLSVerify": False}}, "merge")
    _wait(lambda: c.request("GET", f"/api/v1/namespaces/{NAMESPACE}")[0] == 404)
    c.patch(*apiservices, {"spec": {"service": {"name": SERVICE[1], "namespace": SERVICE[0], "port": 443},
                                    "insecureSkipTLSVerify": True}}, "merge")
    c.create("v1", "services", _service({"k8s-app": "metrics-server"}, "https"), SERVICE[0])


@mistake("or deleted it", "create: service none")
def recreates_it_local_then_deletes_it(env):
    """Deletes the APIService and creates it again without `spec.service` (Local): discovery no
    longer fails on the group and monitoring finishes; then deletes it, so that what stays is the
    accepted fix (the APIService deleted). The same detour as patching it Local, by delete and create."""
    c = _break(env)
    apiservices = ("apiregistration.k8s.io/v1", "apiservices")
    c.delete(*apiservices, "v1beta1.metrics.k8s.io")
    c.create(*apiservices, {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                            "metadata": {"name": "v1beta1.metrics.k8s.io"},
                            "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                                     "groupPriorityMinimum": 100, "versionPriority": 100}})
    _wait(lambda: c.request("GET", f"/api/v1/namespaces/{NAMESPACE}")[0] == 404)
    c.delete(*apiservices, "v1beta1.metrics.k8s.io")
