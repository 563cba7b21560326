"""API machinery details clients rely on: content negotiation (Table, PartialObjectMetadata, YAML),
list semantics of resourceVersion / resourceVersionMatch / continue (one snapshot per paged
list, 410 once it is gone), watches from a compacted revision, the encoder's trailing newline,
JSON-patch failure causes, and deletions that change nothing."""

from __future__ import annotations

import json

import pytest
import yaml

from labkit.apiserver.client import HttpClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.request import Request, User
from labkit.apiserver.server import EmbeddedServer
from support import host_lock

NS = "default"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with host_lock(False):
        srv = EmbeddedServer(tmp_path_factory.mktemp("apiserver"), controllers=[]).start()
    yield srv
    with host_lock(False):
        srv.stop()


@pytest.fixture
def c(server):
    return server.client()


def raw(server, method: str, path: str, accept: str | None = None, body: bytes | None = None,
        content_type: str | None = None) -> tuple[int, dict, bytes]:
    """One HTTP request: (status, headers, body bytes)."""
    http = HttpClient.from_kubeconfig(server.kubeconfig)
    conn = http._connect()
    try:
        headers = http._headers(content_type, accept)
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def test_content_negotiation_table_partial_metadata_yaml_and_406(server, c):
    c.create("v1", "configmaps", {"metadata": {"name": "neg", "labels": {"x": "y"}}, "data": {"a": "b"}}, NS)
    path = f"/api/v1/namespaces/{NS}/configmaps"
    code, headers, body = raw(server, "GET", path + "/neg",
                              "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
    obj = json.loads(body)
    assert code == 200 and obj["kind"] == "PartialObjectMetadata" and obj["apiVersion"] == "meta.k8s.io/v1"
    assert obj["metadata"]["labels"] == {"x": "y"} and "data" not in obj
    assert headers["content-type"] == "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
    code, _, body = raw(server, "GET", path, "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1")
    listed = json.loads(body)
    assert listed["kind"] == "PartialObjectMetadataList" and listed["apiVersion"] == "meta.k8s.io/v1beta1"
    assert [i["kind"] for i in listed["items"]] == ["PartialObjectMetadata"] and listed["metadata"]["resourceVersion"]
    code, _, body = raw(server, "GET", path, "application/json;as=Table;g=meta.k8s.io;v=v1beta1,application/json")
    assert json.loads(body)["apiVersion"] == "meta.k8s.io/v1beta1" and json.loads(body)["kind"] == "Table"
    code, headers, body = raw(server, "GET", path + "/neg", "application/yaml")
    assert code == 200 and headers["content-type"] == "application/yaml" and yaml.safe_load(body)["data"] == {"a": "b"}
    # a list cannot be PartialObjectMetadata, and protobuf is not written: 406 when nothing else is accepted
    for accept in ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                   "application/vnd.kubernetes.protobuf", "text/html"):
        code, _, body = raw(server, "GET", path, accept)
        status = json.loads(body)
        assert code == 406 and status["reason"] == "NotAcceptable", accept
        assert status["message"] == ("only the following media types are accepted: application/json, "
                                     "application/yaml, application/vnd.kubernetes.protobuf")
    # watches of metadata only (client-go's metadata informers)
    response = server.api.handle(Request("GET", path, {"watch": "true", "fieldSelector": "metadata.name=neg"},
                                         {"accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"},
                                         user=User("admin", ["system:masters"])))
    event = response.stream.next(1)
    response.stream.close()
    assert event["type"] == "ADDED" and event["object"]["kind"] == "PartialObjectMetadata"
    assert event["object"]["metadata"]["name"] == "neg" and "data" not in event["object"]


def test_json_answers_end_with_a_newline_like_the_go_encoder(server):
    for path in ("/version", "/api", "/api/v1/namespaces/default", "/api/v1/namespaces/default/configmaps/missing"):
        _, _, body = raw(server, "GET", path)
        assert body.endswith(b"}\n") and not body.endswith(b"\n\n"), path


def test_lists_at_an_exact_resource_version_and_their_limits(server, c):
    first = c.create("v1", "configmaps", {"metadata": {"name": "rv-a"}, "data": {"v": "1"}}, NS)
    rv = first["metadata"]["resourceVersion"]
    c.patch("v1", "configmaps", "rv-a", {"data": {"v": "2"}}, "merge", NS)
    c.create("v1", "configmaps", {"metadata": {"name": "rv-b"}}, NS)
    path = f"/api/v1/namespaces/{NS}/configmaps"
    code, body = c.request("GET", path, {"resourceVersion": rv, "resourceVersionMatch": "Exact"})
    names = {i["metadata"]["name"]: i for i in body["items"]}
    assert code == 200 and body["metadata"]["resourceVersion"] == rv
    assert "rv-b" not in names and names["rv-a"]["data"] == {"v": "1"}
    # NotOlderThan (and no match) read the latest state
    code, body = c.request("GET", path, {"resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"})
    assert {"rv-a", "rv-b"} <= {i["metadata"]["name"] for i in body["items"]}
    assert int(body["metadata"]["resourceVersion"]) > int(rv)
    current = int(body["metadata"]["resourceVersion"])
    code, body = c.request("GET", path, {"resourceVersion": str(current + 100)})
    assert code == 504 and body["reason"] == "Timeout"
    assert body["message"] == f"Timeout: Too large resource version: {current + 100}, current: {current}"
    assert body["details"]["causes"] == [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    for query, detail in (
            ({"resourceVersionMatch": "Exact"}, "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
                                                "unless resourceVersion is provided"),
            ({"resourceVersion": "0", "resourceVersionMatch": "Exact"},
             'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
            ({"resourceVersion": "1", "resourceVersionMatch": "Newest"},
             'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""')):
        code, body = c.request("GET", path, query)
        assert code == 422 and body["message"] == f'ListOptions.meta.k8s.io "" is invalid: {detail}', body


def test_continue_tokens_page_one_snapshot_and_expire_with_it(server, c):
    ns = "paging"
    c.create("v1", "namespaces", {"metadata": {"name": ns}})
    for i in range(5):
        c.create("v1", "configmaps", {"metadata": {"name": f"cm-{i}"}, "data": {"v": "old"}}, ns)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    code, page = c.request("GET", path, {"limit": "2"})
    assert [i["metadata"]["name"] for i in page["items"]] == ["cm-0", "cm-1"]
    assert page["metadata"]["remainingItemCount"] == 3
    token = page["metadata"]["continue"]
    # the world moves on between the pages ...
    c.delete("v1", "configmaps", "cm-3", ns)
    c.patch("v1", "configmaps", "cm-2", {"data": {"v": "new"}}, "merge", ns)
    c.create("v1", "configmaps", {"metadata": {"name": "cm-9"}}, ns)
    # ... and the following pages still show the list as it was at the first
    code, page = c.request("GET", path, {"limit": "2", "continue": token})
    assert [(i["metadata"]["name"], i["data"]["v"]) for i in page["items"]] == [("cm-2", "old"), ("cm-3", "old")]
    code, last = c.request("GET", path, {"limit": "2", "continue": page["metadata"]["continue"]})
    assert [i["metadata"]["name"] for i in last["items"]] == ["cm-4"] and "continue" not in last["metadata"]
    assert last["metadata"]["resourceVersion"] == page["metadata"]["resourceVersion"]
    code, body = c.request("GET", path, {"continue": token, "resourceVersion": "5"})
    assert code == 400 and body["message"] == "specifying resource version is not allowed when using continue"
    # once the history is gone: 410, and a token that goes on at the latest state
    store = server.registry.store
    saved = store._history_first
    store._history_first = store.revision + 1        # as after a compaction
    try:
        code, body = c.request("GET", path, {"limit": "2", "continue": token})
        assert code == 410 and body["reason"] == "Expired"
        assert body["message"].startswith("The provided continue parameter is too old to display a consistent list")
        code, rest = c.request("GET", path, {"continue": body["metadata"]["continue"]})
        assert [i["metadata"]["name"] for i in rest["items"]] == ["cm-2", "cm-4", "cm-9"]
        assert rest["items"][0]["data"]["v"] == "new"
        code, body = c.request("GET", path, {"resourceVersion": "2", "resourceVersionMatch": "Exact"})
        assert (code, body["message"]) == (410, "The resourceVersion for the provided list is too old.")
    finally:
        store._history_first = saved


def test_a_watch_from_a_compacted_revision_streams_200_then_an_error_event(server, c):
    c.create("v1", "configmaps", {"metadata": {"name": "w"}}, NS)
    store = server.registry.store
    saved = store._log_first
    store._log_first = store.revision + 1
    try:
        code, headers, body = raw(server, "GET", f"/api/v1/namespaces/{NS}/configmaps?watch=true&resourceVersion=1")
    finally:
        store._log_first = saved
    assert code == 200 and headers["transfer-encoding"] == "chunked"
    events = [json.loads(line) for line in body.splitlines() if line.strip()]
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"


def test_json_patch_failures_are_422_without_causes(c):
    """NewGenericServerResponse(422, ...) as handlers/patch.go calls it: v0.34 keeps the
    json-patch library's message only for unexpected responses, so there are no causes."""
    c.create("v1", "configmaps", {"metadata": {"name": "jp"}}, NS)
    with pytest.raises(ApiError) as err:
        c.patch("v1", "configmaps", "jp", [{"op": "remove", "path": "/data/missing"}], "json", NS)
    assert err.value.code == 422 and err.value.reason == "Invalid" and err.value.details == {}
    assert err.value.message == "the server rejected our request due to an error in our request"


def test_a_delete_that_changes_nothing_writes_nothing(c):
    c.create("v1", "configmaps", {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}, NS)
    _, first = c.delete("v1", "configmaps", "held", NS)
    rv = first["metadata"]["resourceVersion"]
    watch = c.watch("v1", "configmaps", NS, resource_version=rv, bookmarks=False)
    _, again = c.delete("v1", "configmaps", "held", NS)
    assert again["metadata"]["resourceVersion"] == rv
    assert again["metadata"]["deletionTimestamp"] == first["metadata"]["deletionTimestamp"]
    assert watch.next(0.3) is None, "a DELETE that changed nothing produced a watch event"
    watch.stop()
    c.patch("v1", "configmaps", "held", {"metadata": {"finalizers": None}}, "merge", NS)
