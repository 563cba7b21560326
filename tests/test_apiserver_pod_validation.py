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


# -- extended resources: integers, not overcommitted (validateResourceRequirements,
#    ValidateResourceQuantityValue) ---------------------------------------------------------------

def test_extended_resource_request_must_equal_its_limit(client):
    assert refused(client, {"resources": {"requests": {"example.com/widget": "1"},
                                          "limits": {"example.com/widget": "2"}}}) == (
        'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
        "example.com/widget limit of 2")


def test_extended_resource_request_needs_a_limit(client):
    assert refused(client, {"resources": {"requests": {"example.com/widget": "1"}}}) == (
        'Pod "p" is invalid: spec.containers[0].resources.limits: Required value: Limit must be set for non '
        "overcommitable resources")


def test_extended_resource_must_be_an_integer(client):
    # the limit alone: the request is defaulted from it, so both say so
    message = refused(client, {"resources": {"limits": {"example.com/widget": "500m"}}})
    assert message == (
        'Pod "p" is invalid: [spec.containers[0].resources.limits[example.com/widget]: Invalid value: "500m": '
        'must be an integer, spec.containers[0].resources.requests[example.com/widget]: Invalid value: "500m": '
        "must be an integer]")
    assert "must be an integer" in refused(client, {"resources": {"limits": {"example.com/widget": "1.5"}}})


def test_init_container_resources_are_validated_too(client):
    body = {"metadata": {"name": "p"}, "spec": {
        "initContainers": [{"name": "i", "image": "nginx", "resources": {"requests": {"example.com/widget": "2"},
                                                                        "limits": {"example.com/widget": "3"}}}],
        "containers": [{"name": "c", "image": "nginx"}]}}
    with pytest.raises(ApiError) as info:
        client.create("v1", "pods", body, "ns")
    assert info.value.message == ('Pod "p" is invalid: spec.initContainers[0].resources.requests: Invalid value: '
                                  '"2": must be equal to example.com/widget limit of 3')


def test_native_requests_may_be_below_their_limit_not_above(client):
    ok = client.create("v1", "pods", {"metadata": {"name": "below"}, "spec": {"containers": [{
        "name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}}]}}, "ns")
    assert ok["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m"}
    assert refused(client, {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}) == (
        'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal '
        "to cpu limit of 1")


def test_whole_extended_resources_are_stored(client):
    pod = client.create("v1", "pods", {"metadata": {"name": "widgets"}, "spec": {"containers": [{
        "name": "c", "image": "nginx", "resources": {"limits": {"example.com/widget": "2"}}}]}}, "ns")
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"example.com/widget": "2"},
                                                         "requests": {"example.com/widget": "2"}}
def _pod(containers: list[dict], init: list[dict] | None = None) -> dict:
    spec = {"containers": containers, **({"initContainers": init} if init is not None else {})}
    return {"metadata": {"name": "p"}, "spec": spec}


# one case each of validateContainerPorts, validateContainers, validateInitContainers and
# validateResourceRequirements, with kube-apiserver v1.34's texts
SHARED_CASES = [
    ([{"name": "c", "image": "i", "ports": [{"containerPort": 80, "name": "Web_Port"}]}], None,
     'spec.containers[0].ports[0].name: Invalid value: "Web_Port": must contain only alpha-numeric characters '
     "(a-z, 0-9), and hyphens (-)"),
    ([{"name": "c", "image": "i", "ports": [{"containerPort": 80, "name": "a-much-too-long-name"}]}], None,
     'spec.containers[0].ports[0].name: Invalid value: "a-much-too-long-name": must be no more than 15 characters'),
    ([{"name": "c", "image": "i", "ports": [{"containerPort": 80, "name": "8080"}]}], None,
     'spec.containers[0].ports[0].name: Invalid value: "8080": must contain at least one letter (a-z)'),
    ([{"name": "c", "image": "i", "ports": [{"containerPort": 80, "name": "web--x"}]}], None,
     'spec.containers[0].ports[0].name: Invalid value: "web--x": must not contain consecutive hyphens'),
    ([{"name": "c", "image": "i", "ports": [{"containerPort": 80, "name": "web"},
                                            {"containerPort": 81, "name": "web"}]}], None,
     'spec.containers[0].ports[1].name: Duplicate value: "web"'),
    ([{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]},
      {"name": "d", "image": "i", "ports": [{"containerPort": 81, "hostPort": 8080}]}], None,
     'spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"'),
    ([{"name": "c", "image": "i"}, {"name": "c", "image": "i"}], None,
     'spec.containers[1].name: Duplicate value: "c"'),
    ([{"name": "c", "image": "i", "restartPolicy": "Always"}], None,
     "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"),
    ([{"name": "c", "image": "i"}], [{"name": "c", "image": "i"}],
     'spec.initContainers[0].name: Duplicate value: "c"'),
    ([{"name": "c", "image": "i"}], [{"name": "setup", "image": "i", "restartPolicy": "OnFailure"}],
     'spec.initContainers[0].restartPolicy: Unsupported value: "OnFailure": supported values: "Always"'),
    ([{"name": "c", "image": "i"}], [{"name": "setup", "image": "i", "ports": [{"containerPort": 0}]}],
     "spec.initContainers[0].ports[0].containerPort: Required value"),
    ([{"name": "c", "image": "i"}], [{"name": "Setup", "image": "i"}],
     'spec.initContainers[0].name: Invalid value: "Setup": a lowercase RFC 1123 label must consist of lower case '
     "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
     "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
    ([{"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}], None,
     'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1'),
    ([{"name": "c", "image": "i"}], [{"name": "setup", "image": "i", "resources": {"limits": {"gpu": "1"}}}],
     '[spec.initContainers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard resource type or fully '
     'qualified, spec.initContainers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard resource '
     "type or fully qualified]"),
]


@pytest.mark.parametrize("containers, init, message", SHARED_CASES)
def test_the_api_server_and_the_labs_pod_files_validate_alike(client, containers, init, message):
    """One validator (labkit.apiserver.podvalidation) for the API server, labkit.pods (which the
    resources and numa commands read Pod files with) and the mount lab's Pods: the same mistake,
    the same words."""
    from labkit.pods import PodInvalid, pod_from_dict

    with pytest.raises(ApiError) as served:
        client.create("v1", "pods", _pod(containers, init), "ns")
    assert served.value.code == 422
    assert served.value.message == f'Pod "p" is invalid: {message}'
    with pytest.raises(PodInvalid) as read:
        pod_from_dict(_pod(containers, init))
    assert read.value.problem == f'The Pod "p" is invalid: {message}'
    # the mount-propagation lab's Pod files (labkit.mounts.pods.validate)
    from labkit.mounts.pods import Refused, parse_pod, validate

    with pytest.raises(Refused) as mounted:
        validate(parse_pod({"apiVersion": "v1", "kind": "Pod", **_pod(containers, init)}, "pods.yaml"))
    assert str(mounted.value) == f'Pod "p" is invalid: {message}'


def test_templates_validate_their_init_containers(client):
    body = {"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {
            "containers": [{"name": "c", "image": "i"}],
            "initContainers": [{"name": "c", "image": "i"}]}}}}
    with pytest.raises(ApiError) as info:
        client.create("apps/v1", "deployments", body, "ns")
    assert info.value.message == (
        'Deployment.apps "d" is invalid: spec.template.spec.initContainers[0].name: Duplicate value: "c"')


def test_a_sidecar_and_named_ports_are_stored(client):
    pod = client.create("v1", "pods", _pod([{"name": "c", "image": "i", "ports": [{"containerPort": 80, "name": "web"},
                                                                                  {"containerPort": 81, "name": "h2c"}]}],
                                           [{"name": "proxy", "image": "i", "restartPolicy": "Always"}]), "ns")
    assert [p["name"] for p in pod["spec"]["containers"][0]["ports"]] == ["web", "h2c"]
    assert pod["spec"]["initContainers"][0]["restartPolicy"] == "Always"


GO_SECURITY_CONTEXT = (
    "core.SecurityContext{{Capabilities:(*core.Capabilities)({caps}), Privileged:(*bool)({priv}), "
    "SELinuxOptions:(*core.SELinuxOptions)(nil), WindowsOptions:(*core.WindowsSecurityContextOptions)(nil), "
    "RunAsUser:(*int64)(nil), RunAsGroup:(*int64)(nil), RunAsNonRoot:(*bool)(nil), ReadOnlyRootFilesystem:(*bool)(nil), "
    "AllowPrivilegeEscalation:(*bool)(ADDR), ProcMount:(*core.ProcMountType)(nil), "
    "SeccompProfile:(*core.SeccompProfile)(nil), AppArmorProfile:(*core.AppArmorProfile)(nil)}}")


@pytest.mark.parametrize("security_context,caps,priv,detail", [
    ({"privileged": True, "allowPrivilegeEscalation": False}, "nil", "ADDR",
     "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"),
    ({"capabilities": {"add": ["CAP_SYS_ADMIN"]}, "allowPrivilegeEscalation": False}, "ADDR", "nil",
     "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"),
])
def test_no_escalation_is_refused_to_a_container_that_can_always_escalate(client, security_context, caps, priv, detail):
    """ValidateSecurityContext: the value is the internal struct as %#v prints it (its pointers'
    addresses, ADDR here, vary upstream too). The lab's Pod files are refused alike (labkit mounts
    apply took a privileged csi-node with allowPrivilegeEscalation: false)."""
    import re

    from labkit.mounts.pods import Refused, parse_pod, validate

    def addresses(message):
        return re.sub(r"\(0x[0-9a-f]+\)", "(ADDR)", message)
    expected = ('Pod "p" is invalid: spec.containers[0].securityContext: Invalid value: '
                + GO_SECURITY_CONTEXT.format(caps=caps, priv=priv) + ": " + detail)
    assert addresses(refused(client, {"securityContext": security_context})) == expected
    pod = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "command": ["sleep", "1"],
                                              "securityContext": security_context}]}}, "pod.yaml")
    with pytest.raises(Refused) as info:
        validate(pod)
    assert addresses(info.value.message) == expected


@pytest.mark.parametrize("security_context", [
    {"privileged": True}, {"privileged": True, "allowPrivilegeEscalation": True},
    {"capabilities": {"add": ["SYS_ADMIN"]}, "allowPrivilegeEscalation": False},     # only "CAP_SYS_ADMIN" is compared
    {"privileged": False, "allowPrivilegeEscalation": False}])
def test_escalation_settings_the_api_server_takes(client, security_context):
    body = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx",
                                                                "securityContext": security_context}]}}
    client.create("v1", "pods", body, "ns")
