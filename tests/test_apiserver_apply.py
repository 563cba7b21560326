"""Field management and server-side apply: managedFields on every write, ownership moving with
updates, applies by several managers with upstream's conflicts, --force-conflicts, and the
removal of fields a manager stops applying."""

from __future__ import annotations

import copy

import pytest

from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from support import in_process_api

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}


@pytest.fixture
def api(tmp_path):
    with in_process_api(tmp_path / "objects.db") as api:
        yield api


def client(api, agent: str) -> LocalClient:
    return LocalClient(api, "admin", ["system:masters"], user_agent=agent)


def apply(api, manager: str, body: dict, force: bool = False) -> dict:
    query = {"fieldManager": manager, **({"force": "true"} if force else {})}
    return client(api, "kubectl/v1.32.4").patch("apps/v1", "deployments", body["metadata"]["name"], body, "apply",
                                                "ns", query=query)


def managers(obj: dict) -> dict[tuple[str, str], dict]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"].get("managedFields", [])}


def test_a_create_records_what_its_manager_set(api):
    created = client(api, "kubectl/v1.32.4 (linux/amd64) kubernetes/abc").create(
        "apps/v1", "deployments", DEPLOYMENT, "ns", query={"fieldManager": "kubectl-create"})
    (entry,) = created["metadata"]["managedFields"]
    assert {k: entry[k] for k in ("manager", "operation", "apiVersion", "fieldsType")} == {
        "manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1"}
    fields = entry["fieldsV1"]
    # what `kubectl create` of this manifest records on a v1.34 cluster: defaults included, value
    # structs without a `.` of their own, map entries and list items with one
    assert fields["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    pod = fields["f:spec"]["f:template"]["f:spec"]
    assert pod["f:containers"] == {'k:{"name":"nginx"}': {
        ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {},
        "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}}
    assert set(pod) == {"f:containers", "f:dnsPolicy", "f:restartPolicy", "f:schedulerName", "f:securityContext",
                        "f:terminationGracePeriodSeconds"}
    assert fields["f:spec"]["f:strategy"] == {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}},
                                              "f:type": {}}
    assert "f:status" not in fields


def test_updates_move_ownership_and_a_manager_is_its_user_agents_first_word(api):
    client(api, "kubectl/v1.32.4").create("apps/v1", "deployments", DEPLOYMENT, "ns",
                                          query={"fieldManager": "kubectl-create"})
    scaled = client(api, "OpenAPI-Generator/34.1.0/python").patch("apps/v1", "deployments", "web",
                                                                   {"spec": {"replicas": 5}}, "merge", "ns")
    owners = managers(scaled)
    assert owners[("OpenAPI-Generator", "Update")] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in owners[("kubectl-create", "Update")]["f:spec"]
    # a status update is its own entry, on the status subresource
    status = client(api, "kube-controller-manager/v1.34.1").update(
        "apps/v1", "deployments", dict(scaled, status={"replicas": 5}), "ns", "status")
    entry = next(e for e in status["metadata"]["managedFields"] if e["manager"] == "kube-controller-manager")
    assert entry["subresource"] == "status" and entry["fieldsV1"] == {"f:status": {"f:replicas": {}}}


def test_two_appliers_conflict_force_and_removal(api):
    alice = copy.deepcopy(DEPLOYMENT)
    created = apply(api, "alice", alice)
    assert created["spec"]["replicas"] == 2 and list(managers(created)) == [("alice", "Apply")]
    # the same value applied by another manager: no conflict, both own it
    bob = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}}
    apply(api, "bob", bob)
    # a different value: 409, with upstream's message and causes
    bob["spec"]["replicas"] = 3
    with pytest.raises(ApiError) as err:
        apply(api, "bob", bob)
    assert err.value.code == 409 and err.value.reason == "Conflict"
    assert err.value.message == 'Apply failed with 1 conflict: conflict with "alice": .spec.replicas'
    assert err.value.details["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "alice"',
                                            "field": ".spec.replicas"}]
    forced = apply(api, "bob", bob, force=True)
    assert forced["spec"]["replicas"] == 3
    assert "f:replicas" not in managers(forced)[("alice", "Apply")]["f:spec"]
    # alice stops applying replicas: bob owns it, so it stays
    del alice["spec"]["replicas"]
    assert apply(api, "alice", alice)["spec"]["replicas"] == 3
    # bob stops applying replicas: nobody owns it any more, it goes (and defaults to 1)
    kept = apply(api, "bob", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "web", "annotations": {"owner": "bob"}}})
    assert kept["spec"]["replicas"] == 1 and kept["metadata"]["annotations"] == {"owner": "bob"}
    # alice drops her label: it goes; a container she adds is merged by name
    alice["metadata"]["labels"] = {}
    alice["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "busybox:1.36"})
    result = apply(api, "alice", alice)
    assert "labels" not in result["metadata"]
    assert [c["name"] for c in result["spec"]["template"]["spec"]["containers"]] == ["nginx", "sidecar"]


def test_conflicts_with_update_managers_and_several_fields(api):
    client(api, "kubectl/v1.32.4").create("apps/v1", "deployments", DEPLOYMENT, "ns",
                                          query={"fieldManager": "kubectl-create"})
    body = copy.deepcopy(DEPLOYMENT)
    body["spec"]["replicas"] = 4
    body["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    with pytest.raises(ApiError) as err:
        apply(api, "alice", body)
    assert err.value.message == (
        'Apply failed with 2 conflicts: conflicts with "kubectl-create" using apps/v1:\n'
        '- .spec.replicas\n'
        '- .spec.template.spec.containers[name="nginx"].image')


def test_apply_refuses_unknown_fields_and_needs_a_manager(api):
    body = copy.deepcopy(DEPLOYMENT)
    body["spec"]["replica"] = 3
    with pytest.raises(ApiError) as err:
        apply(api, "alice", body)
    assert err.value.code == 400 and err.value.message == (
        "failed to create typed patch object (apps/v1, Kind=Deployment): .spec.replica: field not declared in schema")
    with pytest.raises(ApiError) as err:
        client(api, "x").patch("apps/v1", "deployments", "web", DEPLOYMENT, "apply", "ns")
    assert err.value.code == 422 and "fieldManager: Required value" in err.value.message
