"""Pod validation of container ports and resource names as kube-apiserver v1.34 answers it
(pkg/apis/core/validation/validation.go validateContainerPorts, validateContainerResourceName;
k8s.io/apimachinery/pkg/util/validation IsValidPortNum)."""

from __future__ import annotations

import pytest

from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store


@pytest.fixture
def client(tmp_path):
    admin = LocalClient(Api(Registry(Store(tmp_path / "objects.db"))), "admin", ["system:masters"])
    admin.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    admin.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")    # the controller's
    return admin


def refused(client, container: dict, kind="pods") -> str:
    body = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx", **container}]}}
    with pytest.raises(ApiError) as info:
        client.create("v1", kind, body, "ns")
    assert info.value.code == 422
    return info.value.message


def test_container_port_out_of_range(client):
    assert refused(client, {"ports": [{"containerPort": 99999}]}) == (
        'Pod "p" is invalid: spec.containers[0].ports[0].containerPort: Invalid value: 99999: must be between 1 and '
        "65535, inclusive")
    assert refused(client, {"ports": [{"containerPort": 80, "hostPort": 70000}]}) == (
        'Pod "p" is invalid: spec.containers[0].ports[0].hostPort: Invalid value: 70000: must be between 1 and '
        "65535, inclusive")
    assert refused(client, {"ports": [{"containerPort": 80, "protocol": "HTTP"}]}) == (
        'Pod "p" is invalid: spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: '
        '"SCTP", "TCP", "UDP"')


def test_resource_name_must_be_standard_or_qualified(client):
    # requests are defaulted from limits first (SetDefaults_Pod), so both name the resource
    assert refused(client, {"resources": {"limits": {"gpu": "1"}}}) == (
        'Pod "p" is invalid: [spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard '
        "resource type or fully qualified, spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must "
        "be a standard resource type or fully qualified]")
    assert refused(client, {"resources": {"requests": {"gpu": "1"}}}) == (
        'Pod "p" is invalid: spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard '
        "resource type or fully qualified")


def test_valid_ports_and_resources_are_stored(client):
    pod = client.create("v1", "pods", {"metadata": {"name": "ok"}, "spec": {"containers": [{
        "name": "c", "image": "nginx", "ports": [{"containerPort": 8080}],
        "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1", "hugepages-2Mi": "2Mi", "memory": "1Gi"}}}]}},
        "ns")
    assert pod["spec"]["containers"][0]["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
