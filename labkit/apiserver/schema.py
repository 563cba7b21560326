"""The shape of an object as server-side apply and strategic merge patches see it: structs (named
fields), maps, lists — atomic, sets, or associative lists keyed by fields — and scalars, for
the built-in kinds from the `kubernetes` package's models with listtypes.py's markers, for custom
resources from their CRD's structural schema (x-kubernetes-list-type, -list-map-keys,
-map-type, -preserve-unknown-fields). Values no schema describes are "deduced": maps are
granular, lists and scalars atomic, as structured-merge-diff deduces them."""

from __future__ import annotations

import functools

from labkit.apiserver import listtypes, models


class Node:
    """One type. kind: struct | map | list | scalar | deduced."""

    def __init__(self, kind: str, atomic: bool = False, list_type: str = "atomic", keys: tuple = (),
                 patch_key: str | None = None):
        self.kind = kind
        self.atomic = atomic
        self.list_type = list_type          # atomic | set | map
        self.keys = keys                    # the keys of an associative list
        self.patch_key = patch_key          # strategic merge: the merge key, "" for a set, None: replace
        self._elem: Node | None = None

    def zero(self, name: str):
        """What the field holds in Go's zero value of this struct when unset (None: nothing)."""
        return None

    @property
    def is_struct(self) -> bool:
        return self.kind == "struct"

    def field(self, name: str) -> "Node":
        return self.elem

    @property
    def elem(self) -> "Node":
        return self._elem if self._elem is not None else DEDUCED

    def is_leaf(self, value) -> bool:
        """Whether the value is owned as a whole: a scalar, or an atomic list, map or struct."""
        if self.kind == "scalar" or self.atomic:
            return True
        if self.kind == "list":
            return self.list_type == "atomic" or not isinstance(value, list)
        if self.kind == "deduced":
            return not isinstance(value, dict)
        return not isinstance(value, dict)


DEDUCED = Node("deduced")
SCALAR = Node("scalar")


class ModelNode(Node):
    """A struct of the `kubernetes` package's models."""

    def __init__(self, model: models.Model):
        super().__init__("struct", atomic=model.name in listtypes.ATOMIC_STRUCTS)
        self.model = model
        self._fields: dict[str, Node] = {}

    def field(self, name: str) -> Node:
        node = self._fields.get(name)
        if node is None:
            f = self.model.fields.get(name)
            node = self._fields[name] = DEDUCED if f is None else _field_node(self.model.name, f)
        return node

    def zero(self, name: str):
        if (self.model.name, name) not in listtypes.ALWAYS_PRESENT:
            return None
        return [] if self.field(name).kind == "list" else {}


def _field_node(model: str, f: models.Field) -> Node:
    item = _type_node(f.item)
    if f.container == "list":
        list_type, keys, patch_key = listtypes.LISTS.get((model, f.name), ("atomic", (), None))
        node = Node("list", list_type=list_type, keys=keys, patch_key=patch_key)
        node._elem = item
        return node
    if f.container == "dict":
        node = Node("map", atomic=(model, f.name) in listtypes.ATOMIC_MAPS)
        node._elem = item
        return node
    return item


@functools.lru_cache(maxsize=None)
def _type_node(type_: str) -> Node:
    if type_ in ("str", "int", "bool", "float", "datetime"):
        return SCALAR
    if type_ == "object":
        return DEDUCED
    m = models.model(type_)
    return ModelNode(m) if m is not None else DEDUCED


def for_model(name: str | None) -> Node:
    """The root node of a built-in kind (deduced when there is no model)."""
    return _type_node(name) if name else DEDUCED


class SchemaNode(Node):
    """A node of a CRD's structural schema (apiextensions.k8s.io/v1 JSONSchemaProps)."""

    def __init__(self, schema: dict):
        schema = schema or {}
        if isinstance(self, CustomResourceNode):
            schema = dict(schema, type="object", properties=schema.get("properties") or {})
        kind = schema.get("type")
        if schema.get("x-kubernetes-int-or-string") or kind in ("string", "integer", "number", "boolean"):
            super().__init__("scalar")
        elif kind == "array":
            list_type = schema.get("x-kubernetes-list-type", "atomic")
            keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
            super().__init__("list", list_type=list_type, keys=keys)
            self._elem = SchemaNode(schema.get("items") or {})
        elif kind == "object" and (schema.get("properties") or not schema.get("additionalProperties")):
            super().__init__("struct" if schema.get("properties") else "deduced",
                             atomic=schema.get("x-kubernetes-map-type") == "atomic")
        elif kind == "object":
            super().__init__("map", atomic=schema.get("x-kubernetes-map-type") == "atomic")
            extra = schema.get("additionalProperties")
            self._elem = SchemaNode(extra) if isinstance(extra, dict) else DEDUCED
        else:
            super().__init__("deduced")
        self.schema = schema
        self._fields: dict[str, Node] = {}

    def field(self, name: str) -> Node:
        if self.kind != "struct":
            return super().field(name)
        node = self._fields.get(name)
        if node is None:
            prop = (self.schema.get("properties") or {}).get(name)
            node = self._fields[name] = SchemaNode(prop) if prop is not None else DEDUCED
        return node


class CustomResourceNode(SchemaNode):
    """The root of a custom resource: its schema, with the typed ObjectMeta as metadata."""

    def field(self, name: str) -> Node:
        if name == "metadata":
            return for_model("V1ObjectMeta")
        return super().field(name)

    def is_leaf(self, value) -> bool:
        return False
