"""The Pods' resize subresource as kube-apiserver v1.34 serves it (InPlacePodVerticalScaling, beta
and on by default): ResizeREST (pkg/registry/core/pod/storage/storage.go) with podResizeStrategy
(pkg/registry/core/pod/strategy.go) and ValidatePodResize (pkg/apis/core/validation/validation.go),
in-process and through real kubectl (`kubectl patch pod --subresource resize`)."""

from __future__ import annotations

import json

import pytest

from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store
from support import embedded_server, kubectl, wait_until

RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}


def pod(name="p", container_resources=RESOURCES, policy=None, **spec):
    container = {"name": "app", "image": "nginx:1.27", "resources": container_resources}
    if policy is not None:
        container["resizePolicy"] = policy
    return {"metadata": {"name": name}, "spec": {"containers": [container], **spec}}


@pytest.fixture
def client(tmp_path):
    admin = LocalClient(Api(Registry(Store(tmp_path / "objects.db"))), "admin", ["system:masters"])
    admin.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    admin.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")
    admin.create("v1", "pods", pod(), "ns")
    return admin


def resize(client, resources=None, name="p", **container):
    patch = {"spec": {"containers": [{"name": "app", **({"resources": resources} if resources else {}),
                                      **container}]}}
    return client.patch("v1", "pods", name, patch, "strategic", "ns", subresource="resize")


def refusal(call) -> str:
    with pytest.raises(ApiError) as info:
        call()
    assert info.value.code == 422
    return info.value.message


def test_a_resize_changes_cpu_and_memory_and_nothing_else(client):
    before = client.get("v1", "pods", "p", "ns")
    after = resize(client, {"requests": {"cpu": "150m", "memory": "96Mi"}, "limits": {"cpu": "300m"}},
                   image="nginx:1.28")
    assert after["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "150m", "memory": "96Mi"},
                                                           "limits": {"cpu": "300m", "memory": "128Mi"}}
    assert after["spec"]["containers"][0]["image"] == "nginx:1.27"       # dropNonResizeUpdates
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert after["status"]["qosClass"] == "Burstable"
    resources = {r["name"]: r for r in client.check(*client.request("GET", "/api/v1"))["resources"]}
    assert resources["pods/resize"]["kind"] == "Pod"
    assert resources["pods/resize"]["verbs"] == ["get", "patch", "update"]


def test_a_plain_update_still_may_not_change_resources(client):
    message = refusal(lambda: client.patch("v1", "pods", "p", {"spec": {"containers": [
        {"name": "app", "resources": {"requests": {"cpu": "150m"}}}]}}, "strategic", "ns"))
    assert "pod updates may not change fields other than" in message


def test_memory_limits_are_not_lowered_nor_added_unless_the_container_restarts(client):
    assert refusal(lambda: resize(client, {"limits": {"memory": "100Mi"}})) == (
        'Pod "p" is invalid: spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be '
        'decreased unless resizePolicy is RestartContainer')
    # the policy is the container's from its creation: a resize may not change it
    restart = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    assert refusal(lambda: resize(client, {"limits": {"memory": "100Mi"}}, resizePolicy=restart)) == (
        'Pod "p" is invalid: spec: Forbidden: only cpu and memory resources are mutable')
    client.create("v1", "pods", pod("restarts", policy=restart), "ns")
    after = resize(client, {"limits": {"memory": "100Mi"}}, name="restarts")
    assert after["spec"]["containers"][0]["resources"]["limits"]["memory"] == "100Mi"
    client.create("v1", "pods", pod("nolimit", {"requests": {"cpu": "100m"}}), "ns")
    # the patched Pod is defaulted again: the new limit becomes the memory request too, and that
    # request brings a resizePolicy entry the Pod did not have
    assert refusal(lambda: resize(client, {"limits": {"memory": "1Gi"}}, name="nolimit")) == (
        'Pod "nolimit" is invalid: [spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot '
        'be added unless resizePolicy is RestartContainer, spec: Forbidden: only cpu and memory resources are '
        'mutable]')


def test_the_qos_class_stays_and_requests_stay(client):
    assert refusal(lambda: resize(client, {"requests": {"cpu": "200m", "memory": "128Mi"}})) == (
        'Pod "p" is invalid: spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing')
    client.create("v1", "pods", pod("nolimit", {"requests": {"cpu": "100m", "memory": "64Mi"}}), "ns")
    body = client.get("v1", "pods", "nolimit", "ns", subresource="resize")
    del body["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    message = refusal(lambda: client.update("v1", "pods", body, "ns", subresource="resize"))
    assert "spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed" in message


def test_only_cpu_and_memory_change_and_pod_level_resources_cannot_be_resized(client):
    assert refusal(lambda: resize(client, {"limits": {"ephemeral-storage": "1Gi"}})) == (
        'Pod "p" is invalid: spec: Forbidden: only cpu and memory resources are mutable')
    client.create("v1", "pods", pod("podlevel", {"requests": {"cpu": "100m"}}, resources={"limits": {"cpu": "1"}}),
                  "ns")
    assert refusal(lambda: resize(client, {"requests": {"cpu": "500m"}}, name="podlevel")) == (
        'Pod "podlevel" is invalid: : Forbidden: pods with pod-level resources cannot be resized')


def test_init_containers_resize_only_when_they_are_sidecars(client):
    init = {"name": "setup", "image": "busybox:1.36", "resources": {"requests": {"cpu": "100m"}}}
    client.create("v1", "pods", pod("withinit", initContainers=[init, dict(init, name="proxy", restartPolicy="Always")]),
                  "ns")

    def resize_init(name):
        return client.patch("v1", "pods", "withinit", {"spec": {"initContainers": [
            {"name": name, "resources": {"requests": {"cpu": "300m"}}}]}}, "strategic", "ns", subresource="resize")
    assert refusal(lambda: resize_init("setup")) == (
        'Pod "withinit" is invalid: spec: Forbidden: resources for non-sidecar init containers are immutable')
    after = resize_init("proxy")
    assert after["spec"]["initContainers"][1]["resources"]["requests"]["cpu"] == "300m"


def test_a_node_without_resize_support_is_named(client):
    current = client.get("v1", "pods", "p", "ns")
    current["status"] = {"phase": "Running", "qosClass": "Burstable", "containerStatuses": [
        {"name": "app", "ready": True, "restartCount": 0, "image": "nginx:1.27", "imageID": "",
         "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}
    client.update("v1", "pods", current, "ns", subresource="status")
    assert refusal(lambda: resize(client, {"requests": {"cpu": "150m"}})) == (
        'Pod "p" is invalid: spec: Forbidden: Pod running on node without support for resize')


def test_the_api_server_defaults_the_resize_policy_of_containers_with_requests(client):
    stored = client.get("v1", "pods", "p", "ns")["spec"]["containers"][0]
    assert stored["resizePolicy"] == [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                                      {"resourceName": "memory", "restartPolicy": "NotRequired"}]
    client.create("v1", "pods", pod("mixed", policy=[{"resourceName": "memory", "restartPolicy": "RestartContainer"}]),
                  "ns")
    assert client.get("v1", "pods", "mixed", "ns")["spec"]["containers"][0]["resizePolicy"] == [
        {"resourceName": "memory", "restartPolicy": "RestartContainer"},
        {"resourceName": "cpu", "restartPolicy": "NotRequired"}]
    client.create("v1", "pods", pod("none", {}), "ns")
    assert "resizePolicy" not in client.get("v1", "pods", "none", "ns")["spec"]["containers"][0]


def test_kubectl_resizes_a_pod_of_the_node_stand_in(tmp_path):
    """`kubectl patch pod --subresource resize`; kubelet v1.34 reports containerStatuses[*].resources
    (so the API server takes resizes for its Pods) and, once a resize is actuated, the new values
    with allocatedResources."""
    with embedded_server(tmp_path / "state", tmp_path, controllers=["serviceaccount", "node"]) as server:
        kubectl(server, "create", "serviceaccount", "default")
        kubectl(server, "create", "-f", "-", input=json.dumps(dict(pod("web"), apiVersion="v1", kind="Pod")),
                check=True)

        def status():
            out = kubectl(server, "get", "pod", "web", "-o", "json", check=True)
            return json.loads(out.stdout)["status"].get("containerStatuses") or [{}]
        assert wait_until(lambda: status()[0].get("resources") == RESOURCES, timeout=30)
        assert status()[0]["allocatedResources"] == RESOURCES["requests"]
        out = kubectl(server, "patch", "pod", "web", "--subresource", "resize", "-p",
                      '{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"150m"}}}]}}', check=True)
        assert out.stdout.strip() == "pod/web patched"
        assert wait_until(lambda: status()[0]["resources"]["requests"]["cpu"] == "150m", timeout=30)
        assert status()[0]["allocatedResources"] == {"cpu": "150m", "memory": "64Mi"}
        refused = kubectl(server, "patch", "pod", "web", "--subresource", "resize", "-p",
                          '{"spec":{"containers":[{"name":"app","resources":{"limits":{"memory":"64Mi"}}}]}}')
        assert refused.returncode == 1
        assert ('The Pod "web" is invalid: spec.containers[0].resources.limits[memory]: Forbidden: memory limits '
                'cannot be decreased unless resizePolicy is RestartContainer') in refused.stderr
