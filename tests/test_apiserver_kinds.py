"""The built-in kinds beyond the workload basics — nodes, volumes, endpoints, jobs, daemon and
stateful sets, RBAC, leases, events.k8s.io Events, HorizontalPodAutoscalers — served with
upstream's defaults, validation, printer columns and garbage-collection policy."""

from __future__ import annotations

import pytest

from labkit.apiserver.errors import ApiError
from labkit.apiserver.request import NO_BODY, Request, User
from support import admin_client, in_process_api

TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
JOB_TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}

# (apiVersion, resource, namespaced, minimal object, Table column names)
KINDS = [
    ("v1", "nodes", False, {"metadata": {"name": "n1"}}, ["Name", "Status", "Roles", "Age", "Version"]),
    ("v1", "persistentvolumes", False,
     {"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                            "hostPath": {"path": "/srv"}}},
     ["Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass",
      "VolumeAttributesClass", "Reason", "Age"]),
    ("v1", "persistentvolumeclaims", True,
     {"metadata": {"name": "pvc1"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {
         "storage": "1Gi"}}}},
     ["Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age"]),
    ("v1", "endpoints", True, {"metadata": {"name": "ep1"}, "subsets": [
        {"addresses": [{"ip": "10.1.0.1"}], "ports": [{"port": 80}]}]}, ["Name", "Endpoints", "Age"]),
    ("discovery.k8s.io/v1", "endpointslices", True,
     {"metadata": {"name": "es1"}, "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.0.1"]}],
      "ports": [{"port": 80}]}, ["Name", "AddressType", "Ports", "Endpoints", "Age"]),
    ("batch/v1", "jobs", True, {"metadata": {"name": "job1"}, "spec": {"template": JOB_TEMPLATE}},
     ["Name", "Status", "Completions", "Duration", "Age"]),
    ("batch/v1", "cronjobs", True, {"metadata": {"name": "cj1"}, "spec": {
        "schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": JOB_TEMPLATE}}}},
     ["Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age"]),
    ("apps/v1", "daemonsets", True, {"metadata": {"name": "ds1"}, "spec": {
        "selector": {"matchLabels": {"app": "x"}}, "template": TEMPLATE}},
     ["Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age"]),
    ("apps/v1", "statefulsets", True, {"metadata": {"name": "sts1"}, "spec": {
        "selector": {"matchLabels": {"app": "x"}}, "template": TEMPLATE}}, ["Name", "Ready", "Age"]),
    ("rbac.authorization.k8s.io/v1", "roles", True, {"metadata": {"name": "r1"}, "rules": [
        {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}, ["Name", "Created At"]),
    ("rbac.authorization.k8s.io/v1", "rolebindings", True, {"metadata": {"name": "rb1"}, "roleRef": {
        "kind": "Role", "name": "r1"}, "subjects": [{"kind": "User", "name": "alice"}]}, ["Name", "Role", "Age"]),
    ("rbac.authorization.k8s.io/v1", "clusterroles", False, {"metadata": {"name": "cr1"}, "rules": [
        {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}, ["Name", "Created At"]),
    ("rbac.authorization.k8s.io/v1", "clusterrolebindings", False, {"metadata": {"name": "crb1"}, "roleRef": {
        "kind": "ClusterRole", "name": "cr1"}, "subjects": [{"kind": "Group", "name": "devs"}]},
     ["Name", "Role", "Age"]),
    ("coordination.k8s.io/v1", "leases", True, {"metadata": {"name": "l1"}, "spec": {"holderIdentity": "me"}},
     ["Name", "Holder", "Age"]),
    ("autoscaling/v2", "horizontalpodautoscalers", True, {"metadata": {"name": "h1"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3}},
     ["Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"]),
]


@pytest.fixture
def api(tmp_path):
    with in_process_api(tmp_path / "objects.db") as api:
        yield api


@pytest.fixture
def c(api):
    return admin_client(api)


def handle(api, method, path, body=None, query=None, accept="application/json"):
    return api.handle(Request(method, path, dict(query or {}), {"accept": accept},
                              obj=NO_BODY if body is None else body, user=User("admin", ["system:masters"])))


@pytest.mark.parametrize("api_version, resource, namespaced, body, columns", KINDS, ids=[k[1] for k in KINDS])
def test_each_kind_is_served_with_its_printer_columns(api, c, api_version, resource, namespaced, body, columns):
    ns = "ns" if namespaced else None
    created = c.create(api_version, resource, body, ns)
    assert created["metadata"]["uid"]
    path = c.path(api_version, resource, ns)
    table = handle(api, "GET", path, accept="application/json;as=Table;g=meta.k8s.io;v=v1").body
    assert [col["name"] for col in table["columnDefinitions"] if col["priority"] == 0] == columns
    assert len(table["rows"]) == 1 and len(table["rows"][0]["cells"]) == len(table["columnDefinitions"])


def test_defaults_and_generated_fields_of_jobs_and_volumes(c):
    job = c.create("batch/v1", "jobs", {"metadata": {"name": "j"}, "spec": {"template": JOB_TEMPLATE}}, "ns")
    uid = job["metadata"]["uid"]
    generated = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "j",
                 "controller-uid": uid, "job-name": "j"}
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"] == generated
    assert job["metadata"]["labels"] == generated          # defaulted from the template, as read back
    assert (job["spec"]["backoffLimit"], job["spec"]["completions"], job["spec"]["parallelism"]) == (6, 1, 1)
    pvc = c.create("v1", "persistentvolumeclaims", KINDS[2][3], "ns")
    assert pvc["status"] == {"phase": "Pending"} and pvc["spec"]["volumeMode"] == "Filesystem"
    pv = c.create("v1", "persistentvolumes", KINDS[1][3])
    assert pv["status"]["phase"] == "Pending" and pv["status"]["lastPhaseTransitionTime"]
    ds = c.create("apps/v1", "daemonsets", KINDS[7][3], "ns")
    assert ds["metadata"]["annotations"] == {"deprecated.daemonset.template.generation": "1"}
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    ds = c.update("apps/v1", "daemonsets", ds, "ns")
    assert ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "2"


@pytest.mark.parametrize("api_version, resource, body, message", [
    ("batch/v1", "jobs", {"metadata": {"name": "j"}, "spec": {"template": TEMPLATE}},
     'Job.batch "j" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
     '"OnFailure", "Never"'),
    ("batch/v1", "cronjobs", {"metadata": {"name": "cj"}, "spec": {"schedule": "*/5 * * *", "jobTemplate": {
        "spec": {"template": JOB_TEMPLATE}}}},
     'CronJob.batch "cj" is invalid: spec.schedule: Invalid value: "*/5 * * *": expected exactly 5 fields, found 4: '
     '[*/5 * * *]'),
    ("v1", "persistentvolumeclaims", {"metadata": {"name": "p"}, "spec": {"accessModes": ["ReadWriteOnce"]}},
     'PersistentVolumeClaim "p" is invalid: spec.resources[storage]: Required value'),
    ("v1", "persistentvolumes", {"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"},
                                                                     "accessModes": ["ReadWriteOnce"]}},
     'PersistentVolume "pv" is invalid: spec: Required value: must specify a volume type'),
    ("apps/v1", "daemonsets", {"metadata": {"name": "ds"}, "spec": {
        "selector": {"matchLabels": {"app": "x"}}, "template": {**TEMPLATE, "spec": {**TEMPLATE["spec"],
                                                                                      "restartPolicy": "Never"}}}},
     'DaemonSet.apps "ds" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Never": supported '
     'values: "Always"'),
    ("rbac.authorization.k8s.io/v1", "roles", {"metadata": {"name": "r"}, "rules": [{"apiGroups": [""],
                                                                                  "resources": ["pods"]}]},
     'Role.rbac.authorization.k8s.io "r" is invalid: rules[0].verbs: Required value: verbs must contain at least '
     'one value'),
])
def test_validation_with_upstreams_messages(c, api_version, resource, body, message):
    with pytest.raises(ApiError) as err:
        c.create(api_version, resource, body, None if resource == "persistentvolumes" else "ns")
    assert err.value.code == 422 and err.value.message == message


NFS = {"server": "nfs.example.com", "path": "/exports/a"}


@pytest.mark.parametrize("spec, errors", [
    # ValidatePersistentVolumeSpec's errors, in its order
    ({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteSome"], "nfs": {"server": "", "path": "exports"}},
     ['spec.accessModes: Unsupported value: "ReadWriteSome": supported values: "ReadOnlyMany", "ReadWriteMany", '
      '"ReadWriteOnce", "ReadWriteOncePod"', "spec.nfs.server: Required value",
      'spec.nfs.path: Invalid value: "exports": must be an absolute path']),
    ({"accessModes": ["ReadWriteOnce"], "nfs": NFS},
     ["spec.capacity: Required value", 'spec.capacity: Unsupported value: null: supported values: "storage"']),
    ({"capacity": {"storage": "1Gi", "cpu": "1"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "Bad_Class",
      "volumeMode": "Disk", "nfs": NFS},
     ['spec.capacity: Unsupported value: {"cpu":"1","storage":"1Gi"}: supported values: "storage"',
      'spec.storageClassName: Invalid value: "Bad_Class": a lowercase RFC 1123 subdomain must consist of lower case '
      "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
      "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
      'spec.volumeMode: Unsupported value: "Disk": supported values: "Block", "Filesystem"']),
    ({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOncePod", "ReadWriteOnce"], "hostPath": {"path": "/x"},
      "nfs": NFS, "cephfs": {"monitors": ["m"]}},
     ["spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
      "spec.nfs: Forbidden: may not specify more than 1 volume type",
      "spec.cephFS: Forbidden: may not specify more than 1 volume type"]),
])
def test_persistent_volume_validation_with_upstreams_messages(c, spec, errors):
    with pytest.raises(ApiError) as err:
        c.create("v1", "persistentvolumes", {"metadata": {"name": "bad"}, "spec": spec})
    assert err.value.code == 422
    assert err.value.message == 'PersistentVolume "bad" is invalid: [' + ", ".join(errors) + "]"


def test_a_persistent_volumes_source_and_mode_are_immutable_and_its_claim_ref_is_not(c):
    """ValidatePersistentVolumeUpdate (the source's message stops before kube-apiserver's go-cmp diff)."""
    c.create("v1", "persistentvolumes", {"metadata": {"name": "nfs"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "nfs": NFS}})
    for patch, message in (({"spec": {"nfs": {"path": "/exports/b"}}}, "spec.persistentvolumesource: Forbidden: "
                            "spec.persistentvolumesource is immutable after creation"),
                           ({"spec": {"volumeMode": "Block"}}, 'volumeMode: Invalid value: "Block": field is immutable')):
        with pytest.raises(ApiError) as err:
            c.patch("v1", "persistentvolumes", "nfs", patch, "merge")
        assert err.value.message == f'PersistentVolume "nfs" is invalid: {message}'
    bound = c.patch("v1", "persistentvolumes", "nfs", {"spec": {"claimRef": {"namespace": "ns", "name": "data"}}},
                    "merge")
    assert bound["spec"]["claimRef"] == {"namespace": "ns", "name": "data"}


def test_immutable_fields(c):
    c.create("rbac.authorization.k8s.io/v1", "roles", KINDS[9][3], "ns")
    rb = c.create("rbac.authorization.k8s.io/v1", "rolebindings", KINDS[10][3], "ns")
    rb["roleRef"]["name"] = "other"
    with pytest.raises(ApiError) as err:
        c.update("rbac.authorization.k8s.io/v1", "rolebindings", rb, "ns")
    assert "roleRef: Invalid value" in err.value.message and err.value.message.endswith("cannot change roleRef")
    job = c.create("batch/v1", "jobs", {"metadata": {"name": "j"}, "spec": {"template": JOB_TEMPLATE}}, "ns")
    with pytest.raises(ApiError) as err:
        c.patch("batch/v1", "jobs", "j", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "busybox:1.37"}]}}}}, "strategic", "ns")
    assert "spec.template: Invalid value" in err.value.message and "field is immutable" in err.value.message
    assert job["metadata"]["generation"] == 1


@pytest.mark.parametrize("subject, message", [
    ({"kind": "ServiceAccount", "apiGroup": "rbac.authorization.k8s.io", "name": "reporter", "namespace": "ns"},
     'subjects[0].apiGroup: Unsupported value: "rbac.authorization.k8s.io": supported values: ""'),
    ({"kind": "ServiceAccount", "name": "Reporter", "namespace": "ns"}, 'subjects[0].name: Invalid value: "Reporter"'),
    ({"kind": "Group", "apiGroup": "example.com", "name": "team"},
     'subjects[0].apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"'),
    ({"kind": "User", "apiGroup": "", "name": ""}, "subjects[0].name: Invalid value: \"\": user name cannot be empty"),
])
def test_a_binding_subject_is_validated_as_upstream_does(c, subject, message):
    """pkg/apis/rbac/validation `validateRoleBindingSubject`: a ServiceAccount's apiGroup is empty
    and its name a DNS subdomain, a User's or Group's apiGroup is rbac's (defaulted when empty)."""
    body = {"metadata": {"name": "rb"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                   "name": "r"}, "subjects": [subject]}
    with pytest.raises(ApiError) as err:
        c.create("rbac.authorization.k8s.io/v1", "rolebindings", body, "ns")
    assert err.value.code == 422 and message in err.value.message, err.value.message
    ok = {"kind": "User", "name": "alice"}          # defaulted to rbac's apiGroup
    assert c.create("rbac.authorization.k8s.io/v1", "rolebindings", {**body, "subjects": [ok]}, "ns")["subjects"] == \
        [{**ok, "apiGroup": "rbac.authorization.k8s.io"}]


@pytest.mark.parametrize("api_version, resource, body, finalizers, warned", [
    ("batch/v1", "jobs", {"metadata": {"name": "j"}, "spec": {"template": JOB_TEMPLATE}}, ["orphan"], True),
    ("batch/v1", "cronjobs", KINDS[6][3], None, False),
    ("apps/v1", "daemonsets", KINDS[7][3], None, False),
    ("apps/v1", "statefulsets", KINDS[8][3], None, False),
])
def test_a_delete_without_policy_follows_the_kinds_default(api, c, api_version, resource, body, finalizers, warned):
    """batch/v1 Jobs orphan their pods by default, with a warning; CronJobs, DaemonSets and
    StatefulSets in their current versions delete them in the background."""
    obj = c.create(api_version, resource, dict(body, metadata=dict(body["metadata"], finalizers=["example.com/x"])),
                   "ns")
    path = c.path(api_version, resource, "ns", obj["metadata"]["name"])
    response = handle(api, "DELETE", path)
    assert response.code == 200
    expected = ["example.com/x"] + (finalizers or [])
    assert response.body["metadata"]["finalizers"] == expected
    warning = ("child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove "
               "them or set propagationPolicy=Orphan to suppress this warning")
    assert response.warnings == ([warning] if warned else [])
    assert handle(api, "DELETE", path, {"propagationPolicy": "Background"}).warnings == []


def test_events_k8s_io_is_a_view_of_core_events(c):
    c.create("v1", "events", {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p"},
                              "reason": "Started", "message": "Started container c", "type": "Normal",
                              "source": {"component": "kubelet"}, "count": 2}, "ns")
    shown = c.get("events.k8s.io/v1", "events", "e1", "ns")
    assert shown["apiVersion"] == "events.k8s.io/v1" and shown["regarding"] == {"kind": "Pod", "name": "p"}
    assert (shown["note"], shown["deprecatedSource"], shown["deprecatedCount"]) == (
        "Started container c", {"component": "kubelet"}, 2)
    with pytest.raises(ApiError) as err:
        c.create("events.k8s.io/v1", "events", {"metadata": {"name": "e2"}, "type": "Normal"}, "ns")
    assert err.value.code == 422 and "eventTime: Required value" in err.value.message
    c.create("events.k8s.io/v1", "events", {
        "metadata": {"name": "e3"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "x.io/c",
        "reportingInstance": "c-1", "action": "Check", "reason": "Checked", "type": "Normal", "note": "fine",
        "regarding": {"kind": "Node", "name": "n"}}, "ns")
    core = c.get("v1", "events", "e3", "ns")
    assert (core["message"], core["involvedObject"], core["reportingComponent"]) == ("fine", {"kind": "Node",
                                                                                           "name": "n"}, "x.io/c")
    names = {e["metadata"]["name"] for e in c.list("events.k8s.io/v1", "events", "ns",
                                                  field_selector="involvedObject.kind=Node")[0]}
    assert names == {"e3"}


def test_horizontal_pod_autoscalers_in_both_versions(c):
    c.create("autoscaling/v1", "horizontalpodautoscalers", {"metadata": {"name": "web"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5,
        "targetCPUUtilizationPercentage": 70}}, "ns")
    v2 = c.get("autoscaling/v2", "horizontalpodautoscalers", "web", "ns")
    assert v2["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 70}}}] and v2["spec"]["minReplicas"] == 1
    v2["spec"]["metrics"].append({"type": "Resource", "resource": {"name": "memory", "target": {
        "type": "AverageValue", "averageValue": "100Mi"}}})
    c.update("autoscaling/v2", "horizontalpodautoscalers", v2, "ns")
    v1 = c.get("autoscaling/v1", "horizontalpodautoscalers", "web", "ns")
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 70 and "metrics" not in v1["spec"]
    assert v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"] == \
        '[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]'
    # written back through v1, the memory target survives
    c.update("autoscaling/v1", "horizontalpodautoscalers", v1, "ns")
    again = c.get("autoscaling/v2", "horizontalpodautoscalers", "web", "ns")
    assert again["spec"]["metrics"] == v2["spec"]["metrics"]
