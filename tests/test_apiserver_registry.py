"""The registry's semantics, checked against upstream's (generic registry Store.Delete /
Update, rest.BeforeDelete, the strategies), through the in-process request handler."""

from __future__ import annotations

import copy
import json
import time

import pytest

from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.client import LocalClient
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store
from support import admin_client, in_process_api


@pytest.fixture
def api(tmp_path):
    with in_process_api(tmp_path / "objects.db") as api:
        admin_client(api).create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")    # the controller's
        yield api


@pytest.fixture
def c(api):
    return admin_client(api)


RC = {"metadata": {"name": "rc"}, "spec": {"replicas": 0, "selector": {"a": "b"},
                                            "template": {"metadata": {"labels": {"a": "b"}},
                                                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
DEPLOY = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                                               "template": {"metadata": {"labels": {"a": "b"}},
                                                            "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def pod(name, **spec):
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def gone(c, api_version, resource, name, ns="ns") -> bool:
    try:
        c.get(api_version, resource, name, ns)
        return False
    except ApiError as exc:
        return exc.code == 404


# -- which GC finalizers a DELETE leaves (deletionFinalizersForGarbageCollection) -------------------

@pytest.mark.parametrize("options, finalizers", [
    ({"propagationPolicy": "Orphan"}, ["orphan"]),
    ({"propagationPolicy": "Foreground"}, ["foregroundDeletion"]),
    ({"orphanDependents": True}, ["orphan"]),
])
def test_delete_policy_sets_gc_finalizer_and_keeps_the_object(c, options, finalizers):
    c.create("v1", "configmaps", {"metadata": {"name": "cm"}}, "ns")
    code, body = c.delete("v1", "configmaps", "cm", "ns", options=options)
    assert code == 200 and body["kind"] == "ConfigMap"
    meta = c.get("v1", "configmaps", "cm", "ns")["metadata"]
    assert meta["finalizers"] == finalizers
    assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 0


@pytest.mark.parametrize("options", [{"propagationPolicy": "Background"}, {"orphanDependents": False}, {}])
def test_background_and_no_policy_remove_at_once_with_a_status(c, options):
    c.create("v1", "configmaps", {"metadata": {"name": "cm"}}, "ns")
    code, body = c.delete("v1", "configmaps", "cm", "ns", options=options)
    assert code == 200
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": "cm", "kind": "configmaps", "uid": body["details"]["uid"]}}
    assert gone(c, "v1", "configmaps", "cm")


def test_resource_default_policy_applies_only_without_options(c):
    # ReplicationController (core/v1) orphans by default; apps/v1 deletes dependents (background)
    c.create("v1", "replicationcontrollers", RC, "ns")
    c.delete("v1", "replicationcontrollers", "rc", "ns")
    assert c.get("v1", "replicationcontrollers", "rc", "ns")["metadata"]["finalizers"] == ["orphan"]
    c.create("apps/v1", "deployments", DEPLOY, "ns")
    code, body = c.delete("apps/v1", "deployments", "d", "ns")
    assert body["kind"] == "Status" and body["details"]["group"] == "apps"
    assert gone(c, "apps/v1", "deployments", "d")


def test_orphan_dependents_false_keeping_the_object_answers_202(c):
    c.create("v1", "configmaps", {"metadata": {"name": "cm", "finalizers": ["example.com/x"]}}, "ns")
    code, _ = c.delete("v1", "configmaps", "cm", "ns", options={"orphanDependents": False})
    assert code == 202
    assert c.get("v1", "configmaps", "cm", "ns")["metadata"]["finalizers"] == ["example.com/x"]


def test_events_never_get_gc_finalizers(c):
    c.create("v1", "events", {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p"}}, "ns")
    c.delete("v1", "events", "e1", "ns", options={"propagationPolicy": "Foreground"})
    assert gone(c, "v1", "events", "e1")


def test_second_delete_recomputes_gc_finalizers(c):
    c.create("v1", "configmaps", {"metadata": {"name": "cm", "finalizers": ["x/y"]}}, "ns")
    c.delete("v1", "configmaps", "cm", "ns", options={"propagationPolicy": "Foreground"})
    first = c.get("v1", "configmaps", "cm", "ns")["metadata"]
    assert first["finalizers"] == ["x/y", "foregroundDeletion"]
    time.sleep(1.1)
    c.delete("v1", "configmaps", "cm", "ns", options={"propagationPolicy": "Orphan"})
    second = c.get("v1", "configmaps", "cm", "ns")["metadata"]
    assert second["finalizers"] == ["x/y", "orphan"]
    assert second["deletionTimestamp"] == first["deletionTimestamp"]     # never moved later
    c.delete("v1", "configmaps", "cm", "ns")                             # no options: unchanged
    assert c.get("v1", "configmaps", "cm", "ns")["metadata"]["finalizers"] == ["x/y", "orphan"]


def test_delete_preconditions_and_options_validation(c):
    created = c.create("apps/v1", "deployments", DEPLOY, "ns")
    with pytest.raises(ApiError) as err:
        c.delete("apps/v1", "deployments", "d", "ns", options={"preconditions": {"uid": "nope"}})
    assert err.value.code == 409 and err.value.message == (
        f'Operation cannot be fulfilled on Deployment.apps "d": the UID in the precondition (nope) does not match '
        f'the UID in record ({created["metadata"]["uid"]}). The object might have been deleted and then recreated')
    with pytest.raises(ApiError) as err:
        c.delete("apps/v1", "deployments", "d", "ns", options={"preconditions": {"resourceVersion": "1"}})
    assert err.value.code == 409 and "the ResourceVersion in the precondition (1) does not match" in err.value.message
    with pytest.raises(ApiError) as err:
        c.delete("apps/v1", "deployments", "d", "ns", options={"propagationPolicy": "Sideways"})
    assert err.value.code == 422 and err.value.message == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported '
        'values: "Foreground", "Background", "Orphan", "nil"')
    with pytest.raises(ApiError) as err:
        c.delete("apps/v1", "deployments", "d", "ns",
                 options={"propagationPolicy": "Orphan", "orphanDependents": True})
    assert err.value.message.endswith('propagationPolicy: Invalid value: "Orphan": orphanDependents and '
                                      'deletionPropagation cannot be both set')


def test_body_options_win_over_query_options(api, c):
    from labkit.apiserver.request import Request, User
    c.create("v1", "configmaps", {"metadata": {"name": "cm"}}, "ns")
    response = api.handle(Request("DELETE", "/api/v1/namespaces/ns/configmaps/cm",
                                  {"propagationPolicy": "Orphan"}, {}, b'{"propagationPolicy":"Foreground"}',
                                  user=User("admin", ["system:masters", "system:authenticated"])))
    assert response.code == 200
    assert c.get("v1", "configmaps", "cm", "ns")["metadata"]["finalizers"] == ["foregroundDeletion"]


# -- graceful deletion of pods ---------------------------------------------------------------------

def test_unscheduled_pod_is_removed_at_once_after_a_graceful_update(api, c):
    c.create("v1", "pods", pod("p"), "ns")
    store = api.registry.store
    events = []
    store.add_listener(lambda e: events.append((e.type, e.obj["metadata"].get("deletionGracePeriodSeconds"))))
    code, body = c.delete("v1", "pods", "p", "ns")
    assert code == 200 and body["kind"] == "Pod"          # pods return the deleted object
    assert events == [("MODIFIED", 0), ("DELETED", 0)]


def test_scheduled_pod_waits_for_its_grace_period(c):
    c.create("v1", "pods", pod("p", nodeName="n1", terminationGracePeriodSeconds=30), "ns")
    before = time.time()
    code, body = c.delete("v1", "pods", "p", "ns")
    meta = body["metadata"]
    assert code == 200 and meta["deletionGracePeriodSeconds"] == 30
    stamp = time.mktime(time.strptime(meta["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert before + 28 <= stamp <= time.time() + 31
    # a longer grace period changes nothing, a shorter one moves the deadline earlier
    _, again = c.delete("v1", "pods", "p", "ns", options={"gracePeriodSeconds": 60})
    assert again["metadata"]["deletionGracePeriodSeconds"] == 30
    _, shorter = c.delete("v1", "pods", "p", "ns", options={"gracePeriodSeconds": 5})
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 5
    c.delete("v1", "pods", "p", "ns", options={"gracePeriodSeconds": 0})
    assert gone(c, "v1", "pods", "p")


def test_pod_in_grace_period_is_not_removed_by_dropping_its_finalizers(c):
    c.create("v1", "pods", dict(pod("p", nodeName="n1"), metadata={"name": "p", "finalizers": ["x/y"]}), "ns")
    c.delete("v1", "pods", "p", "ns")
    c.patch("v1", "pods", "p", {"metadata": {"finalizers": None}}, "merge", "ns")
    left = c.get("v1", "pods", "p", "ns")["metadata"]
    assert "finalizers" not in left and left["deletionGracePeriodSeconds"] == 30


# -- updates ---------------------------------------------------------------------------------------

def test_removing_the_last_finalizer_deletes_in_the_update(c):
    c.create("v1", "configmaps", {"metadata": {"name": "cm", "finalizers": ["x/y"]}}, "ns")
    c.delete("v1", "configmaps", "cm", "ns")
    answer = c.patch("v1", "configmaps", "cm", [{"op": "remove", "path": "/metadata/finalizers"}], "json", "ns")
    assert answer["metadata"]["name"] == "cm"
    assert gone(c, "v1", "configmaps", "cm")


def test_no_new_finalizers_while_deleting(c):
    c.create("v1", "configmaps", {"metadata": {"name": "cm", "finalizers": ["x/y"]}}, "ns")
    c.delete("v1", "configmaps", "cm", "ns")
    with pytest.raises(ApiError) as err:
        c.patch("v1", "configmaps", "cm", {"metadata": {"finalizers": ["a/b"]}}, "strategic", "ns")
    assert err.value.code == 422 and err.value.message == (
        'ConfigMap "cm" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is '
        'being deleted, found new finalizers []string{"a/b"}')


def test_optimistic_concurrency(c):
    cm = c.create("v1", "configmaps", {"metadata": {"name": "cm"}, "data": {"a": "1"}}, "ns")
    c.update("v1", "configmaps", dict(cm, data={"a": "2"}), "ns")
    with pytest.raises(ApiError) as err:
        c.update("v1", "configmaps", dict(cm, data={"a": "3"}), "ns")
    assert err.value.code == 409 and err.value.message == (
        'Operation cannot be fulfilled on configmaps "cm": the object has been modified; please apply your '
        'changes to the latest version and try again')
    # no resourceVersion: built-in kinds update unconditionally
    unconditional = dict(cm, data={"a": "4"})
    del unconditional["metadata"]["resourceVersion"]
    assert c.update("v1", "configmaps", unconditional, "ns")["data"] == {"a": "4"}


def test_update_that_changes_nothing_is_not_written(c):
    cm = c.create("v1", "configmaps", {"metadata": {"name": "cm"}, "data": {"a": "1"}}, "ns")
    again = c.update("v1", "configmaps", cm, "ns")
    assert again["metadata"]["resourceVersion"] == cm["metadata"]["resourceVersion"]


def test_metadata_rules_on_update(c):
    cm = c.create("v1", "configmaps", {"metadata": {"name": "cm"}}, "ns")
    with pytest.raises(ApiError) as err:
        c.update("v1", "configmaps", dict(cm, metadata=dict(cm["metadata"], uid="other")), "ns")
    assert "metadata.uid: Invalid value: \"other\": field is immutable" in err.value.message
    # deletionTimestamp set by a client is silently ignored when none was set... and may not be invented
    with pytest.raises(ApiError) as err:
        c.update("v1", "configmaps", dict(cm, metadata=dict(cm["metadata"], deletionTimestamp="2020-01-01T00:00:00Z")), "ns")
    assert "metadata.deletionTimestamp" in err.value.message


# -- patches ---------------------------------------------------------------------------------------

def test_strategic_merge_patch_treats_finalizers_as_a_set_and_owner_references_by_uid(c):
    c.create("v1", "configmaps", {"metadata": {"name": "cm", "finalizers": ["a/x"], "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "o1", "uid": "u1"},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "o2", "uid": "u2"}]}}, "ns")
    out = c.patch("v1", "configmaps", "cm", {"metadata": {"finalizers": ["a/y", "a/x"]}}, "strategic", "ns")
    assert out["metadata"]["finalizers"] == ["a/x", "a/y"]
    out = c.patch("v1", "configmaps", "cm", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a/x"]}},
                  "strategic", "ns")
    assert out["metadata"]["finalizers"] == ["a/y"]
    out = c.patch("v1", "configmaps", "cm", {"metadata": {"ownerReferences": [
        {"$patch": "delete", "uid": "u1"}, {"uid": "u2", "blockOwnerDeletion": True}]}}, "strategic", "ns")
    assert out["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "o2", "uid": "u2", "blockOwnerDeletion": True}]
    # a merge patch replaces lists wholesale
    out = c.patch("v1", "configmaps", "cm", {"metadata": {"finalizers": ["a/z"]}}, "merge", "ns")
    assert out["metadata"]["finalizers"] == ["a/z"]


def test_json_patch_that_does_not_apply_is_422(c):
    c.create("v1", "configmaps", {"metadata": {"name": "cm"}}, "ns")
    with pytest.raises(ApiError) as err:
        c.patch("v1", "configmaps", "cm", [{"op": "remove", "path": "/metadata/finalizers"}], "json", "ns")
    assert (err.value.code, err.value.reason, err.value.message) == (
        422, "Invalid", "the server rejected our request due to an error in our request")


def test_custom_resources_refuse_strategic_merge_patch(c):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    c.create("apiextensions.k8s.io/v1", "customresourcedefinitions", crd)
    c.create("example.com/v1", "widgets", {"metadata": {"name": "w"}, "spec": {"size": 1}}, "ns")
    with pytest.raises(ApiError) as err:
        c.patch("example.com/v1", "widgets", "w", {"spec": {"size": 2}}, "strategic", "ns")
    assert err.value.code == 415
    assert c.patch("example.com/v1", "widgets", "w", {"spec": {"size": 2}}, "merge", "ns")["spec"] == {"size": 2}


# -- create ----------------------------------------------------------------------------------------

def test_create_validation_and_namespace_existence(c):
    with pytest.raises(ApiError) as err:
        c.create("v1", "configmaps", {"metadata": {"name": "Bad_Name"}}, "ns")
    assert err.value.code == 422 and err.value.message.startswith(
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain')
    with pytest.raises(ApiError) as err:
        c.create("v1", "configmaps", {"metadata": {"name": "cm", "finalizers": ["nope"]}}, "ns")
    assert 'metadata.finalizers[0]: Invalid value: "nope": name is neither a standard finalizer name nor is it ' \
           'fully qualified' in err.value.message
    with pytest.raises(ApiError) as err:
        c.create("v1", "configmaps", {"metadata": {"name": "cm"}}, "missing")
    assert (err.value.code, err.value.message) == (404, 'namespaces "missing" not found')
    c.create("v1", "configmaps", {"metadata": {"name": "cm"}}, "ns")
    with pytest.raises(ApiError) as err:
        c.create("v1", "configmaps", {"metadata": {"name": "cm"}}, "ns")
    assert (err.value.code, err.value.message) == (409, 'configmaps "cm" already exists')
    generated = c.create("v1", "configmaps", {"metadata": {"generateName": "gen-"}}, "ns")
    assert generated["metadata"]["name"].startswith("gen-") and len(generated["metadata"]["name"]) == 9


def test_owner_reference_validation(c):
    with pytest.raises(ApiError) as err:
        c.create("v1", "configmaps", {"metadata": {"name": "cm", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"},
            {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "2", "controller": True},
            {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "3", "controller": True}]}}, "ns")
    assert "is disallowed from being an owner" in err.value.message
    assert 'Only one reference can have Controller set to true. Found "true" in references for A/a and B/b' \
        in err.value.message


# -- storage ---------------------------------------------------------------------------------------

def test_objects_and_revision_survive_reopening(tmp_path):
    store = Store(tmp_path / "objects.db")
    c = LocalClient(Api(Registry(store)), "admin", ["system:masters", "system:authenticated"])
    c.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    cm = c.create("v1", "configmaps", {"metadata": {"name": "cm"}, "data": {"k": "v"}}, "ns")
    c.delete("v1", "namespaces", "ns")              # Terminating; removed when its finalizers are gone
    ns = c.get("v1", "namespaces", "ns")
    c.update("v1", "namespaces", dict(ns, spec={"finalizers": []}), subresource="finalize")
    revision = store.revision
    store.close()
    store = Store(tmp_path / "objects.db")
    try:
        assert store.revision == revision
        assert store.get("/configmaps", "ns", "cm") == cm
        assert store.get("/namespaces", "", "ns") is None
    finally:
        store.close()


def test_watch_replays_from_a_resource_version_and_expires_old_ones(c, api):
    first = c.create("v1", "configmaps", {"metadata": {"name": "a"}}, "ns")
    c.create("v1", "configmaps", {"metadata": {"name": "b", "labels": {"x": "1"}}}, "ns")
    c.patch("v1", "configmaps", "b", {"metadata": {"labels": {"x": "2"}}}, "merge", "ns")
    watch = c.watch("v1", "configmaps", "ns", resource_version=first["metadata"]["resourceVersion"],
                    label_selector="x=1")
    events = [watch.next(1) for _ in range(2)]
    watch.stop()
    # b entered the selection (ADDED) and left it when its label changed (DELETED)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b"), ("DELETED", "b")]
    api.registry.store._log_first = api.registry.store.revision + 1     # as after a restart
    # the watch cache: 200, then one ERROR event carrying 410 Expired, then the end
    watch = c.watch("v1", "configmaps", "ns", resource_version=first["metadata"]["resourceVersion"])
    error = watch.next(1)
    assert error["type"] == "ERROR" and error["object"]["code"] == 410 and error["object"]["reason"] == "Expired"
    assert error["object"]["message"].startswith(f"too old resource version: {first['metadata']['resourceVersion']} (")
    assert watch.next(0.2) is None and watch.ended


@pytest.mark.parametrize("selector, kind", [("labelSelector", "a in ("), ("labelSelector", "a b"),
                                             ("fieldSelector", "spec.nope=1"), ("fieldSelector", "garbage")])
def test_bad_selectors_are_400(c, selector, kind):
    code, body = c.request("GET", "/api/v1/namespaces/ns/pods", {selector: kind})
    assert code == 400 and body["kind"] == "Status" and body["reason"] == "BadRequest", body


def test_status_subresource_keeps_the_spec(c):
    created = c.create("v1", "namespaces", {"metadata": {"name": "other", "labels": {"a": "b"}}})
    assert created["status"] == {"phase": "Active"}
    assert created["metadata"]["labels"]["kubernetes.io/metadata.name"] == "other"
    status = {"phase": "Active", "conditions": [{"type": "Example", "status": "True"}]}
    # namespaceStatusStrategy keeps only the spec: the metadata of a status update is taken (the
    # name label comes back as a default)
    changed = dict(created, status=status, spec={}, metadata=dict(created["metadata"], labels={}))
    out = c.update("v1", "namespaces", changed, subresource="status")
    assert out["status"] == status and out["metadata"]["labels"] == {"kubernetes.io/metadata.name": "other"}
    assert out["spec"] == {"finalizers": ["kubernetes"]}
    # the main resource ignores status
    out = c.update("v1", "namespaces", dict(out, status={"phase": "Active"}))
    assert out["status"] == status
    # the phase must match deletionTimestamp (ValidateNamespaceStatusUpdate)
    with pytest.raises(ApiError) as err:
        c.update("v1", "namespaces", dict(out, status={"phase": "Terminating"}), subresource="status")
    assert err.value.code == 422 and err.value.message == (
        'Namespace "other" is invalid: status.Phase: Invalid value: "Terminating": may only be \'Active\' if '
        '`deletionTimestamp` is empty')


def test_finalize_subresource_applies_spec_and_metadata_and_keeps_the_status(c):
    """namespaceFinalizeStrategy.PrepareForUpdate keeps only the stored status."""
    ns = c.get("v1", "namespaces", "ns")
    ns["spec"] = {"finalizers": ["kubernetes", "example.com/x"]}
    ns["metadata"]["labels"]["applied"] = "yes"
    ns["status"] = {"phase": "Terminating"}
    out = c.update("v1", "namespaces", ns, subresource="finalize")
    assert out["spec"]["finalizers"] == ["kubernetes", "example.com/x"] and out["metadata"]["labels"]["applied"] == "yes"
    assert out["status"] == {"phase": "Active"}
    # normal updates cannot change spec.finalizers
    out = c.update("v1", "namespaces", dict(out, spec={"finalizers": []}))
    assert out["spec"]["finalizers"] == ["kubernetes", "example.com/x"]
    with pytest.raises(ApiError) as err:
        c.update("v1", "namespaces", dict(out, spec={"finalizers": ["kubernetes", "bad"]}), subresource="finalize")
    # ValidateNamespaceFinalizeUpdate reports each entry at its index
    assert err.value.message == ('Namespace "ns" is invalid: spec.finalizers[1]: Invalid value: "bad": name is '
                                 'neither a standard finalizer name nor is it fully qualified')
    assert json.dumps(out)


def test_deletecollection_deletes_each_selected_item_with_the_same_options(c):
    for name, labels in (("a", {"x": "1"}), ("b", {"x": "1"}), ("c", {"x": "2"})):
        c.create("v1", "configmaps", {"metadata": {"name": name, "labels": labels}}, "ns")
    code, body = c.request("DELETE", "/api/v1/namespaces/ns/configmaps", {"labelSelector": "x=1"},
                           body={"propagationPolicy": "Orphan"})
    assert code == 200 and body["kind"] == "ConfigMapList" and [i["metadata"]["name"] for i in body["items"]] == ["a", "b"]
    for name in ("a", "b"):
        assert c.get("v1", "configmaps", name, "ns")["metadata"]["finalizers"] == ["orphan"]
    assert "deletionTimestamp" not in c.get("v1", "configmaps", "c", "ns")["metadata"]
    code, body = c.request("DELETE", "/api/v1/namespaces")
    assert code == 405 and body["message"] == 'deletecollection is not supported on resources of kind "namespaces"'


# -- scale and status subresources ------------------------------------------------------------------

def test_scale_subresource_of_deployments_replicasets_and_replication_controllers(c):
    d = c.create("apps/v1", "deployments", DEPLOY, "ns")
    scale = c.get("apps/v1", "deployments", "d", "ns", subresource="scale")
    assert scale == {"kind": "Scale", "apiVersion": "autoscaling/v1",
                     "metadata": {k: d["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                               "creationTimestamp")},
                     "spec": {"replicas": 1}, "status": {"replicas": 0, "selector": "a=b"}}
    scaled = c.patch("apps/v1", "deployments", "d", {"spec": {"replicas": 3}}, "merge", "ns", subresource="scale")
    assert scaled["spec"]["replicas"] == 3
    after = c.get("apps/v1", "deployments", "d", "ns")
    assert after["spec"]["replicas"] == 3 and after["metadata"]["generation"] == 2
    stale = dict(scaled, spec={"replicas": 5}, metadata=dict(scaled["metadata"], resourceVersion="1"))
    with pytest.raises(ApiError) as err:
        c.update("apps/v1", "deployments", stale, "ns", subresource="scale")
    assert err.value.code == 409 and err.value.reason == "Conflict"
    with pytest.raises(ApiError) as err:
        c.update("apps/v1", "deployments", dict(scaled, spec={"replicas": -1}), "ns", subresource="scale")
    assert err.value.code == 422 and err.value.message == (
        'Scale.autoscaling "d" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0')
    c.create("v1", "replicationcontrollers", RC, "ns")
    rc_scale = c.get("v1", "replicationcontrollers", "rc", "ns", subresource="scale")
    assert rc_scale["status"] == {"replicas": 0, "selector": "a=b"} and rc_scale["spec"] == {}
    code, body = c.request("GET", "/apis/apps/v1")
    entry = next(r for r in body["resources"] if r["name"] == "deployments/scale")
    assert (entry["group"], entry["version"], entry["kind"], entry["verbs"]) == ("autoscaling", "v1", "Scale",
                                                                               ["get", "patch", "update"])


def test_status_strategies_keep_what_upstream_keeps(c):
    d = c.create("apps/v1", "deployments", {**DEPLOY, "metadata": {"name": "d", "labels": {"l": "1"}}}, "ns")
    changed = copy.deepcopy(d)
    changed["spec"]["replicas"] = 7
    changed["metadata"]["labels"] = {"l": "2"}
    changed["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "1"}
    changed["status"] = {"observedGeneration": 1}
    out = c.update("apps/v1", "deployments", changed, "ns", "status")
    # deploymentStatusStrategy: spec and labels stay, the rest of the metadata is taken
    assert out["spec"]["replicas"] == 1 and out["metadata"]["labels"] == {"l": "1"}
    assert out["metadata"]["annotations"] == {"deployment.kubernetes.io/revision": "1"}
    assert out["status"] == {"observedGeneration": 1} and out["metadata"]["generation"] == 1
    p = c.create("v1", "pods", {**pod("p"), "metadata": {"name": "p", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u-1"}]}}, "ns")
    changed = copy.deepcopy(p)
    changed["metadata"]["ownerReferences"] = []
    changed["status"] = {"phase": "Running"}
    out = c.update("v1", "pods", changed, "ns", "status")
    assert out["metadata"]["ownerReferences"] == p["metadata"]["ownerReferences"]
    assert out["status"] == {"phase": "Running", "qosClass": "BestEffort"}
