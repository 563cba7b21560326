"""The three patch formats of PATCH requests.

- JSON patch (RFC 6902, `application/json-patch+json`): labkit.apiserver.jsonpatch, as
  evanphx/json-patch v4 applies it;
- JSON merge patch (RFC 7386, `application/merge-patch+json`): lists are replaced, null deletes;
- strategic merge patch (`application/strategic-merge-patch+json`, built-in kinds only), following
  k8s.io/apimachinery/pkg/util/strategicpatch: lists with a patch strategy "merge" are merged —
  `metadata.finalizers` as a set of strings, `metadata.ownerReferences` by `uid`, containers by
  `name`, ... — and the directives `$patch` (replace/delete/merge), `$deleteFromPrimitiveList/<f>`,
  `$setElementOrder/<f>` and `$retainKeys` are honoured. The merge keys are the `patchMergeKey`
  tags of k8s.io/api (listtypes.py), found along the kind's shape (schema.py).
"""

from __future__ import annotations

import json

from labkit.apiserver import jsonpatch
from labkit.apiserver.errors import ApiError, bad_request, invalid_request
from labkit.apiserver.jsonpatch import PatchError
from labkit.apiserver.request import check_depth
from labkit.gojson import value_type
from labkit.jsondata import json_copy

MAX_JSON_PATCH_OPERATIONS = 10000


def decode_json_patch(body: bytes) -> list[dict]:
    try:
        ops = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"error decoding patch: {exc}")
    problem = jsonpatch.check_operations(ops)
    if problem:
        raise bad_request(problem)
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise ApiError(413, "RequestEntityTooLarge",
                       f"Request entity too large: The allowed maximum operations in a JSON patch is "
                       f"{MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}")
    return ops


def apply_json_patch(doc: dict, ops: list[dict]) -> dict:
    """evanphx/json-patch v4's Patch.Apply (labkit.apiserver.jsonpatch)."""
    return jsonpatch.apply(doc, ops)


# -- JSON merge patch ------------------------------------------------------------------------

def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return json_copy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# -- strategic merge patch -------------------------------------------------------------------

_DELETE = object()   # a map removed by {"$patch": "delete"}


def strategic_merge_patch(original: dict, patch: dict, node) -> dict:
    """Apply a strategic merge patch along the kind's shape `node` (schema.py): lists whose patch
    strategy is merge are merged by their patchMergeKey (or as sets of values), the others
    replaced."""
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object")
    result = _merge_map(json_copy(original), patch, node)
    return {} if result is _DELETE else result


def _merge_map(original, patch: dict, node):
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: json_copy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return _DELETE
    if directive not in (None, "merge"):
        raise PatchError(f"Unknown patch type: {directive} in map: {patch}")
    result = original if isinstance(original, dict) else {}
    orders = {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if not isinstance(value, list):
                raise PatchError(f"{key} must be a list")
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if key.startswith("$setElementOrder/"):
            if not isinstance(value, list):
                raise PatchError(f"{key} must be a list")
            orders[key.split("/", 1)[1]] = value
            continue
        child = node.field(key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(result.get(key), value, child)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and child.kind == "list" and child.patch_key is not None:
            result[key] = _merge_list(result.get(key), value, child.patch_key or None, key, child.elem)
        else:
            result[key] = json_copy(value)
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _apply_order(result[field], order, node.field(field).patch_key or None)
    if isinstance(retain, list):
        for key in list(result):
            if key not in retain:
                del result[key]
    return result


def _merge_list(original, patch: list, merge_key: str | None, path: str, item_node) -> list:
    original = list(original) if isinstance(original, list) else []
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [json_copy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    if merge_key is None:
        result = original
        for item in patch:
            if isinstance(item, dict):
                raise PatchError(f"cannot merge a map into the list of primitives {path}")
            if item not in result:
                result.append(item)
        return result
    result = original
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"cannot merge a primitive into the list of maps {path}")
        if merge_key not in item:
            raise PatchError(f"map: {item} does not contain declared merge key: {merge_key}")
        key = item[merge_key]
        if item.get("$patch") == "delete":
            result = [e for e in result if not (isinstance(e, dict) and e.get(merge_key) == key)]
            continue
        for i, existing in enumerate(result):
            if isinstance(existing, dict) and existing.get(merge_key) == key:
                merged = _merge_map(existing, item, item_node)
                if merged is _DELETE:
                    result.pop(i)
                else:
                    result[i] = merged
                break
        else:
            result.append(json_copy({k: v for k, v in item.items() if k != "$patch"}))
    return result


def _apply_order(items: list, order: list, merge_key: str | None) -> list:
    def key_of(item):
        if merge_key and isinstance(item, dict):
            return item.get(merge_key)
        return item if not isinstance(item, dict) else None

    wanted = [key_of(o) if isinstance(o, dict) else o for o in order]
    ordered = [i for w in wanted for i in items if key_of(i) == w]
    rest = [i for i in items if key_of(i) not in wanted]
    return ordered + rest


# -- entry point -----------------------------------------------------------------------------

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def decode_patch_body(patch_type: str, body: bytes):
    try:
        return check_depth(_decode_patch_body(patch_type, body))
    except RecursionError:
        raise bad_request("error decoding patch: nesting too deep")


def _decode_patch_body(patch_type: str, body: bytes):
    if patch_type == JSON_PATCH:
        return decode_json_patch(body)
    if patch_type == APPLY_PATCH:
        import yaml
        try:
            doc = yaml.safe_load(body)
        except yaml.YAMLError as exc:
            raise bad_request(f"error decoding YAML: {exc}")
    else:
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise bad_request(f"error decoding patch: {exc}")
    if not isinstance(doc, dict):
        # (a JSON null decodes into a Go map without an error; labkit refuses it with the same words)
        shown = "" if doc is None else f"{value_type(doc)} "
        raise bad_request(f"error decoding patch: json: cannot unmarshal {shown}into Go value of type "
                          "map[string]interface {}")
    return doc


def apply_patch(patch_type: str, current: dict, patch, node=None) -> dict:
    """Apply a decoded patch (a strategic one along the kind's shape `node`); a patch that does
    not apply raises ApiError 422 as upstream does."""
    try:
        if patch_type == JSON_PATCH:
            result = apply_json_patch(current, patch)
        elif patch_type == MERGE_PATCH:
            result = merge_patch(current, patch)
        else:
            from labkit.apiserver import schema
            result = strategic_merge_patch(current, patch, node if node is not None else schema.DEDUCED)
    except PatchError as exc:
        if patch_type == JSON_PATCH:
            # NewGenericServerResponse(422, ...) keeps the json-patch library's error only for
            # unexpected responses: the answer carries no causes (apimachinery v0.34 errors.go)
            raise invalid_request()
        raise invalid_request(str(exc))
    except RecursionError:
        raise bad_request("error decoding patch: nesting too deep")
    if not isinstance(result, dict):
        raise invalid_request()
    return result


def go_format(value) -> str:
    """Go's fmt %+v of a decoded JSON value (how upstream shows a strategic merge patch in errors)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_format(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_format(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
