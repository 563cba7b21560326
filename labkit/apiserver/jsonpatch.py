"""JSON Patch (RFC 6902) as kube-apiserver v1.34 applies it, with its errors word for word.

Both the PATCH handler (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go
applyJSPatch) and the mutating webhook dispatcher (.../admission/plugin/webhook/mutating/
dispatcher.go callAttrMutatingHook, which wraps the error as `Internal error occurred: <error>`)
use gopkg.in/evanphx/json-patch.v4 (vendor/gopkg.in/evanphx/json-patch.v4/patch.go). Its ways
are kept, including those that differ from the RFC:

- a path is split on "/" and its first segment dropped, whatever it is (findObject): a path
  without a leading "/" names a key of the document itself;
- a segment that leads to a missing key, a null, a string or a number ends the walk: the
  operation "does not apply" (findObject returns no container);
- `replace` of a key an object lacks sets it (partialDoc.get never fails); of an index an array
  lacks, it does not apply; `replace` of the whole document with a value that is neither an
  object nor an array does nothing;
- `add` and `copy` without a value (or from a missing key) write null;
- array indices are Go's strconv.Atoi ("+1", "007"), negative ones count from the end
  (SupportNegativeIndices);
- `test` compares scalars by their JSON text (1 and 1.0 differ).

Every error is pkg/errors' Wrapf: "<message>: <cause>", the causes being `missing value`,
`invalid index referenced` and `test failed` (ErrMissing, ErrInvalidIndex, ErrTestFailed).
"""

from __future__ import annotations

import json
import re

from labkit.gojson import value_type
from labkit.jsondata import json_copy

MISSING, INVALID_INDEX, TEST_FAILED = "missing value", "invalid index referenced", "test failed"
_ABSENT = object()     # an operation without the field (Go: no key in the Operation map)


class PatchError(Exception):
    """A patch that could not be applied to the object (422 on the wire, 500 from a webhook)."""


def _wrap(message: str, cause: str) -> PatchError:
    return PatchError(f"{message}: {cause}")


def check_operations(ops) -> str:
    """The error json.Unmarshal gives decoding `ops` into a jsonpatch.Patch ([]Operation,
    Operation being map[string]*json.RawMessage), or "" when it decodes."""
    if not isinstance(ops, list):
        return f"json: cannot unmarshal {value_type(ops)} into Go value of type jsonpatch.Patch"
    for op in ops:
        if op is not None and not isinstance(op, dict):
            return f"json: cannot unmarshal {value_type(op)} into Go value of type jsonpatch.Operation"
    return ""


# -- RFC 6901 keys and Go's strconv.Atoi ---------------------------------------------------------

_ESCAPE = re.compile("~[01]")


def decode_key(key: str) -> str:
    """strings.NewReplacer("~1", "/", "~0", "~"): one pass, left to right."""
    return _ESCAPE.sub(lambda m: "/" if m.group() == "~1" else "~", key)


_ATOI = re.compile(r"[+-]?[0-9]+")


def atoi(text: str) -> int:
    """strconv.Atoi, with its errors."""
    if not _ATOI.fullmatch(text):
        raise PatchError(f'strconv.Atoi: parsing {json.dumps(text)}: invalid syntax')
    value = int(text)
    if not -(1 << 63) <= value < (1 << 63):
        raise PatchError(f'strconv.Atoi: parsing {json.dumps(text)}: value out of range')
    return value


def _invalid_index(idx: int) -> PatchError:
    return _wrap(f"Unable to access invalid index: {idx}", INVALID_INDEX)


# -- the containers: partialDoc (a JSON object) and partialArray --------------------------------

def _get(container, key: str):
    """container.get: an object's missing key is None (no error); an array's index must exist."""
    if isinstance(container, dict):
        return container.get(key)
    idx = atoi(key)
    if idx < 0:
        if idx < -len(container):
            raise _invalid_index(idx)
        idx += len(container)
    if idx >= len(container):
        raise _invalid_index(idx)
    return container[idx]


def _set(container, key: str, value) -> None:
    """container.set (replace only: an array's index was got first)."""
    if isinstance(container, dict):
        container[key] = value
        return
    idx = atoi(key)
    if idx < 0:
        if idx < -len(container):
            raise _invalid_index(idx)
        idx += len(container)
    container[idx] = value


def _add(container, key: str, value) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    try:
        idx = atoi(key)
    except PatchError as exc:
        raise PatchError(f"value was not a proper array index: '{key}': {exc}")
    size = len(container) + 1
    if idx >= size:
        raise _invalid_index(idx)
    if idx < 0:
        if idx < -size:
            raise _invalid_index(idx)
        idx += size
    container.insert(idx, value)


def _remove(container, key: str) -> None:
    if isinstance(container, dict):
        if key not in container:
            raise _wrap(f"Unable to remove nonexistent key: {key}", MISSING)
        del container[key]
        return
    idx = atoi(key)
    if idx >= len(container):
        raise _invalid_index(idx)
    if idx < 0:
        if idx < -len(container):
            raise _invalid_index(idx)
        idx += len(container)
    del container[idx]


def _find(doc, path: str):
    """findObject: (the container the path's last segment is in, that segment decoded), or
    (None, "") when the walk does not get there."""
    split = path.split("/")
    if len(split) < 2:
        return None, ""
    node = doc
    for part in split[1:-1]:
        try:
            nxt = _get(node, decode_key(part))
        except PatchError:
            return None, ""
        if not isinstance(nxt, (dict, list)):     # missing, null, or a value intoDoc cannot read
            return None, ""
        node = nxt
    return node, decode_key(split[-1])


# -- the fields of an operation ------------------------------------------------------------------

def _kind(op: dict) -> str:
    kind = op.get("op")
    return kind if isinstance(kind, str) else "unknown"


def _string_field(op: dict, field: str, missing: str) -> str:
    """Operation.Path / Operation.From: the field as a string, or its error."""
    value = op.get(field)
    if value is None:
        raise _wrap(missing, MISSING)
    if not isinstance(value, str):
        raise PatchError(f"json: cannot unmarshal {value_type(value)} into Go value of type string")
    return value


def _path(op: dict) -> str:
    return _string_field(op, "path", "operation missing path field")


def _from(op: dict) -> str:
    return _string_field(op, "from", "operation, missing from field")


def _value(op: dict):
    return json_copy(op["value"]) if "value" in op else _ABSENT


def _null(value):
    return None if value is _ABSENT else value


def _equal(a, b) -> bool:
    """lazyNode.equal: objects and arrays structurally, other values by their JSON text."""
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() and \
            all((a[k] is None) == (b[k] is None) and (a[k] is None or _equal(a[k], b[k])) for k in a)
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and \
            all(_equal(x, y) for x, y in zip(a, b))
    return json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


# -- the operations (Patch.add, remove, replace, move, test, copy) ------------------------------

def _op_add(doc, op):
    try:
        path = _path(op)
    except PatchError:
        raise _wrap("add operation failed to decode path", MISSING)
    container, key = _find(doc, path)
    if container is None:
        raise _wrap(f'add operation does not apply: doc is missing path: "{path}"', MISSING)
    try:
        _add(container, key, _null(_value(op)))
    except PatchError as exc:
        raise PatchError(f"error in add for path: '{path}': {exc}")
    return doc


def _op_remove(doc, op):
    try:
        path = _path(op)
    except PatchError:
        raise _wrap("remove operation failed to decode path", MISSING)
    container, key = _find(doc, path)
    if container is None:
        raise _wrap(f'remove operation does not apply: doc is missing path: "{path}"', MISSING)
    try:
        _remove(container, key)
    except PatchError as exc:
        raise PatchError(f"error in remove for path: '{path}': {exc}")
    return doc


def _op_replace(doc, op):
    try:
        path = _path(op)
    except PatchError as exc:
        raise PatchError(f"replace operation failed to decode path: {exc}")
    value = _value(op)
    if path == "":
        # a value that is neither an object nor an array: Wrapf of a nil error is nil, nothing happens
        return value if isinstance(value, (dict, list)) else doc
    container, key = _find(doc, path)
    if container is None:
        raise _wrap(f"replace operation does not apply: doc is missing path: {path}", MISSING)
    try:
        _get(container, key)
    except PatchError:
        raise _wrap(f"replace operation does not apply: doc is missing key: {path}", MISSING)
    try:
        _set(container, key, _null(value))
    except PatchError as exc:
        raise PatchError(f"error in remove for path: '{path}': {exc}")
    return doc


def _op_move(doc, op):
    try:
        source = _from(op)
    except PatchError as exc:
        raise PatchError(f"move operation failed to decode from: {exc}")
    container, key = _find(doc, source)
    if container is None:
        raise _wrap(f"move operation does not apply: doc is missing from path: {source}", MISSING)
    try:
        value = _get(container, key)
        _remove(container, key)
    except PatchError as exc:
        raise PatchError(f"error in move for path: '{key}': {exc}")
    try:
        path = _path(op)
    except PatchError as exc:
        raise PatchError(f"move operation failed to decode path: {exc}")
    container, key = _find(doc, path)
    if container is None:
        raise _wrap(f"move operation does not apply: doc is missing destination path: {path}", MISSING)
    try:
        _add(container, key, value)
    except PatchError as exc:
        raise PatchError(f"error in move for path: '{path}': {exc}")
    return doc


def _op_test(doc, op):
    try:
        path = _path(op)
    except PatchError as exc:
        raise PatchError(f"test operation failed to decode path: {exc}")
    value = _value(op)
    if path == "":
        if value is not _ABSENT and _equal(doc, value):
            return doc
        raise _wrap(f"testing value {path} failed", TEST_FAILED)
    container, key = _find(doc, path)
    if container is None:
        raise _wrap(f"test operation does not apply: is missing path: {path}", MISSING)
    try:
        got = _get(container, key)
    except PatchError as exc:
        raise PatchError(f"error in test for path: '{path}': {exc}")
    if got is None:
        if value is None or value is _ABSENT:
            return doc
        raise _wrap(f"testing value {path} failed", TEST_FAILED)
    if value is _ABSENT or not _equal(got, value):
        raise _wrap(f"testing value {path} failed", TEST_FAILED)
    return doc


def _op_copy(doc, op):
    try:
        source = _from(op)
    except PatchError as exc:
        raise PatchError(f"copy operation failed to decode from: {exc}")
    container, key = _find(doc, source)
    if container is None:
        raise _wrap(f"copy operation does not apply: doc is missing from path: {source}", MISSING)
    try:
        value = json_copy(_get(container, key))
    except PatchError as exc:
        raise PatchError(f"error in copy for from: '{source}': {exc}")
    try:
        path = _path(op)
    except PatchError:
        raise _wrap("copy operation failed to decode path", MISSING)
    container, key = _find(doc, path)
    if container is None:
        raise _wrap(f"copy operation does not apply: doc is missing destination path: {path}", MISSING)
    try:
        _add(container, key, value)
    except PatchError as exc:
        raise PatchError(f"error while adding value during copy: {exc}")
    return doc


OPERATIONS = {"add": _op_add, "remove": _op_remove, "replace": _op_replace, "move": _op_move, "test": _op_test,
              "copy": _op_copy}


def apply(doc, ops: list) -> object:
    """Patch.Apply: the patched copy of `doc`, or PatchError with the library's message. An
    operation that is null is one without fields."""
    doc = json_copy(doc)
    for op in ops:
        op = op if isinstance(op, dict) else {}
        kind = _kind(op)
        if kind not in OPERATIONS:
            raise PatchError(f"Unexpected kind: {kind}")
        doc = OPERATIONS[kind](doc, op)
    return doc
