"""The Pods' ephemeralcontainers subresource as kube-apiserver v1.34 serves it (what `kubectl debug`
patches): EphemeralContainersREST (pkg/registry/core/pod/storage/storage.go) with
podEphemeralContainersStrategy (pkg/registry/core/pod/strategy.go) and
ValidatePodEphemeralContainersUpdate, ValidatePodCreate (pkg/apis/core/validation/validation.go);
admission sees an UPDATE of pods/ephemeralcontainers whose object is the whole Pod."""

from __future__ import annotations

import pytest

from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store

DEBUGGER = {"name": "debugger", "image": "busybox:1.36", "targetContainerName": "app"}


@pytest.fixture
def client(tmp_path):
    admin = LocalClient(Api(Registry(Store(tmp_path / "objects.db"))), "admin", ["system:masters"])
    admin.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    admin.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")
    admin.create("v1", "pods", {"metadata": {"name": "p", "labels": {"app": "p"}},
                                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}, "ns")
    return admin


def add_debugger(client, container=DEBUGGER, **changes):
    """kubectl debug's request: a strategic merge patch of the subresource."""
    patch = {"spec": {"ephemeralContainers": [container]}, **changes}
    return client.patch("v1", "pods", "p", patch, "strategic", "ns", subresource="ephemeralcontainers")


def refusal(call) -> ApiError:
    with pytest.raises(ApiError) as info:
        call()
    return info.value


def test_kubectl_debug_adds_an_ephemeral_container_and_nothing_else(client):
    before = client.get("v1", "pods", "p", "ns")
    pod = add_debugger(client, metadata={"labels": {"app": "changed"}},
                       spec={"ephemeralContainers": [DEBUGGER], "containers": [{"name": "app", "image": "nginx:1.28"}]})
    assert [c["name"] for c in pod["spec"]["ephemeralContainers"]] == ["debugger"]
    assert pod["spec"]["containers"] == before["spec"]["containers"]       # dropNonEphemeralContainerUpdates
    assert pod["metadata"]["labels"] == {"app": "p"}                       # ResetObjectMetaForStatus
    assert pod["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert client.get("v1", "pods", "p", "ns", subresource="ephemeralcontainers") == pod
    resources = {r["name"]: r for r in client.check(*client.request("GET", "/api/v1"))["resources"]}
    assert resources["pods/ephemeralcontainers"]["kind"] == "Pod"
    assert resources["pods/ephemeralcontainers"]["verbs"] == ["get", "patch", "update"]


def test_existing_ephemeral_containers_may_not_be_removed_or_changed(client):
    add_debugger(client)
    pod = client.get("v1", "pods", "p", "ns", subresource="ephemeralcontainers")
    pod["spec"]["ephemeralContainers"] = []
    error = refusal(lambda: client.update("v1", "pods", pod, "ns", subresource="ephemeralcontainers"))
    assert error.code == 422
    assert error.message == ('Pod "p" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral '
                             'containers "debugger" may not be removed\n')
    pod = client.get("v1", "pods", "p", "ns")
    pod["spec"]["ephemeralContainers"][0]["image"] = "busybox:1.37"
    error = refusal(lambda: client.update("v1", "pods", pod, "ns", subresource="ephemeralcontainers"))
    assert 'existing ephemeral containers "debugger" may not be changed' in error.message


def test_a_new_ephemeral_container_needs_a_free_name_and_an_image(client):
    error = refusal(lambda: add_debugger(client, {"name": "app", "image": ""}))
    assert error.message == ('Pod "p" is invalid: [spec.ephemeralContainers[0].name: Duplicate value: "app", '
                             'spec.ephemeralContainers[0].image: Required value]')


def test_ephemeral_containers_cannot_be_set_on_create_nor_by_a_pod_update(client):
    error = refusal(lambda: client.create("v1", "pods", {"metadata": {"name": "q"}, "spec": {
        "containers": [{"name": "app", "image": "nginx:1.27"}], "ephemeralContainers": [DEBUGGER]}}, "ns"))
    assert error.message == 'Pod "q" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create'
    error = refusal(lambda: client.patch("v1", "pods", "p", {"spec": {"ephemeralContainers": [DEBUGGER]}},
                                         "strategic", "ns"))
    assert "pod updates may not change fields other than" in error.message


def test_admission_sees_an_update_of_the_subresource_with_the_whole_pod(client):
    """A ValidatingAdmissionPolicy that matches `pods` only is not asked; one that matches
    pods/ephemeralcontainers judges the Pod with its new ephemeral container (object) against the
    stored one (oldObject)."""
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "no-latest"},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "operations": ["UPDATE"], "resources": ["pods"]}]},
                       "validations": [{"expression": "!has(object.spec.ephemeralContainers) || "
                                                      "object.spec.ephemeralContainers.all(c, c.image.contains(':'))"
                                                      " && !has(oldObject.spec.ephemeralContainers)"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": "no-latest"}, "spec": {"policyName": "no-latest", "validationActions": ["Deny"]}}
    client.create("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", policy)
    client.create("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", binding)
    add_debugger(client, {"name": "one", "image": "busybox"})            # `pods` does not match the subresource
    policy = client.get("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", "no-latest")
    policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = ["pods/ephemeralcontainers"]
    client.update("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", policy)
    error = refusal(lambda: add_debugger(client, {"name": "two", "image": "busybox:1.36"}))
    assert error.code == 422 and "no-latest" in error.message            # oldObject had "one" already
