"""The `kubernetes` Python client (typed and dynamic) against the embedded server over HTTPS."""

from __future__ import annotations

import json
import os
import stat
import threading
import time

import pytest
from kubernetes import client as k8s, config as k8s_config, dynamic, watch as k8s_watch

from labkit.apiserver import audit
from labkit.apiserver.server import EmbeddedServer
from support import host_lock, wait_until


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with host_lock(False):
        srv = EmbeddedServer(tmp_path_factory.mktemp("apiserver"), controllers=["garbagecollector"]).start()
    srv.controllers.get("garbagecollector").wait_synced(30)
    yield srv
    with host_lock(False):
        srv.stop()


@pytest.fixture(scope="module")
def api_client(server):
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(str(server.kubeconfig), client_configuration=configuration)
    with k8s.ApiClient(configuration) as api:
        yield api




def test_kubeconfig_is_private_and_a_token_is_required(server):
    assert stat.S_IMODE(os.stat(server.kubeconfig).st_mode) == 0o600
    from labkit.apiserver import certs
    from labkit.apiserver.client import HttpClient
    anonymous = HttpClient(server.url, None, certs.client_context(server.pki))
    code, body = anonymous.request("GET", "/api/v1/namespaces")
    assert code == 403 and body["message"].startswith(
        'namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces"')
    wrong = HttpClient(server.url, "not-the-token", certs.client_context(server.pki))
    assert wrong.request("GET", "/api/v1/namespaces")[0] == 401


def test_typed_client_create_get_patch_delete(api_client):
    v1 = k8s.CoreV1Api(api_client)
    v1.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="typed")))
    cm = v1.create_namespaced_config_map("typed", k8s.V1ConfigMap(
        metadata=k8s.V1ObjectMeta(name="cm", finalizers=["example.com/keep"]), data={"a": "b"}))
    assert cm.metadata.uid and cm.metadata.resource_version
    assert [c.metadata.name for c in v1.list_namespaced_config_map("typed").items] == ["cm"]
    # dict body: strategic merge patch; finalizers are a set
    patched = v1.patch_namespaced_config_map("cm", "typed", {"metadata": {"finalizers": ["example.com/more"]}})
    assert patched.metadata.finalizers == ["example.com/keep", "example.com/more"]
    # options as query parameters (the client sends no body)
    v1.delete_namespaced_config_map("cm", "typed", propagation_policy="Foreground")
    kept = v1.read_namespaced_config_map("cm", "typed")
    assert kept.metadata.deletion_timestamp is not None
    assert kept.metadata.finalizers[:2] == ["example.com/keep", "example.com/more"]
    # the configmap has no dependents: the GC removes foregroundDeletion again, the others stay
    assert wait_until(lambda: v1.read_namespaced_config_map("cm", "typed").metadata.finalizers
                      == ["example.com/keep", "example.com/more"])
    # list body: JSON patch; removing every finalizer removes the object
    v1.patch_namespaced_config_map("cm", "typed", [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(k8s.ApiException) as err:
        v1.read_namespaced_config_map("cm", "typed")
    assert err.value.status == 404
    assert json.loads(err.value.body)["message"] == 'configmaps "cm" not found'


def test_typed_client_errors_are_statuses(api_client):
    v1 = k8s.CoreV1Api(api_client)
    with pytest.raises(k8s.ApiException) as err:
        v1.create_namespaced_config_map("default", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="Not_Valid")))
    body = json.loads(err.value.body)
    assert err.value.status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "metadata.name"


def test_delete_options_body_without_content_type(api_client, server):
    v1 = k8s.CoreV1Api(api_client)
    v1.create_namespaced_config_map("default", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="opts")))
    # body wins over the query parameters, as in kube-apiserver; the answer is the object kept
    answer = v1.delete_namespaced_config_map("opts", "default", body=k8s.V1DeleteOptions(propagation_policy="Orphan"),
                                             propagation_policy="Background", _preload_content=False)
    kept = json.loads(answer.data)
    assert kept["metadata"]["finalizers"] == ["orphan"] and kept["metadata"]["deletionTimestamp"]
    # the GC removes the orphan finalizer (there are no dependents), which removes the object
    assert wait_until(lambda: not v1.list_namespaced_config_map("default", field_selector="metadata.name=opts").items)
    entries = [e for e in audit.read(server.state_dir / "audit.log")
               if e["verb"] == "delete" and e.get("objectRef", {}).get("name") == "opts"]
    assert entries[0]["requestObject"]["propagationPolicy"] == "Orphan"
    assert entries[0]["user"]["username"] == "labkit-admin" and entries[0]["responseStatus"]["code"] == 200
    # the GC removed the orphan finalizer (its audit line is written once it has its answer)
    def gc_patches():
        return [e for e in audit.read(server.state_dir / "audit.log")
                if e["verb"] == "patch" and e.get("objectRef", {}).get("name") == "opts"]
    assert wait_until(gc_patches)
    assert gc_patches()[0]["user"]["username"] == "system:serviceaccount:kube-system:generic-garbage-collector"


def test_watch_streams_events(api_client):
    v1 = k8s.CoreV1Api(api_client)
    seen = []

    def collect():
        w = k8s_watch.Watch()
        for event in w.stream(v1.list_namespaced_config_map, "default", timeout_seconds=5):
            seen.append((event["type"], event["object"].metadata.name))
            if event["type"] == "DELETED":
                w.stop()

    t = threading.Thread(target=collect)
    t.start()
    time.sleep(0.3)
    v1.create_namespaced_config_map("default", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="watched")))
    v1.patch_namespaced_config_map("watched", "default", {"data": {"x": "1"}})
    v1.delete_namespaced_config_map("watched", "default")
    t.join(10)
    assert ("ADDED", "watched") in seen and ("MODIFIED", "watched") in seen and seen[-1] == ("DELETED", "watched")


def test_dynamic_client_with_a_custom_resource_definition(api_client, server):
    dc = dynamic.DynamicClient(api_client)
    crds = dc.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.create(body={
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]}})
    dc.resources.invalidate_cache()
    widgets = dc.resources.get(api_version="example.com/v1", kind="Widget")
    assert widgets.namespaced and widgets.name == "widgets"
    widgets.create(body={"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
                         "spec": {"size": 3}}, namespace="default")
    assert widgets.get(name="w1", namespace="default").spec.size == 3
    # deleting the CRD deletes its custom resources, then the CRD itself
    crds.delete(name="widgets.example.com")
    assert wait_until(lambda: not any(i.metadata.name == "widgets.example.com" for i in crds.get().items))
    code, body = server.http_client().request("GET", "/apis/example.com/v1/namespaces/default/widgets/w1")
    assert code == 404 and body["message"] == "the server could not find the requested resource"


def test_table_for_kubectl_get(server):
    c = server.http_client()
    code, table = c.request("GET", "/api/v1/namespaces", accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    assert code == 200 and table["kind"] == "Table"
    assert [col["name"] for col in table["columnDefinitions"]] == ["Name", "Status", "Age"]
    assert ["default", "Active"] == table["rows"][0]["cells"][:2]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
