"""/openapi/v3 and /openapi/v2: every served kind described from the `kubernetes` package's models
and the generated Go type facts (gotypes.py, listtypes.py), custom resources from their CRDs."""

from __future__ import annotations

import json

import pytest

from labkit.apiserver import gotypes, models
from labkit.apiserver.client import LocalClient
from labkit.apiserver.handler import Api
from labkit.apiserver.request import NO_BODY, Request, User
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store

ADMIN = ["system:masters", "system:authenticated"]


@pytest.fixture
def api(tmp_path):
    store = Store(tmp_path / "objects.db")
    api = Api(Registry(store))
    yield api
    store.close()


def get(api, path):
    response = api.handle(Request("GET", path, {}, {"accept": "application/json"}, obj=NO_BODY,
                                  user=User("admin", ADMIN)))
    body = response.body
    return response.code, json.loads(body) if isinstance(body, bytes) else body


def document(api, group, version):
    code, root = get(api, "/openapi/v3")
    key = f"apis/{group}/{version}" if group else f"api/{version}"
    url = root["paths"][key]["serverRelativeURL"]
    assert "?hash=" in url
    code, doc = get(api, url.split("?")[0])
    assert code == 200
    return doc


def test_every_served_kind_has_its_models_fields_and_descriptions(api):
    for rt in api.registry.catalog.all():
        schemas = document(api, rt.group, rt.version)["components"]["schemas"]
        gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
        found = [s for s in schemas.values() if gvk in s.get("x-kubernetes-group-version-kind", [])]
        assert len(found) == 1, rt.kind
        schema = found[0]
        model = models.model(rt.model)
        assert set(schema["properties"]) == set(model.fields), rt.kind
        assert schema["description"] == gotypes.DEFINITIONS[rt.model][1]
        for name, prop in schema["properties"].items():
            # certificates/v1's ObjectMeta field has no doc comment, so upstream's schema has none
            assert prop.get("description") or (rt.kind, name) == ("CertificateSigningRequest", "metadata"), \
                (rt.kind, name)
        assert schema.get("required", []) == [f.name for f in model.fields.values() if f.required]


def test_field_schemas_carry_types_refs_enums_and_patch_strategies(api):
    schemas = document(api, "apps", "v1")["components"]["schemas"]
    spec = schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]
    assert spec["replicas"]["type"] == "integer" and spec["replicas"]["format"] == "int32"
    assert spec["strategy"]["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy"}]
    assert spec["strategy"]["x-kubernetes-patch-strategy"] == "retainKeys"
    assert spec["selector"]["description"].startswith("Label selector for pods.")
    pod = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]
    assert pod["containers"]["x-kubernetes-list-type"] == "map"
    assert pod["containers"]["x-kubernetes-list-map-keys"] == ["name"]
    assert pod["containers"]["x-kubernetes-patch-merge-key"] == "name"
    assert pod["volumes"]["x-kubernetes-patch-strategy"] == "merge,retainKeys"
    assert pod["nodeSelector"]["x-kubernetes-map-type"] == "atomic"
    container = schemas["io.k8s.api.core.v1.Container"]["properties"]
    assert container["imagePullPolicy"]["enum"] == ["Always", "IfNotPresent", "Never"]
    limits = schemas["io.k8s.api.core.v1.ResourceRequirements"]["properties"]["limits"]
    assert limits["additionalProperties"] == {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}
    quantity = schemas["io.k8s.apimachinery.pkg.api.resource.Quantity"]
    assert quantity["oneOf"] == [{"type": "string"}, {"type": "number"}]
    assert quantity["description"].startswith("Quantity is a fixed-point representation of a number.")
    intorstring = schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
    assert intorstring["format"] == "int-or-string"
    time = schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Time"]
    assert (time["type"], time["format"]) == ("string", "date-time")
    # the patch operation advertises strategic merge patch for built-in kinds
    patch = document(api, "apps", "v1")["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    scale = document(api, "apps", "v1")["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    assert scale["get"]["x-kubernetes-group-version-kind"] == {"group": "autoscaling", "kind": "Scale",
                                                               "version": "v1"}


CRD = {"metadata": {"name": "widgets.example.com"}, "spec": {
    "group": "example.com", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
        "type": "object", "description": "A widget.", "properties": {"spec": {
            "type": "object", "description": "What the widget should be.", "nullable": True,
            "properties": {"color": {"type": "string", "enum": ["red", "green"]}}}}}}}]}}


def test_custom_resources_are_described_by_their_crd_while_it_exists(api):
    admin = LocalClient(api, "admin", ADMIN)
    admin.create("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD)
    doc = document(api, "example.com", "v1")
    widget = doc["components"]["schemas"]["com.example.v1.Widget"]
    assert widget["description"] == "A widget."
    assert widget["properties"]["spec"]["properties"]["color"]["enum"] == ["red", "green"]
    assert widget["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]
    assert widget["x-kubernetes-group-version-kind"] == [{"group": "example.com", "kind": "Widget", "version": "v1"}]
    patch = doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    code, v2 = get(api, "/openapi/v2")
    assert "nullable" not in v2["definitions"]["com.example.v1.Widget"]["properties"]["spec"]
    admin.delete("apiextensions.k8s.io/v1", "customresourcedefinitions", "widgets.example.com")
    # (what the CRD's cleanup controller does once no Widgets are left)
    admin.patch("apiextensions.k8s.io/v1", "customresourcedefinitions", "widgets.example.com",
                {"metadata": {"finalizers": None}})
    code, root = get(api, "/openapi/v3")
    assert "apis/example.com/v1" not in root["paths"]
    assert get(api, "/openapi/v3/apis/example.com/v1")[0] == 404
    assert "com.example.v1.Widget" not in get(api, "/openapi/v2")[1]["definitions"]
