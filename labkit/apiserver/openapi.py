"""The OpenAPI documents: /openapi/v3 (one document per group-version, what `kubectl explain` and
kubectl's client-side apply read) and /openapi/v2 (one document, as JSON and as gnostic
protobuf, what kubectl up to 1.26 reads before create/apply and for explain).

Nothing here is written by hand. The schema of a built-in kind is derived from:
- the `kubernetes` package's models (models.py): fields, their types, which are required, and
  upstream's description of each field (but those of struct types);
- gotypes.py (generated from the Go types): each type's definition name and description, the
  descriptions of fields of struct types, the Go type of fields the models flatten (int32/int64, Quantity, IntOrString, Time, ...), enum
  values and patch strategies;
- listtypes.py (generated): list types, map keys, patch merge keys, atomic maps and structs.
A custom resource's schema is its CRD version's structural schema with apiVersion, kind and
metadata added, as apiextensions-apiserver's openapi builder does.

Shapes follow kube-openapi's builders: in v3 a field of a struct type is
`{"allOf": [{"$ref": ...}], "description": ...}` (`default: {}` for value structs); in v2 it is
`{"$ref": ..., "description": ...}`.
"""

from __future__ import annotations

import hashlib
import json
import threading

from labkit.apiserver import discovery, gotypes, listtypes, models
from labkit.apiserver.protobuf import length_delimited as field, varint_field
from labkit.apiserver.resources import Catalog, ResourceType
from labkit.apiserver.version import GIT_VERSION
from labkit.jsondata import json_copy

# the OpenAPI format of Go's plain scalar types (kube-openapi's openapi.go)
_FORMATS = {"int32": "int32", "int64": "int64", "float64": "double", "[]byte": "byte"}
PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json")
_PARAMS = [
    {"name": "dryRun", "in": "query", "description": "When present, indicates that modifications should not be "
     "persisted.", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "fieldManager", "in": "query", "description": "fieldManager is a name associated with the actor or "
     "entity that is making these changes.", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "fieldValidation", "in": "query", "description": "fieldValidation instructs the server on how to "
     "handle objects in the request containing unknown or duplicate fields.",
     "schema": {"type": "string", "uniqueItems": True}},
]


class Schemas:
    """The definitions a document needs, built on demand from the models."""

    def __init__(self, v3: bool):
        self.v3 = v3
        self.definitions: dict[str, dict] = {}

    def ref(self, name: str) -> str:
        return f"#/components/schemas/{name}" if self.v3 else f"#/definitions/{name}"

    def _wrap(self, name: str, extra: dict) -> dict:
        """A reference to a definition with sibling keywords (description, default)."""
        if self.v3:
            return {"allOf": [{"$ref": self.ref(name)}], **extra} if extra else {"$ref": self.ref(name)}
        return {"$ref": self.ref(name), **extra}

    def model(self, model_name: str) -> str:
        """The definition name of a model, its schema (and those it refers to) added."""
        name, description = gotypes.DEFINITIONS.get(model_name, (model_name, ""))
        if name in self.definitions:
            return name
        m = models.model(model_name)
        self.definitions[name] = schema = {}
        if description:
            schema["description"] = description
        schema["type"] = "object"
        required = [f.name for f in m.fields.values() if f.required]
        if required:
            schema["required"] = required
        schema["properties"] = {field: self.field(m, f) for field, f in sorted(m.fields.items())}
        if model_name in listtypes.ATOMIC_STRUCTS:
            schema["x-kubernetes-map-type"] = "atomic"
        return name

    def scalar(self, go_type: str) -> str:
        name, description, methods = gotypes.SCALAR_DEFINITIONS[go_type]
        if name not in self.definitions:
            schema = {"description": description}
            types = methods.get("types")
            if self.v3 and methods.get("oneOf"):
                schema["oneOf"] = [{"type": t} for t in methods["oneOf"]]
            elif types:
                schema["type"] = types[0]
            elif types is None:
                schema["type"] = "object"        # a struct without an OpenAPI type of its own
            if methods.get("format"):
                schema["format"] = methods["format"]
            self.definitions[name] = schema
        return name

    def _value(self, type_: str, scalar: str | None, key: tuple[str, str], top: bool) -> dict:
        """The schema of one value of a field (the field itself, or an item of its list or map)."""
        if scalar in gotypes.SCALAR_DEFINITIONS:
            return self._wrap(self.scalar(scalar), {})
        inner = models.model(type_)
        if inner is not None:
            value_struct = top and key in listtypes.ALWAYS_PRESENT or not top
            return self._wrap(self.model(type_), {"default": {}} if value_struct else {})
        schema = {"str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
                  "bool": {"type": "boolean"}, "datetime": {"type": "string", "format": "date-time"}}.get(
            type_, {"type": "object"})
        if scalar in _FORMATS:
            schema["format"] = _FORMATS[scalar]
        elif type_ == "int":
            schema["format"] = "int32"
        if key in gotypes.ENUMS:
            schema["enum"] = list(gotypes.ENUMS[key])
        return schema

    def field(self, m: models.Model, f: models.Field) -> dict:
        key = (m.name, f.name)
        scalar = gotypes.SCALARS.get(key)
        description = describe(m.name, f.name)
        if f.container == "list":
            schema = {"type": "array", "items": self._value(f.item, scalar, key, False)}
        elif f.container == "dict":
            schema = {"type": "object", "additionalProperties": self._value(f.item, scalar, key, False)}
        else:
            schema = self._value(f.item, scalar, key, True)
        if description:
            if self.v3 and "$ref" in schema:
                schema = {"allOf": [{"$ref": schema.pop("$ref")}], **schema}
            schema["description"] = description
        lists = listtypes.LISTS.get(key)
        if lists is not None:
            kind, keys, merge_key = lists
            schema["x-kubernetes-list-type"] = kind
            if kind == "map":
                schema["x-kubernetes-list-map-keys"] = list(keys)
            if merge_key:
                schema["x-kubernetes-patch-merge-key"] = merge_key
        elif key in gotypes.ATOMIC_LISTS:
            schema["x-kubernetes-list-type"] = "atomic"
        if key in gotypes.PATCH_STRATEGIES:
            schema["x-kubernetes-patch-strategy"] = gotypes.PATCH_STRATEGIES[key]
        if key in listtypes.ATOMIC_MAPS:
            schema["x-kubernetes-map-type"] = "atomic"
        return schema

    def kind(self, group: str, version: str, kind: str, model_name: str) -> str:
        name = self.model(model_name)
        gvks = self.definitions[name].setdefault("x-kubernetes-group-version-kind", [])
        gvk = {"group": group, "kind": kind, "version": version}
        if gvk not in gvks:
            gvks.append(gvk)
        return name

    def custom_resource(self, rt: ResourceType) -> str:
        """apiextensions-apiserver controller/openapi/builder: the version's schema with the
        standard apiVersion, kind and metadata fields, and the List kind."""
        name = f"{_reverse_domain(rt.group)}.{rt.version}.{rt.kind}"
        typemeta = {f: describe("V1Deployment", f) for f in ("apiVersion", "kind", "metadata")}
        schema = json_copy(rt.strategy.schema)
        if not self.v3:
            schema = _to_v2(schema)
        properties = schema.setdefault("properties", {})
        properties["apiVersion"] = {"type": "string", "description": typemeta["apiVersion"]}
        properties["kind"] = {"type": "string", "description": typemeta["kind"]}
        properties["metadata"] = self._wrap(self.model("V1ObjectMeta"), {"description": typemeta["metadata"]})
        schema.setdefault("type", "object")
        schema["x-kubernetes-group-version-kind"] = [{"group": rt.group, "kind": rt.kind, "version": rt.version}]
        self.definitions[name] = schema
        list_model = {f: describe("V1DeploymentList", f) for f in ("apiVersion", "kind", "metadata")}
        self.definitions[name + "List"] = {
            "description": f"{rt.kind}List is a list of {rt.kind}", "type": "object", "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string", "description": list_model["apiVersion"]},
                "items": {"type": "array", "description": f"List of {rt.resource}. More info: "
                          "https://git.k8s.io/community/contributors/devel/api-conventions.md",
                          "items": {"$ref": self.ref(name)}},
                "kind": {"type": "string", "description": list_model["kind"]},
                "metadata": self._wrap(self.model("V1ListMeta"), {"description": list_model["metadata"]})},
            "x-kubernetes-group-version-kind": [{"group": rt.group, "kind": rt.kind + "List",
                                                 "version": rt.version}]}
        return name


def describe(model_name: str, field: str) -> str:
    """Upstream's description of a field: the model's, or for fields of struct types, gotypes'."""
    return models.model(model_name).descriptions().get(field) or gotypes.FIELD_DESCRIPTIONS.get(
        (model_name, field), "")


def _reverse_domain(group: str) -> str:
    return ".".join(reversed(group.split(".")))


def _to_v2(schema):
    """What a structural schema loses in OpenAPI v2 (apiextensions' ToOpenAPIV2: no nullable, no
    oneOf/anyOf/not, no x-kubernetes-int-or-string types)."""
    if isinstance(schema, list):
        return [_to_v2(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("nullable", "oneOf", "anyOf", "not", "x-kubernetes-validations"):
            continue
        if key in ("properties", "patternProperties"):
            out[key] = {k: _to_v2(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "allOf"):
            out[key] = _to_v2(value)
        else:
            out[key] = value
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    return out


def _kind_schema(schemas: Schemas, rt: ResourceType) -> tuple[str, str | None]:
    """The definition of a kind and of its List kind (None for the access reviews)."""
    if not rt.strategy.builtin:
        name = schemas.custom_resource(rt)
        return name, name + "List"
    name = schemas.kind(rt.group, rt.version, rt.kind, rt.model)
    list_model = models.model_name(rt.group, rt.version, rt.list_kind)
    list_name = schemas.kind(rt.group, rt.version, rt.list_kind, list_model) if list_model else None
    return name, list_name


# -- OpenAPI v3 ------------------------------------------------------------------------------

def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


class Documents:
    """The served documents, built once per state of the catalog (custom resources come and go)."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._lock = threading.RLock()      # a build may use another cached document
        self._cache: dict = {}
        self._generation = -1

    def _cached(self, key, build):
        with self._lock:
            if self._generation != self.catalog.generation:
                self._cache, self._generation = {}, self.catalog.generation
            if key not in self._cache:
                self._cache[key] = build()
            return self._cache[key]

    def root(self) -> dict:
        """/openapi/v3: each group-version's document, with the hash that lets clients cache it."""
        paths = {}
        for group, versions in self.catalog.groups():
            for version in versions:
                key = _gv_path(group, version)
                paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={self.hash(group, version)}"}
        return {"paths": paths}

    def hash(self, group: str, version: str) -> str:
        return self._cached(("hash", group, version), lambda: hashlib.sha512(
            self.v3_bytes(group, version)).hexdigest()[:128].upper())

    def v3_bytes(self, group: str, version: str) -> bytes:
        return self._cached(("v3", group, version), lambda: json.dumps(
            self._v3(group, version), separators=(",", ":")).encode())

    def _v3(self, group: str, version: str) -> dict:
        schemas = Schemas(v3=True)
        paths = {}
        for rt in sorted(self.catalog.in_group_version(group, version), key=lambda t: t.resource):
            paths.update(_paths(schemas, rt))
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": f"{GIT_VERSION}-labkit"},
                "paths": paths, "components": {"schemas": dict(sorted(schemas.definitions.items()))}}

    # -- v2 --------------------------------------------------------------------------------------
    def v2(self) -> dict:
        return self._cached("v2", self._v2)

    def v2_protobuf(self) -> bytes:
        return self._cached("v2pb", lambda: v2_protobuf(self.v2()))

    def _v2(self) -> dict:
        schemas = Schemas(v3=False)
        paths = {}
        for rt in sorted(self.catalog.all(), key=lambda t: (t.group, t.version, t.resource)):
            paths.update(_paths(schemas, rt))
        return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": f"{GIT_VERSION}-labkit"},
                "paths": paths, "definitions": dict(sorted(schemas.definitions.items()))}


def _paths(schemas: Schemas, rt: ResourceType) -> dict:
    """The operations on one resource (and its status and scale subresources)."""
    gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
    name, list_name = _kind_schema(schemas, rt)
    prefix = f"/{_gv_path(rt.group, rt.version)}"
    collection = f"{prefix}/namespaces/{{namespace}}/{rt.resource}" if rt.namespaced else f"{prefix}/{rt.resource}"
    tag = f"{(rt.group.split('.')[0] if rt.group else 'core')}_{rt.version}"
    patch_types = [t for t in PATCH_TYPES if rt.strategy.builtin or "strategic" not in t]

    def operation(action: str, op_id: str, response: str, body: str | None = None, patch: bool = False,
                  kind: dict = gvk) -> dict:
        op = {"tags": [tag], "operationId": op_id}
        if schemas.v3:
            if patch:
                op["requestBody"] = {"content": {t: {"schema": {"type": "object"}} for t in patch_types},
                                     "required": True}
            elif body:
                op["requestBody"] = {"content": {"*/*": {"schema": {"$ref": schemas.ref(body)}}}, "required": True}
            op["responses"] = {"200": {"description": "OK", "content": {"application/json": {
                "schema": {"$ref": schemas.ref(response)}}}}}
            op["parameters"] = list(_PARAMS) if body or patch else []
        else:
            if patch:
                op["consumes"] = patch_types
            op["produces"] = ["application/json"]
            params = [{"name": "body", "in": "body", "required": True,
                       "schema": {"type": "object"} if patch else {"$ref": schemas.ref(body)}}] if body or patch else []
            op["parameters"] = params + [{k: v for k, v in p.items() if k != "schema"} | {"type": "string"}
                                         for p in (_PARAMS if body or patch else [])]
            op["responses"] = {"200": {"description": "OK", "schema": {"$ref": schemas.ref(response)}}}
        op["x-kubernetes-action"] = action
        op["x-kubernetes-group-version-kind"] = kind
        return op

    verbs = set(rt.verbs)
    paths: dict[str, dict] = {}
    if rt.strategy.virtual:
        paths[collection] = {"post": operation("post", f"create{rt.kind}", name, name)}
        return paths
    item = f"{collection}/{{name}}"
    paths[collection] = {"get": operation("list", f"list{rt.kind}", list_name or name),
                         "post": operation("post", f"create{rt.kind}", name, name)}
    paths[item] = {"get": operation("get", f"read{rt.kind}", name),
                   "put": operation("put", f"replace{rt.kind}", name, name),
                   "patch": operation("patch", f"patch{rt.kind}", name, patch=True),
                   "delete": operation("delete", f"delete{rt.kind}", name)}
    if "deletecollection" in verbs:
        paths[collection]["delete"] = operation("deletecollection", f"deleteCollection{rt.kind}", name)
    for sub in rt.strategy.subresources:
        title = sub.name.capitalize()
        if sub.verbs == ["create"]:       # pods/binding, serviceaccounts/token: POST of a kind of their own
            group, version, kind = discovery.subresource_kind(rt, sub.name)
            target = schemas.kind(group, version, kind, models.model_name(group, version, kind))
            paths[f"{item}/{sub.name}"] = {"post": operation(
                "post", f"create{rt.kind}{title}", target, target,
                kind={"group": group, "kind": kind, "version": version})}
            continue
        if sub.name == "scale":
            scale = {"group": "autoscaling", "kind": "Scale", "version": "v1"}
            target = schemas.kind("autoscaling", "v1", "Scale", "V1Scale")
        else:
            scale, target = gvk, name
        paths[f"{item}/{sub.name}"] = {
            "get": operation("get", f"read{rt.kind}{title}", target, kind=scale),
            "put": operation("put", f"replace{rt.kind}{title}", target, target, kind=scale),
            "patch": operation("patch", f"patch{rt.kind}{title}", target, patch=True, kind=scale)}
    return paths


# -- OpenAPI v2 as gnostic protobuf --------------------------------------------------------------
# kubectl up to 1.26 (Debian 12 ships 1.20) asks for /openapi/v2 as a protobuf-encoded gnostic
# openapi_v2.Document (github.com/google/gnostic-models openapiv2/OpenAPIv2.proto).
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"      # what clients accept
OPENAPI_V2_PROTOBUF_ANSWER = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"  # kube-openapi's answer


def _any(value) -> bytes:
    """openapi_v2.Any: the value as YAML (JSON is YAML), field 2."""
    return field(2, json.dumps(value, separators=(",", ":")).encode())


def _named(name: str, value: bytes) -> bytes:
    return field(1, name.encode()) + field(2, value)


def _extensions(obj: dict, number: int) -> bytes:
    return b"".join(field(number, _named(k, _any(v))) for k, v in obj.items() if k.startswith("x-"))


def _schema(schema: dict) -> bytes:
    """openapi_v2.Schema."""
    out = b""
    if "$ref" in schema:
        out += field(1, schema["$ref"].encode())
    if "format" in schema:
        out += field(2, schema["format"].encode())
    if "description" in schema:
        out += field(4, schema["description"].encode())
    if "default" in schema:
        out += field(5, _any(schema["default"]))
    for name in schema.get("required", []):
        out += field(19, name.encode())
    for value in schema.get("enum", []):
        out += field(20, _any(value))
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        out += field(21, field(1, _schema(additional)))
    elif isinstance(additional, bool):
        out += field(21, varint_field(2, int(additional)))
    if "type" in schema:
        out += field(22, field(1, schema["type"].encode()))
    if "items" in schema and isinstance(schema["items"], dict):
        out += field(23, field(1, _schema(schema["items"])))
    for sub in schema.get("allOf", []):
        out += field(24, _schema(sub))
    if "properties" in schema:
        out += field(25, b"".join(field(1, _named(k, _schema(v))) for k, v in schema["properties"].items()))
    return out + _extensions(schema, 31)


def _operation(op: dict) -> bytes:
    """openapi_v2.Operation (parameters omitted: kubectl does not read them)."""
    out = b"".join(field(1, t.encode()) for t in op.get("tags", []))
    out += field(5, op["operationId"].encode())
    out += b"".join(field(6, t.encode()) for t in op.get("produces", []))
    out += b"".join(field(7, t.encode()) for t in op.get("consumes", []))
    responses = b""
    for code, response in op.get("responses", {}).items():
        body = field(1, response["description"].encode())
        if "schema" in response:
            body += field(2, field(1, _schema(response["schema"])))
        responses += field(1, _named(code, field(1, body)))
    out += field(9, responses)
    return out + _extensions(op, 13)


def v2_protobuf(doc: dict) -> bytes:
    """openapi_v2.Document: swagger = 1, info = 2 (title = 1, version = 2), paths = 8 (path = 2:
    name, PathItem: get = 2, put = 3, post = 4, delete = 5, patch = 8), definitions = 9."""
    info = field(1, doc["info"]["title"].encode()) + field(2, doc["info"]["version"].encode())
    slots = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}
    paths = b""
    for path, item in doc["paths"].items():
        body = b"".join(field(slots[method], _operation(op)) for method, op in item.items())
        paths += field(2, _named(path, body))
    definitions = b"".join(field(1, _named(name, _schema(schema))) for name, schema in doc["definitions"].items())
    return field(1, doc["swagger"].encode()) + field(2, info) + field(8, paths) + field(9, definitions)
