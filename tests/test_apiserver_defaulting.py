"""Decoding and defaulting of every write, as kube-apiserver's decoder does them: the same object
results from a create, a replace, each patch type and a status update, whatever the client left
out; values of the wrong type, unknown fields and quantities are handled as upstream."""

from __future__ import annotations

import copy
import json

import pytest

from labkit.apiserver import defaults, models
from labkit.apiserver.errors import ApiError
from labkit.apiserver.request import NO_BODY, Request, User
from support import admin_client, in_process_api

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
              "spec": {"selector": {"matchLabels": {"a": "b"}},
                       "template": {"metadata": {"labels": {"a": "b"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


@pytest.fixture
def api(tmp_path):
    with in_process_api(tmp_path / "objects.db") as api:
        admin_client(api).create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")    # the controller's
        yield api


@pytest.fixture
def c(api):
    return admin_client(api)


def test_a_created_deployment_carries_upstreams_defaults(c):
    d = c.create("apps/v1", "deployments", DEPLOYMENT, "ns")
    spec = d["spec"]
    assert (spec["replicas"], spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (1, 10, 600)
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    pod_spec = spec["template"]["spec"]
    assert {k: pod_spec[k] for k in ("restartPolicy", "dnsPolicy", "schedulerName", "securityContext",
                                     "terminationGracePeriodSeconds")} == {
        "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
        "securityContext": {}, "terminationGracePeriodSeconds": 30}
    assert pod_spec["containers"][0] == {"name": "c", "image": "nginx", "imagePullPolicy": "Always",
                                         "terminationMessagePath": "/dev/termination-log",
                                         "terminationMessagePolicy": "File", "resources": {}}
    assert "enableServiceLinks" not in pod_spec         # SetDefaults_Pod: pods only, not templates


def test_every_write_path_defaults_so_an_unchanged_manifest_changes_nothing(c):
    stored = c.create("apps/v1", "deployments", DEPLOYMENT, "ns")
    rv = stored["metadata"]["resourceVersion"]
    path = "/apis/apps/v1/namespaces/ns/deployments/d"
    containers = DEPLOYMENT["spec"]["template"]["spec"]["containers"]
    assert c.request("PUT", path, body=DEPLOYMENT)[1] == stored
    for patch, kind in (({"spec": {"template": {"spec": {"containers": containers}}}}, "merge"),
                        ({"spec": {"template": {"spec": {"containers": containers}}}}, "strategic"),
                        ([{"op": "replace", "path": "/spec/template/spec/containers", "value": containers}], "json"),
                        ({"spec": {"template": {"metadata": {"creationTimestamp": None}}}}, "merge")):
        assert c.patch("apps/v1", "deployments", "d", patch, kind, "ns") == stored, kind
    # a status update from a body without the defaults keeps the spec as stored
    status = c.update("apps/v1", "deployments", {**DEPLOYMENT, "status": {"replicas": 1}}, "ns", "status")
    assert status["spec"] == stored["spec"] and status["status"] == {"replicas": 1}
    assert c.get("apps/v1", "deployments", "d", "ns")["metadata"]["resourceVersion"] != rv   # the status wrote
    # a change is a change: the template's defaults stay, the generation moves
    changed = c.patch("apps/v1", "deployments", "d", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "nginx:1.27"}]}}}}, "merge", "ns")
    assert changed["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert changed["metadata"]["generation"] == 2


@pytest.mark.parametrize("resource, body, expected", [
    ("pods", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "busybox@sha256:" + "0" * 64, "resources": {"limits": {"cpu": 0.5, "memory": "1024Mi"}},
         "ports": [{"containerPort": 80}], "livenessProbe": {"httpGet": {"port": 80}}}]}},
     {"spec": {"enableServiceLinks": True, "containers": [{
         "imagePullPolicy": "IfNotPresent", "ports": [{"containerPort": 80, "protocol": "TCP"}],
         "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}},
         "livenessProbe": {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                           "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}}]},
      "status": {"phase": "Pending", "qosClass": "Guaranteed"}}),
    ("services", {"metadata": {"name": "s"}, "spec": {"selector": {"a": "b"}, "ports": [{"port": 80}]}},
     {"spec": {"type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
               "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
               "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]}}),
    ("services", {"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}},
     {"spec": {"externalTrafficPolicy": "Cluster"}}),
    ("replicationcontrollers", {"metadata": {"name": "rc"}, "spec": {"template": {
        "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}},
     {"metadata": {"labels": {"a": "b"}}, "spec": {"replicas": 1, "selector": {"a": "b"}}}),
    ("secrets", {"metadata": {"name": "s"}, "stringData": {"k": "v"}}, {"type": "Opaque", "data": {"k": "dg=="}}),
])
def test_core_kinds_are_defaulted_on_create(c, resource, body, expected):
    obj = c.create("v1", resource, body, "ns")
    assert_contains(obj, expected)
    assert "stringData" not in obj


def test_a_replaced_service_keeps_its_cluster_ip_which_cannot_change(c):
    svc = c.create("v1", "services", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}, "ns")
    again = c.request("PUT", "/api/v1/namespaces/ns/services/s",
                      body={"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})[1]
    assert again["spec"]["clusterIP"] == svc["spec"]["clusterIP"]
    with pytest.raises(ApiError) as err:
        c.patch("v1", "services", "s", {"spec": {"clusterIP": "10.96.0.99", "clusterIPs": ["10.96.0.99"]}},
                "merge", "ns")
    assert err.value.code == 422 and "spec.clusterIPs[0]" in err.value.message and "may not change" in err.value.message


@pytest.mark.parametrize("model, obj, expected", [
    ("V1Job", {"spec": {"template": {"metadata": {"labels": {"x": "y"}}, "spec": {"containers": [{"name": "c"}]}}}},
     {"metadata": {"labels": {"x": "y"}}, "spec": {"completions": 1, "parallelism": 1, "backoffLimit": 6,
                                                    "completionMode": "NonIndexed", "suspend": False,
                                                    "podReplacementPolicy": "TerminatingOrFailed"}}),
    ("V1CronJob", {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {}}}}}},
     {"spec": {"concurrencyPolicy": "Allow", "suspend": False, "successfulJobsHistoryLimit": 3,
               "failedJobsHistoryLimit": 1, "jobTemplate": {"spec": {"template": {"spec": {
                   "restartPolicy": "Always"}}}}}}),
    ("V1DaemonSet", {"spec": {}}, {"spec": {"revisionHistoryLimit": 10, "updateStrategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}}}),
    ("V1StatefulSet", {"spec": {"volumeClaimTemplates": [{"spec": {}}]}},
     {"spec": {"replicas": 1, "podManagementPolicy": "OrderedReady", "revisionHistoryLimit": 10,
               "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
               "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
               "volumeClaimTemplates": [{"spec": {"volumeMode": "Filesystem"}, "status": {"phase": "Pending"}}]}}),
    ("V2HorizontalPodAutoscaler", {"spec": {"maxReplicas": 3}},
     {"spec": {"minReplicas": 1, "metrics": [{"type": "Resource", "resource": {
         "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}}),
    ("V1RoleBinding", {"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"},
                                                                             {"kind": "ServiceAccount", "name": "s"}]},
     {"roleRef": {"apiGroup": "rbac.authorization.k8s.io"},
      "subjects": [{"apiGroup": "rbac.authorization.k8s.io"}, {"kind": "ServiceAccount"}]}),
    ("V1PersistentVolume", {"spec": {"hostPath": {"path": "/x"}, "capacity": {"storage": "1.5Gi"}}},
     {"spec": {"persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem",
               "hostPath": {"type": ""}, "capacity": {"storage": "1536Mi"}}, "status": {"phase": "Pending"}}),
    ("V1Pod", {"spec": {"volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "x"}}],
                        "hostNetwork": True, "containers": [{"name": "c", "ports": [{"containerPort": 8080}]}]}},
     {"spec": {"volumes": [{"emptyDir": {}}, {"secret": {"defaultMode": 420}}],
               "containers": [{"ports": [{"hostPort": 8080, "protocol": "TCP"}]}]}}),
])
def test_defaulters_of_kinds_and_nested_types(model, obj, expected):
    decoded = models.Decoder().object(model, obj)
    result = defaults.apply(model, decoded)
    assert_contains(result, expected)
    # defaulting twice (a stored object decoded again) changes nothing
    again = defaults.apply(model, models.Decoder().object(model, copy.deepcopy(result)))
    assert again == result


def raw(api, method, path, body, query=None, content_type=None):
    headers = {"accept": "application/json"}
    if content_type:
        headers["content-type"] = content_type
    return api.handle(Request(method, path, dict(query or {}), headers, obj=NO_BODY if body is None else body,
                              user=User("admin", ["system:masters"])))


def test_unknown_fields_are_dropped_refused_or_warned_about_as_field_validation_says(api):
    body = copy.deepcopy(DEPLOYMENT)
    body["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Never"
    body["spec"]["replica"] = 3
    path = "/apis/apps/v1/namespaces/ns/deployments"
    r = raw(api, "POST", path, body, {"fieldValidation": "Strict"})
    assert r.code == 400 and r.body["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.template.spec.containers[0].imagePullPolcy", unknown field "spec.replica"')
    r = raw(api, "POST", path, body)
    assert r.code == 201 and r.warnings == ['unknown field "spec.template.spec.containers[0].imagePullPolcy"',
                                             'unknown field "spec.replica"']
    assert "replica" not in r.body["spec"] and r.body["spec"]["template"]["spec"]["containers"][0][
        "imagePullPolicy"] == "Always"
    r = raw(api, "PATCH", path + "/d", {"spec": {"paused": True, "extra": 1}}, {"fieldValidation": "Strict"},
            "application/merge-patch+json")
    assert r.code == 422 and r.body["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert r.body["message"].endswith('strict decoding error: unknown field "spec.extra"')
    r = raw(api, "PATCH", path + "/d", {"spec": {"paused": True, "extra": 1}}, {"fieldValidation": "Ignore"},
            "application/strategic-merge-patch+json")
    assert r.code == 200 and r.warnings == [] and r.body["spec"]["paused"] is True
    r = raw(api, "POST", path, body, {"fieldValidation": "Loose"})
    assert r.code == 422 and r.body["message"] == ('CreateOptions.meta.k8s.io "" is invalid: fieldValidation: '
                                                   'Unsupported value: "Loose": supported values: "", "Ignore", '
                                                   '"Strict", "Warn"')


@pytest.mark.parametrize("body, message", [
    ({"spec": {"replicas": "3"}}, "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas "
                                  "of type int32"),
    ({"spec": {"replicas": 2.5}}, "json: cannot unmarshal number 2.5 into Go struct field DeploymentSpec.spec.replicas "
                                  "of type int32"),
    ({"spec": {"template": {"spec": {"containers": {"name": "c"}}}}},
     "json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container"),
    ({"spec": {"template": {"spec": {"terminationGracePeriodSeconds": True}}}},
     "json: cannot unmarshal bool into Go struct field PodSpec.spec.template.spec.terminationGracePeriodSeconds "
     "of type int64"),
    ({"metadata": {"labels": {"a": 1}}}, "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels "
                                         "of type string"),
    ({"spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "lots"}}}]}}}},
     "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
])
def test_values_of_the_wrong_type_are_refused_with_the_json_decoders_message(c, body, message):
    merged = copy.deepcopy(DEPLOYMENT)
    for key, value in body.items():
        merged[key] = {**merged.get(key, {}), **value}
    with pytest.raises(ApiError) as err:
        c.create("apps/v1", "deployments", merged, "ns")
    assert err.value.code == 400
    assert err.value.message == f'Deployment in version "v1" cannot be handled as a Deployment: {message}'


def assert_contains(actual, expected, path="") -> None:
    """Every value in `expected` is in `actual` (dicts by key, lists item by item)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {json.dumps(actual)}"
        for k, v in expected.items():
            assert k in actual, f"{path}.{k} missing in {json.dumps(actual)}"
            assert_contains(actual[k], v, f"{path}.{k}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{path}: {json.dumps(actual)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_contains(a, e, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
