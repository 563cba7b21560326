"""ResourceQuota served, the ResourceQuota admission plugin with upstream's texts, and the resource
quota controller keeping status.used, seen through real kubectl.

Expected values from kubernetes v1.34: staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/
controller.go
(checkQuotas, prettyPrint), pkg/quota/v1/evaluator/core/pods.go (Constraints,
podComputeUsageHelper, PodUsageFunc), pkg/controller/resourcequota/resource_quota_controller.go
(syncResourceQuota), pkg/printers/internalversion printResourceQuota.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

from labkit.apiserver.admission.resourcequota import calculate_usage, pod_compute_usage, pretty
from labkit.apiserver.errors import ApiError
from labkit.quantity import Quantity
from support import embedded_server, kubectl

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home")) as srv:
        yield srv


def eventually(fn, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def namespace(server, name: str, hard: dict, quota: str = "compute"):
    client = server.client()
    client.create("v1", "namespaces", {"metadata": {"name": name}})
    eventually(lambda: client.get_or_none("v1", "serviceaccounts", "default", name), "the default account")
    client.create("v1", "resourcequotas", {"metadata": {"name": quota}, "spec": {"hard": hard}}, name)
    # the resource quota controller fills in status.hard and status.used
    return eventually(lambda: (client.get("v1", "resourcequotas", quota, name).get("status") or {}).get("used")
                      is not None and client.get("v1", "resourcequotas", quota, name), "the quota's status")


def pod(name: str, **resources) -> dict:
    container = {"name": "c", "image": "nginx:1.27"}
    if resources:
        container["resources"] = resources
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container]}}


def test_usage_of_a_pod():
    usage = pod_compute_usage({"spec": {"containers": [
        {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}},
        {"name": "b", "resources": {"requests": {"cpu": "250m"}}}],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}}]}})
    # PodRequests: max(sum of containers, largest init container)
    assert pretty(usage) == ("cpu=1,limits.memory=128Mi,memory=64Mi,pods=1,requests.cpu=1,"
                             "requests.memory=64Mi")
    assert pretty({"a": Quantity.parse("500m"), "b": Quantity.parse("1Gi")}) == "a=500m,b=1Gi"


def test_scoped_quota_counts_only_matching_pods():
    quota = {"spec": {"hard": {"pods": "5"}, "scopes": ["BestEffort"]}}
    pods = [{"spec": {"containers": [{"name": "c"}]}},
            {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
            {"spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Succeeded"}}]
    assert calculate_usage(quota, {("", "pods"): pods}) == {"pods": "1"}


def test_the_controller_fills_in_the_status_and_kubectl_shows_it(server):
    quota = namespace(server, "q1", {"pods": "2", "requests.cpu": "1", "limits.memory": "1Gi"})
    assert quota["status"] == {"hard": {"pods": "2", "requests.cpu": "1", "limits.memory": "1Gi"},
                               "used": {"pods": "0", "requests.cpu": "0", "limits.memory": "0"}}
    got = kubectl(server, "get", "quota", "-n", "q1", "--no-headers")
    assert got.returncode == 0, got.stderr
    assert got.stdout.split(None, 2)[2].strip() == "pods: 0/2, requests.cpu: 0/1   limits.memory: 0/1Gi"
    described = kubectl(server, "describe", "namespace", "q1").stdout
    assert "Resource Quotas" in described and "requests.cpu   0     1" in described


def test_pods_must_name_what_the_quota_tracks(server):
    namespace(server, "q2", {"requests.cpu": "1", "limits.memory": "1Gi"})
    result = kubectl(server, "apply", "-n", "q2", "-f", "-", input=json.dumps(pod("bare")))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": pods "bare" is forbidden: failed quota: '
        "compute: must specify limits.memory for: c; requests.cpu for: c")


def test_creates_are_charged_and_refused_beyond_the_quota(server):
    client = server.client()
    namespace(server, "q3", {"pods": "2", "requests.cpu": "1"})
    client.create("v1", "pods", pod("a", requests={"cpu": "600m"}), "q3")
    # the admission plugin wrote the new usage itself, before any controller ran
    assert client.get("v1", "resourcequotas", "compute", "q3")["status"]["used"] == {"pods": "1",
                                                                                     "requests.cpu": "600m"}
    result = kubectl(server, "run", "b", "-n", "q3", "--image=nginx:1.27", "--overrides",
                     json.dumps({"spec": {"containers": [{"name": "b", "image": "nginx:1.27",
                                                          "resources": {"requests": {"cpu": "500m"}}}]}}))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'Error from server (Forbidden): pods "b" is forbidden: exceeded quota: compute, requested: '
        "requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1")
    # deleting the Pod gives its share back (the controller's replenishment)
    client.delete("v1", "pods", "a", "q3", options={"gracePeriodSeconds": 0})
    eventually(lambda: client.get("v1", "resourcequotas", "compute", "q3")["status"]["used"]
               == {"pods": "0", "requests.cpu": "0"}, "the usage to drop")
    client.create("v1", "pods", pod("b", requests={"cpu": "500m"}), "q3")


def test_object_counts(server):
    client = server.client()
    namespace(server, "q4", {"configmaps": "1", "count/secrets": "1"}, quota="objects")
    # the root CA publisher's kube-root-ca.crt is already one ConfigMap
    status = eventually(lambda: (s := client.get("v1", "resourcequotas", "objects", "q4")["status"])["used"].get(
        "configmaps") == "1" and s, "kube-root-ca.crt to be counted")
    assert status["used"] == {"configmaps": "1", "count/secrets": "0"}
    with pytest.raises(ApiError) as info:
        client.create("v1", "configmaps", {"metadata": {"name": "more"}}, "q4")
    assert info.value.message == ('configmaps "more" is forbidden: exceeded quota: objects, requested: '
                                  "configmaps=1, used: configmaps=1, limited: configmaps=1")
    client.create("v1", "secrets", {"metadata": {"name": "one"}}, "q4")
    with pytest.raises(ApiError) as info:
        client.create("v1", "secrets", {"metadata": {"name": "two"}}, "q4")
    assert info.value.message.endswith("requested: count/secrets=1, used: count/secrets=1, "
                                       "limited: count/secrets=1")


def test_a_quota_without_status_blocks_what_it_limits(tmp_path):
    """Without the controller nothing fills in status.used: hasUsageStats fails."""
    from labkit.apiserver.client import LocalClient
    from labkit.apiserver.handler import Api
    from labkit.apiserver.registry.store import Registry
    from labkit.apiserver.storage import Store
    client = LocalClient(Api(Registry(Store(tmp_path / "objects.db"))), "admin",
                         ["system:masters", "system:authenticated"])
    client.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    client.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")
    created = client.create("v1", "resourcequotas", {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "1"}},
                                                     "status": {"used": {"pods": "9"}}}, "ns")
    assert "status" not in created          # PrepareForCreate drops it
    client.create("v1", "configmaps", {"metadata": {"name": "free"}}, "ns")      # not limited
    client.update("v1", "resourcequotas", dict(created, status={"hard": {"pods": "1"}}), "ns", subresource="status")
    with pytest.raises(ApiError) as info:
        client.create("v1", "pods", pod("p"), "ns")
    assert info.value.message == 'pods "p" is forbidden: status unknown for quota: q, resources: pods'
    with pytest.raises(ApiError) as info:
        client.create("v1", "resourcequotas", {"metadata": {"name": "bad"}, "spec": {"hard": {"pods": "-1"}}}, "ns")
    assert info.value.code == 422 and "spec.hard[pods]: Invalid value: \"-1\"" in info.value.message
