"""JSON Patch as kube-apiserver v1.34 applies it (gopkg.in/evanphx/json-patch.v4, vendored by
kubernetes v1.34.1: vendor/gopkg.in/evanphx/json-patch.v4/patch.go): every operation's failures
word for word, and the library's ways that differ from RFC 6902."""

import pytest

from labkit.apiserver import jsonpatch
from labkit.apiserver.jsonpatch import PatchError

POD = {"metadata": {"name": "x", "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]}}


@pytest.mark.parametrize("ops, message", [
    # Patch.add: findObject finds no container; the container refuses the key
    ([{"op": "add", "path": "/metadata/annotations/example.com~1owner", "value": "web-team"}],
     'add operation does not apply: doc is missing path: "/metadata/annotations/example.com~1owner": missing value'),
    ([{"op": "add", "path": "/metadata/name/x", "value": 1}],
     'add operation does not apply: doc is missing path: "/metadata/name/x": missing value'),
    ([{"op": "add", "path": "/spec/containers/5", "value": {}}],
     "error in add for path: '/spec/containers/5': Unable to access invalid index: 5: invalid index referenced"),
    ([{"op": "add", "path": "/spec/containers/x", "value": {}}],
     "error in add for path: '/spec/containers/x': value was not a proper array index: 'x': "
     'strconv.Atoi: parsing "x": invalid syntax'),
    ([{"op": "add", "value": 1}], "add operation failed to decode path: missing value"),
    ([{"op": "add", "path": "", "value": 1}], 'add operation does not apply: doc is missing path: "": missing value'),
    # Patch.remove
    ([{"op": "remove", "path": "/metadata/labels/example.com~1owner"}],
     "error in remove for path: '/metadata/labels/example.com~1owner': Unable to remove nonexistent key: "
     "example.com/owner: missing value"),
    ([{"op": "remove", "path": "/metadata/annotations/a"}],
     'remove operation does not apply: doc is missing path: "/metadata/annotations/a": missing value'),
    ([{"op": "remove", "path": "/spec/containers/2"}],
     "error in remove for path: '/spec/containers/2': Unable to access invalid index: 2: invalid index referenced"),
    ([{"op": "remove", "path": "/spec/containers/-3"}],
     "error in remove for path: '/spec/containers/-3': Unable to access invalid index: -3: invalid index referenced"),
    ([{"op": "remove", "path": "/spec/containers/last"}],
     "error in remove for path: '/spec/containers/last': strconv.Atoi: parsing \"last\": invalid syntax"),
    ([{"op": "remove"}], "remove operation failed to decode path: missing value"),
    # Patch.replace: no quotes around the path
    ([{"op": "replace", "path": "/metadata/annotations/a", "value": "b"}],
     "replace operation does not apply: doc is missing path: /metadata/annotations/a: missing value"),
    ([{"op": "replace", "path": "/spec/containers/2", "value": {}}],
     "replace operation does not apply: doc is missing key: /spec/containers/2: missing value"),
    ([{"op": "replace", "value": 1}], "replace operation failed to decode path: operation missing path field: "
                                      "missing value"),
    ([{"op": "replace", "path": 3, "value": 1}],
     "replace operation failed to decode path: json: cannot unmarshal number into Go value of type string"),
    # Patch.move: the from path first; its key (not its path) in the error of a missing key
    ([{"op": "move", "from": "/metadata/labels/gone", "path": "/metadata/labels/here"}],
     "error in move for path: 'gone': Unable to remove nonexistent key: gone: missing value"),
    ([{"op": "move", "from": "/metadata/annotations/a", "path": "/metadata/labels/a"}],
     "move operation does not apply: doc is missing from path: /metadata/annotations/a: missing value"),
    ([{"op": "move", "from": "/metadata/labels/app", "path": "/metadata/annotations/app"}],
     "move operation does not apply: doc is missing destination path: /metadata/annotations/app: missing value"),
    ([{"op": "move", "path": "/a"}], "move operation failed to decode from: operation, missing from field: "
                                     "missing value"),
    ([{"op": "move", "from": "/spec/containers/0", "path": "/spec/containers/9"}],
     "error in move for path: '/spec/containers/9': Unable to access invalid index: 9: invalid index referenced"),
    # Patch.copy
    ([{"op": "copy", "from": "/metadata/annotations/a", "path": "/metadata/labels/a"}],
     "copy operation does not apply: doc is missing from path: /metadata/annotations/a: missing value"),
    ([{"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/annotations/app"}],
     "copy operation does not apply: doc is missing destination path: /metadata/annotations/app: missing value"),
    ([{"op": "copy", "from": "/spec/containers/7", "path": "/spec/containers/-"}],
     "error in copy for from: '/spec/containers/7': Unable to access invalid index: 7: invalid index referenced"),
    ([{"op": "copy", "from": "/metadata/labels/app"}], "copy operation failed to decode path: missing value"),
    ([{"op": "copy", "path": "/a"}], "copy operation failed to decode from: operation, missing from field: "
                                     "missing value"),
    ([{"op": "copy", "from": "/metadata/labels/app", "path": "/spec/containers/4"}],
     "error while adding value during copy: Unable to access invalid index: 4: invalid index referenced"),
    # Patch.test: "is missing path", without "doc"
    ([{"op": "test", "path": "/metadata/labels/app", "value": "db"}],
     "testing value /metadata/labels/app failed: test failed"),
    ([{"op": "test", "path": "/metadata/labels/owner", "value": "web-team"}],
     "testing value /metadata/labels/owner failed: test failed"),
    ([{"op": "test", "path": "/metadata/annotations/a", "value": "b"}],
     "test operation does not apply: is missing path: /metadata/annotations/a: missing value"),
    ([{"op": "test", "path": "/spec/containers/3", "value": {}}],
     "error in test for path: '/spec/containers/3': Unable to access invalid index: 3: invalid index referenced"),
    ([{"op": "test", "path": "", "value": {}}], "testing value  failed: test failed"),
    ([{"op": "test", "value": 1}], "test operation failed to decode path: operation missing path field: missing value"),
    # Apply: an operation of no known kind
    ([{"op": "merge", "path": "/a", "value": 1}], "Unexpected kind: merge"),
    ([{"path": "/a", "value": 1}], "Unexpected kind: unknown"),
    ([{"op": 1, "path": "/a"}], "Unexpected kind: unknown"),
])
def test_failures_are_worded_as_the_library_words_them(ops, message):
    with pytest.raises(PatchError) as err:
        jsonpatch.apply(POD, ops)
    assert str(err.value) == message


def test_the_first_failure_ends_the_patch_and_the_document_is_untouched():
    before = {"metadata": {"labels": {"a": "1"}}}
    with pytest.raises(PatchError):
        jsonpatch.apply(before, [{"op": "add", "path": "/metadata/labels/b", "value": "2"},
                                 {"op": "remove", "path": "/metadata/labels/c"}])
    assert before == {"metadata": {"labels": {"a": "1"}}}


@pytest.mark.parametrize("ops, expected", [
    # partialDoc.get never fails: replace sets a key the object lacks
    ([{"op": "replace", "path": "/metadata/labels/new", "value": "v"}], {"app": "web", "new": "v"}),
    # add and copy without a value, or from a missing key, write null
    ([{"op": "add", "path": "/metadata/labels/n"}], {"app": "web", "n": None}),
    ([{"op": "copy", "from": "/metadata/labels/none", "path": "/metadata/labels/n"}], {"app": "web", "n": None}),
    # add of an existing key replaces it (RFC 6902 4.1)
    ([{"op": "add", "path": "/metadata/labels/app", "value": "db"}], {"app": "db"}),
    # "~1" is "/", "~0" is "~", in one pass: "~01" is "~1"
    ([{"op": "add", "path": "/metadata/labels/a~1b~01", "value": "v"}], {"app": "web", "a/b~1": "v"}),
    # the first segment is dropped whatever it is (findObject splits on "/")
    ([{"op": "add", "path": "metadata/x", "value": "v"}], None),
    # a test of a missing key against null passes
    ([{"op": "test", "path": "/metadata/labels/none", "value": None}], {"app": "web"}),
    ([{"op": "move", "from": "/metadata/labels/app", "path": "/metadata/labels/tier"}], {"tier": "web"}),
])
def test_the_librarys_own_ways(ops, expected):
    out = jsonpatch.apply(POD, ops)
    if expected is None:
        assert out["x"] == "v" and out["metadata"] == POD["metadata"]
    else:
        assert out["metadata"]["labels"] == expected


def test_array_indices_are_gos_atoi_and_may_count_from_the_end():
    out = jsonpatch.apply(POD, [{"op": "add", "path": "/spec/containers/-1", "value": {"name": "c"}},
                                {"op": "remove", "path": "/spec/containers/+0"},
                                {"op": "replace", "path": "/spec/containers/-1/image", "value": "nginx:1.27"}])
    # -1 for add is the end (the new array's length is added), +0 is 0
    assert [c["name"] for c in out["spec"]["containers"]] == ["b", "c"]
    assert out["spec"]["containers"][1]["image"] == "nginx:1.27"


def test_replacing_the_whole_document_with_a_scalar_does_nothing():
    assert jsonpatch.apply(POD, [{"op": "replace", "path": "", "value": 5}]) == POD
    assert jsonpatch.apply(POD, [{"op": "replace", "path": "", "value": {"a": 1}}]) == {"a": 1}


def test_test_compares_scalars_by_their_json_text():
    doc = {"n": 1, "b": True}
    jsonpatch.apply(doc, [{"op": "test", "path": "/n", "value": 1}])
    for value in (1.0, True, "1"):
        with pytest.raises(PatchError):
            jsonpatch.apply(doc, [{"op": "test", "path": "/n", "value": value}])
    with pytest.raises(PatchError):
        jsonpatch.apply(doc, [{"op": "test", "path": "/b", "value": 1}])


@pytest.mark.parametrize("ops, message", [
    ({"op": "add"}, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
    ("add", "json: cannot unmarshal string into Go value of type jsonpatch.Patch"),
    ([{"op": "add"}, 1], "json: cannot unmarshal number into Go value of type jsonpatch.Operation"),
    ([["add"]], "json: cannot unmarshal array into Go value of type jsonpatch.Operation"),
    ([{"op": "add"}, None], ""),
])
def test_decoding_a_patch(ops, message):
    """jsonpatch.DecodePatch: json.Unmarshal into []Operation (map[string]*json.RawMessage)."""
    assert jsonpatch.check_operations(ops) == message
