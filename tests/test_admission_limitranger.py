"""LimitRange served and the LimitRanger admission plugin: defaults with the limit-ranger annotation,
min/max/ratio violations with upstream's texts, LimitRange defaulting and validation.

Expected values from kubernetes v1.34 plugin/pkg/admission/limitranger/admission.go
(mergeContainerResources, minConstraint, maxConstraint, limitRequestRatioConstraint,
PodValidateLimitFunc) and admission_test.go; pkg/apis/core/v1/defaults.go SetDefaults_LimitRangeItem;
pkg/apis/core/validation ValidateLimitRange.
"""

from __future__ import annotations

import pytest

from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store


@pytest.fixture
def client(tmp_path):
    api = Api(Registry(Store(tmp_path / "objects.db")))
    admin = LocalClient(api, "admin", ["system:masters", "system:authenticated"])
    admin.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    admin.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")    # the controller's
    return admin


def limits(client, *items, name="limits"):
    return client.create("v1", "limitranges", {"metadata": {"name": name}, "spec": {"limits": list(items)}}, "ns")


def pod(name="p", resources=None, init=None):
    spec = {"containers": [{"name": "web", "image": "busybox:1.36", **({"resources": resources} if resources else {})}]}
    if init is not None:
        spec["initContainers"] = [{"name": "setup", "image": "busybox:1.36", "resources": init}]
    return {"metadata": {"name": name}, "spec": spec}


def refused(client, body) -> str:
    with pytest.raises(ApiError) as info:
        client.create("v1", "pods", body, "ns")
    assert info.value.code == 403
    return info.value.message


def test_limit_range_defaulting(client):
    item = limits(client, {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}})["spec"]["limits"][0]
    # SetDefaults_LimitRangeItem: default from max, defaultRequest from default, then from min
    assert item["default"] == {"cpu": "2"}
    assert item["defaultRequest"] == {"cpu": "2", "memory": "64Mi"}


def test_defaults_fill_in_and_annotate(client):
    limits(client, {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                    "defaultRequest": {"cpu": "100m", "memory": "128Mi"}})
    created = client.create("v1", "pods", pod(resources={"limits": {"memory": "512Mi"}}, init={}), "ns")
    web, setup = created["spec"]["containers"][0], created["spec"]["initContainers"][0]
    # the memory request came from the limit (pod defaulting), before admission
    assert web["resources"] == {"limits": {"cpu": "500m", "memory": "512Mi"},
                                "requests": {"cpu": "100m", "memory": "512Mi"}}
    assert setup["resources"] == {"limits": {"cpu": "500m", "memory": "256Mi"},
                                  "requests": {"cpu": "100m", "memory": "128Mi"}}
    assert created["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu request for container web; cpu limit for container web; "
        "cpu, memory request for init container setup; cpu, memory limit for init container setup")
    assert created["status"]["qosClass"] == "Burstable"


def test_min_and_max_per_container(client):
    limits(client, {"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1"}})
    assert refused(client, pod(resources={"requests": {"cpu": "50m"}, "limits": {"cpu": "1"}})) == (
        'pods "p" is forbidden: minimum cpu usage per Container is 100m, but request is 50m')
    assert refused(client, pod(resources={"limits": {"cpu": "2"}})) == (
        'pods "p" is forbidden: maximum cpu usage per Container is 1, but limit is 2')
    # no limit: the default (from max) fills it in, so the pod passes
    spec = client.create("v1", "pods", pod(resources={"requests": {"cpu": "200m"}}), "ns")["spec"]
    assert spec["containers"][0]["resources"]["limits"] == {"cpu": "1"}


def test_every_violation_is_reported(client):
    limits(client, {"type": "Container", "max": {"cpu": "1", "memory": "1Gi"}})
    message = refused(client, pod(resources={"limits": {"cpu": "2", "memory": "2Gi"}}))
    assert message == ('pods "p" is forbidden: [maximum cpu usage per Container is 1, but limit is 2, '
                       "maximum memory usage per Container is 1Gi, but limit is 2Gi]")


def test_limit_to_request_ratio(client):
    limits(client, {"type": "Container", "maxLimitRequestRatio": {"memory": "2"}})
    assert refused(client, pod(resources={"requests": {"memory": "100Mi"}, "limits": {"memory": "300Mi"}})) == (
        'pods "p" is forbidden: memory max limit to request ratio per Container is 2, but provided ratio is 3.000000')
    assert refused(client, pod(resources={"requests": {"cpu": "1"}})) == (
        'pods "p" is forbidden: memory max limit to request ratio per Container is 2, but no request is specified '
        "or request is 0")


def test_pod_item_checks_the_aggregate(client):
    limits(client, {"type": "Pod", "max": {"memory": "1Gi"}})
    body = pod(resources={"limits": {"memory": "768Mi"}})
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1.36",
                                       "resources": {"limits": {"memory": "512Mi"}}})
    assert refused(client, body) == 'pods "p" is forbidden: maximum memory usage per Pod is 1Gi, but limit is 1280Mi'


def test_invalid_limit_range(client):
    with pytest.raises(ApiError) as info:
        limits(client, {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}})
    assert info.value.code == 422
    assert "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1" in info.value.message
    with pytest.raises(ApiError) as info:
        limits(client, {"type": "Pod", "default": {"cpu": "1"}})
    assert "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'" in info.value.message


def test_updates_are_not_checked(client):
    created = client.create("v1", "pods", pod(resources={"limits": {"cpu": "2"}}), "ns")
    limits(client, {"type": "Container", "max": {"cpu": "1"}})
    created["metadata"]["labels"] = {"after": "limits"}
    client.update("v1", "pods", created, "ns")      # SupportsAttributes: pod updates are skipped
