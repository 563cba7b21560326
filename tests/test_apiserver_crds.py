"""Custom resources under their CRD's structural schema: pruning of unknown fields, schema
defaults, validation with apiextensions' messages, status and scale subresources, printer
columns, and server-side apply along the schema's list types."""

from __future__ import annotations

import pytest

from labkit.apiserver.errors import ApiError
from labkit.apiserver.request import NO_BODY, Request, User
from support import admin_client, in_process_api

SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "required": ["color"], "properties": {
        "replicas": {"type": "integer", "minimum": 0, "default": 1},
        "color": {"type": "string", "enum": ["red", "green"]},
        "name": {"type": "string", "maxLength": 5},
        "selector": {"type": "string"},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                  "items": {"type": "object", "required": ["port"], "properties": {
                      "port": {"type": "integer"}, "name": {"type": "string"}}}},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA},
                              "subresources": {"status": {}, "scale": {
                                  "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                                  "labelSelectorPath": ".spec.selector"}},
                              "additionalPrinterColumns": [
                                  {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                                  {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                                  {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]}]}}


@pytest.fixture
def api(tmp_path):
    with in_process_api(tmp_path / "objects.db") as api:
        admin_client(api).create("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD)
        yield api


@pytest.fixture
def c(api):
    return admin_client(api)


def handle(api, method, path, body=None, query=None, accept="application/json", content_type=None):
    headers = {"accept": accept, **({"content-type": content_type} if content_type else {})}
    return api.handle(Request(method, path, dict(query or {}), headers, obj=NO_BODY if body is None else body,
                              user=User("admin", ["system:masters"])))


def widget(**spec):
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"color": "red", **spec}}


def test_the_crd_needs_a_structural_schema(c):
    bad = {**CRD, "metadata": {"name": "gadgets.example.com"},
           "spec": {**CRD["spec"], "names": {"plural": "gadgets", "kind": "Gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True}]}}
    with pytest.raises(ApiError) as err:
        c.create("apiextensions.k8s.io/v1", "customresourcedefinitions", bad)
    assert err.value.code == 422 and "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required" \
        in err.value.message
    bad["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {}}}}
    with pytest.raises(ApiError) as err:
        c.create("apiextensions.k8s.io/v1", "customresourcedefinitions", bad)
    assert "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for " \
           "specified object fields" in err.value.message


def test_unknown_fields_are_pruned_and_defaults_applied(api, c):
    body = widget(size=3, extra={"anything": {"goes": True}})
    path = "/apis/example.com/v1/namespaces/ns/widgets"
    r = handle(api, "POST", path, body, {"fieldValidation": "Strict"})
    assert r.code == 400 and r.body["message"] == ('Widget in version "v1" cannot be handled as a Widget: strict '
                                                   'decoding error: unknown field "spec.size"')
    r = handle(api, "POST", path, body)
    assert r.code == 201 and r.warnings == ['unknown field "spec.size"']
    assert r.body["spec"] == {"color": "red", "replicas": 1, "extra": {"anything": {"goes": True}}}


@pytest.mark.parametrize("spec, message", [
    ({"replicas": "two"}, 'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: '
                          '"string"'),
    ({"replicas": -1}, "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"),
    ({"color": "blue"}, 'spec.color: Unsupported value: "blue": supported values: "red", "green"'),
    ({"name": "toolong"}, "spec.name: Too long: may not be more than 5 bytes"),
    ({"ports": [{"port": 80}, {"port": 80}]}, 'spec.ports[1]: Duplicate value: {"port":80}'),
])
def test_validation_against_the_schema(c, spec, message):
    with pytest.raises(ApiError) as err:
        c.create("example.com/v1", "widgets", widget(**spec), "ns")
    assert err.value.code == 422 and err.value.message == f'Widget.example.com "w" is invalid: {message}'


def test_required_fields(c):
    with pytest.raises(ApiError) as err:
        c.create("example.com/v1", "widgets", {"metadata": {"name": "w"}, "spec": {}}, "ns")
    assert err.value.message == 'Widget.example.com "w" is invalid: spec.color: Required value'


def test_status_scale_and_printer_columns(api, c):
    c.create("example.com/v1", "widgets", widget(replicas=2, selector="app=w"), "ns")
    w = c.get("example.com/v1", "widgets", "w", "ns")
    # the main resource does not change the status, the status subresource only the status
    updated = c.update("example.com/v1", "widgets", dict(w, status={"replicas": 9}), "ns")
    assert "status" not in updated
    status = c.update("example.com/v1", "widgets", dict(updated, spec={"color": "green"}, status={"replicas": 2}),
                      "ns", "status")
    assert status["status"] == {"replicas": 2} and status["spec"]["color"] == "red"
    scale = c.get("example.com/v1", "widgets", "w", "ns", subresource="scale")
    assert scale["spec"] == {"replicas": 2} and scale["status"] == {"replicas": 2, "selector": "app=w"}
    c.patch("example.com/v1", "widgets", "w", {"spec": {"replicas": 4}}, "merge", "ns", subresource="scale")
    assert c.get("example.com/v1", "widgets", "w", "ns")["spec"]["replicas"] == 4
    table = handle(api, "GET", "/apis/example.com/v1/namespaces/ns/widgets",
                   accept="application/json;as=Table;g=meta.k8s.io;v=v1").body
    assert [col["name"] for col in table["columnDefinitions"]] == ["Name", "Replicas", "Color", "Age"]
    assert table["rows"][0]["cells"][:3] == ["w", 4, "red"]


def test_server_side_apply_follows_the_schemas_list_types(c):
    def apply(manager, body, force=False):
        query = {"fieldManager": manager, **({"force": "true"} if force else {})}
        return c.patch("example.com/v1", "widgets", "w", body, "apply", "ns", query=query)

    apply("alice", widget(ports=[{"port": 80, "name": "http"}]))
    both = apply("bob", {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                         "spec": {"ports": [{"port": 443, "name": "https"}]}})
    assert both["spec"]["ports"] == [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]
    with pytest.raises(ApiError) as err:
        apply("bob", {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                      "spec": {"ports": [{"port": 80, "name": "web"}]}})
    assert err.value.code == 409 and err.value.message == \
        'Apply failed with 1 conflict: conflict with "alice": .spec.ports[port=80].name'


def test_no_creates_while_the_crd_is_terminating(c):
    """apiextensions-apiserver customresource_handler.go serveResource: while the CRD's condition
    Terminating is True a create is refused with 405; reads, updates and deletes still work."""
    c.create("example.com/v1", "widgets", widget(), "ns")
    crd = c.get("apiextensions.k8s.io/v1", "customresourcedefinitions", "widgets.example.com")
    crd["status"]["conditions"].append({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
                                        "message": "CustomResource deletion is in progress",
                                        "lastTransitionTime": "2025-01-01T00:00:00Z"})
    c.update("apiextensions.k8s.io/v1", "customresourcedefinitions", crd, subresource="status")
    with pytest.raises(ApiError) as info:
        c.create("example.com/v1", "widgets", dict(widget(), metadata={"name": "late"}), "ns")
    assert (info.value.code, info.value.reason) == (405, "MethodNotAllowed")
    assert info.value.message == "create not allowed while custom resource definition is terminating"
    assert info.value.details == {"group": "example.com", "kind": "widgets"}
    assert c.get("example.com/v1", "widgets", "w", "ns")["spec"]["color"] == "red"
    c.patch("example.com/v1", "widgets", "w", {"spec": {"color": "green"}}, namespace="ns")
    c.delete("example.com/v1", "widgets", "w", "ns")
