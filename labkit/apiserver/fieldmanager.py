"""Field management and server-side apply, reconstructed from sigs.k8s.io/structured-merge-diff v6
(typed/tofieldset.go, compare.go, merge.go, remove.go, merge/update.go) and kube-apiserver's
field manager (k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager, managedfields).

Every write records in `metadata.managedFields` which manager owns which fields:

- an Update (create, update, every patch but apply, a status or scale update) gives its manager
  the fields it added or changed and takes them from every other manager; fields it removed leave
  everybody's sets;
- an Apply makes the applied configuration's fields the manager's set, merges the configuration
  into the object (associative lists by their keys, sets by value, atomic values as a whole),
  removes the fields the manager applied last time and nobody owns any more, and refuses (409)
  to change a field another manager owns unless `force` is set — then the field changes hands.

Field sets are kept in their wire form, fieldsV1 (`{"f:spec": {"f:replicas": {}}}`; `.` marks a
node that is owned itself besides its children). The types come from schema.py's nodes: the
built-in kinds' models with their list types (listtypes.py), or a CRD's structural schema.

Not reconstructed: ownership across API versions (a manager's set is compared as if written at
the requested version), the cap on the number of Update managers, and the "before-first-apply"
manager of objects that had no managed fields before their first apply (every object written
through this server has them). Fields Go's zero value of a struct has (value structs, lists and
maps without omitempty; listtypes.ALWAYS_PRESENT) count as present in an object that has the
struct, as they do when kube-apiserver compares typed objects.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass

from labkit.apiserver.schema import Node
from labkit.jsondata import json_copy

# -- path elements -----------------------------------------------------------------------------
# ("f", name) | ("k", ((key, value), ...)) | ("v", value) | ("i", index); rendered as fieldsV1
# keys (f:name, k:{"name":"c"}, v:"x", i:0) and in conflict messages (.name, [name="c"], [="x"], [0])

ORDER = {"f": 0, "k": 1, "v": 2, "i": 3}


@functools.lru_cache(maxsize=65536)
def pe_key(pe) -> str:
    kind, value = pe
    if kind == "f":
        return f"f:{value}"
    if kind == "k":
        return "k:" + json.dumps(dict(value), separators=(",", ":"), ensure_ascii=False)
    if kind == "v":
        return "v:" + json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return f"i:{value}"


@functools.lru_cache(maxsize=65536)
def parse_pe(text: str):
    kind, _, rest = text.partition(":")
    if kind == "f":
        return ("f", rest)
    if kind == "k":
        return ("k", tuple(sorted(json.loads(rest).items())))
    if kind == "v":
        return ("v", _hashable(json.loads(rest)))
    if kind == "i":
        return ("i", int(rest))
    raise ValueError(f"invalid path element {text!r}")


def pe_text(pe) -> str:
    kind, value = pe
    if kind == "f":
        return f".{value}"
    if kind == "k":
        return "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in value) + "]"
    if kind == "v":
        return f"[={json.dumps(_plain(value))}]"
    return f"[{value}]"


def _hashable(value):
    if isinstance(value, dict):
        return ("__map__", tuple(sorted((k, _hashable(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("__list__", tuple(_hashable(v) for v in value))
    return value


def _plain(value):
    if isinstance(value, tuple) and value and value[0] == "__map__":
        return {k: _plain(v) for k, v in value[1]}
    if isinstance(value, tuple) and value and value[0] == "__list__":
        return [_plain(v) for v in value[1]]
    return value


# -- field sets ------------------------------------------------------------------------------------

class FieldSet:
    """A set of field paths as a trie: `member` says whether the node's own path is in the set.

    A set is built by `insert` and not changed afterwards: union, difference and intersection
    make new sets that share the unchanged subtrees of their operands instead of copying them
    (what keeps a write's field management cheap)."""

    __slots__ = ("member", "children")

    def __init__(self):
        self.member = False
        self.children: dict = {}

    def insert(self, path) -> None:
        node = self
        for pe in path:
            child = node.children.get(pe)
            if child is None:
                child = node.children[pe] = FieldSet()
            node = child
        node.member = True

    def child(self, pe) -> "FieldSet | None":
        return self.children.get(pe)

    def has(self, path) -> bool:
        node = self
        for pe in path:
            node = node.children.get(pe)
            if node is None:
                return False
        return node.member

    def empty(self) -> bool:
        return not self.member and all(c.empty() for c in self.children.values())

    def copy(self) -> "FieldSet":
        out = FieldSet()
        out.member = self.member
        out.children = {pe: c.copy() for pe, c in self.children.items()}
        return out

    def union(self, other: "FieldSet") -> "FieldSet":
        if other is self or other.empty():
            return self
        if self.empty():
            return other
        out = FieldSet()
        out.member = self.member or other.member
        children = dict(self.children)
        for pe, c in other.children.items():
            mine = children.get(pe)
            children[pe] = c if mine is None else mine.union(c)
        out.children = children
        return out

    def difference(self, other: "FieldSet | None") -> "FieldSet":
        if other is None or (not other.member and not other.children):
            return self
        out = FieldSet()
        out.member = self.member and not other.member
        theirs = other.children
        for pe, c in self.children.items():
            t = theirs.get(pe)
            sub = c if t is None else c.difference(t)
            if not sub.empty():
                out.children[pe] = sub
        return out

    def intersection(self, other: "FieldSet | None") -> "FieldSet":
        out = FieldSet()
        if other is None:
            return out
        out.member = self.member and other.member
        for pe, c in self.children.items():
            if pe in other.children:
                sub = c.intersection(other.children[pe])
                if not sub.empty():
                    out.children[pe] = sub
        return out

    def paths(self, prefix=()):
        """The member paths, in order."""
        if self.member:
            yield prefix
        for pe in sorted(self.children, key=_pe_order):
            yield from self.children[pe].paths(prefix + (pe,))

    def to_json(self) -> dict:
        out = {}
        if self.member and self.children:
            out["."] = {}
        for pe in sorted(self.children, key=_pe_order):
            child = self.children[pe]
            if not child.empty():
                out[pe_key(pe)] = child.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict, top: bool = True) -> "FieldSet":
        out = cls()
        if not top and not data:
            out.member = True
        for key, value in (data or {}).items():
            if key == ".":
                out.member = True
                continue
            out.children[parse_pe(key)] = cls.from_json(value or {}, top=False)
        return out


@functools.lru_cache(maxsize=65536)
def _pe_order(pe):
    return (ORDER[pe[0]], pe_key(pe))


def path_text(path) -> str:
    return "".join(pe_text(pe) for pe in path)


# -- walking values along their types ---------------------------------------------------------------

def _item_pe(node: Node, item, index: int):
    """listItemToPathElement."""
    if node.list_type == "map":
        if not isinstance(item, dict):
            return ("i", index)
        return ("k", tuple(sorted((k, _hashable(item.get(k))) for k in node.keys if k in item)))
    if node.list_type == "set":
        return ("v", _hashable(item))
    return ("i", index)


def to_field_set(value, node: Node) -> FieldSet:
    """TypedValue.ToFieldSet: every leaf, list item and map entry (not struct fields)."""
    out = FieldSet()
    _to_field_set(value, node, (), out)
    return out


def _to_field_set(value, node: Node, path, out: FieldSet) -> None:
    if node.is_leaf(value):
        out.insert(path)
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            pe = _item_pe(node, item, i)
            _to_field_set(item, node.elem, path + (pe,), out)
            out.insert(path + (pe,))
        return
    if isinstance(value, dict):
        for key, child in value.items():
            child_node = node.field(key)
            child_path = path + (("f", key),)
            _to_field_set(child, child_node, child_path, out)
            if child is None or (isinstance(child, dict) and not child) or not node.is_struct:
                out.insert(child_path)


@dataclass
class Comparison:
    added: FieldSet
    modified: FieldSet
    removed: FieldSet


def compare(lhs, rhs, node: Node) -> Comparison:
    """TypedValue.Compare: which paths an update added, modified and removed."""
    result = Comparison(FieldSet(), FieldSet(), FieldSet())
    _compare(lhs, rhs, node, (), result)
    return result


_ABSENT = object()


def _empty(value) -> bool:
    return value is _ABSENT or (isinstance(value, (dict, list)) and not value)


def _compare(lhs, rhs, node: Node, path, result: Comparison) -> None:
    l_absent, r_absent = lhs is _ABSENT, rhs is _ABSENT
    value = lhs if r_absent else rhs
    mismatch = not l_absent and not r_absent and isinstance(lhs, (dict, list)) != isinstance(rhs, (dict, list))
    # leaves: scalars, atomic values, and collections empty on both sides (emptyPromoteToLeaf)
    if node.is_leaf(value) or mismatch or (isinstance(value, (dict, list)) and _empty(lhs) and _empty(rhs)):
        if l_absent:
            result.added.insert(path)
        elif r_absent:
            result.removed.insert(path)
        elif lhs != rhs:
            result.modified.insert(path)
        return
    if isinstance(value, list):
        _compare_lists(lhs if isinstance(lhs, list) else [], rhs if isinstance(rhs, list) else [], node, path,
                       result)
    else:
        left = lhs if isinstance(lhs, dict) else {}
        right = rhs if isinstance(rhs, dict) else {}
        for key in list(left) + [k for k in right if k not in left]:
            child = node.field(key)
            lchild, rchild = left.get(key, _ABSENT), right.get(key, _ABSENT)
            zero = node.zero(key)
            if zero is not None:
                # a value struct, or a list or map without omitempty, is there in Go's zero value
                lchild = type(zero)() if lchild is _ABSENT and not l_absent else lchild
                rchild = type(zero)() if rchild is _ABSENT and not r_absent else rchild
            _compare(lchild, rchild, child, path + (("f", key),), result)
    if l_absent:
        result.added.insert(path)
    elif r_absent:
        result.removed.insert(path)


def _compare_lists(lhs: list, rhs: list, node: Node, path, result: Comparison) -> None:
    left = {}
    for i, item in enumerate(lhs):
        left.setdefault(_item_pe(node, item, i), item)
    right = {}
    for i, item in enumerate(rhs):
        right.setdefault(_item_pe(node, item, i), item)
    for pe in list(left) + [p for p in right if p not in left]:
        _compare(left.get(pe, _ABSENT), right.get(pe, _ABSENT), node.elem, path + (pe,), result)


def merge(lhs, rhs, node: Node):
    """TypedValue.Merge: the applied configuration `rhs` over the live object `lhs`."""
    if rhs is None:
        return None
    if lhs is None or node.is_leaf(rhs) or type(lhs) is not type(rhs):
        return json_copy(rhs)
    if isinstance(rhs, dict):
        out = {k: json_copy(v) for k, v in lhs.items()}
        for key, value in rhs.items():
            merged = merge(lhs.get(key), value, node.field(key))
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        return out
    return _merge_lists(lhs, rhs, node)


def _merge_lists(lhs: list, rhs: list, node: Node) -> list:
    """mergingWalker.visitListItems: the live order, with the configuration's items placed as
    its order wants them, shared items merged."""
    lpes = [_item_pe(node, item, i) for i, item in enumerate(lhs)]
    rpes = [_item_pe(node, item, i) for i, item in enumerate(rhs)]
    left, right = dict(zip(lpes, lhs)), dict(zip(rpes, rhs))
    shared = [pe for pe in rpes if pe in left]
    next_shared = shared.pop(0) if shared else None
    merged_rhs, out = set(), []
    li = ri = 0
    while li < len(lpes) or ri < len(rpes):
        if li < len(lpes) and ri < len(rpes):
            pe = lpes[li]
            if pe == rpes[ri]:
                merged_rhs.add(pe)
                out.append(merge(left[pe], right[pe], node.elem))
                li, ri = li + 1, ri + 1
                next_shared = shared.pop(0) if shared else None
                continue
            if pe in right and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lpes):
            pe = lpes[li]
            if pe not in right:
                out.append(json_copy(left[pe]))
                li += 1
                continue
            if pe in merged_rhs:
                li += 1
        if ri < len(rpes):
            pe = rpes[ri]
            merged_rhs.add(pe)
            out.append(merge(left.get(pe), right[pe], node.elem))
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = shared.pop(0) if shared else None
    return out


def remove(value, fields: FieldSet, node: Node):
    """TypedValue.RemoveItems: the value without the member paths of `fields` (a collection
    left empty goes too)."""
    if fields.member:
        return None
    if isinstance(value, dict) and not node.is_leaf(value):
        out = {}
        for key, child in value.items():
            sub = fields.children.get(("f", key))
            if sub is None:
                out[key] = child
                continue
            kept = remove(child, sub, node.field(key))
            if kept is not None:
                out[key] = kept
        return out or (None if value else value)
    if isinstance(value, list) and not node.is_leaf(value):
        out = []
        for i, item in enumerate(value):
            sub = fields.children.get(_item_pe(node, item, i))
            if sub is None:
                out.append(item)
                continue
            kept = remove(item, sub, node.elem)
            if kept is not None:
                out.append(kept)
        return out or None
    return value


# -- managed fields ------------------------------------------------------------------------------

# what the field manager never tracks (stripMeta), and what the strategies reset per endpoint
STRIPPED = {"apiVersion": {}, "kind": {}, "metadata": {
    "name": {}, "namespace": {}, "uid": {}, "resourceVersion": {}, "creationTimestamp": {}, "generation": {},
    "managedFields": {}, "selfLink": {}, "deletionTimestamp": {}, "deletionGracePeriodSeconds": {}}}


def _set_of(spec: dict) -> FieldSet:
    out = FieldSet()
    for key, sub in spec.items():
        child = _set_of(sub)
        if not sub:
            child.member = True
        out.children[("f", key)] = child
    return out


IGNORED = _set_of(STRIPPED)


def fields_of(paths) -> FieldSet:
    """A field set of dotted paths (`spec`, `metadata.labels`)."""
    out = FieldSet()
    for path in paths:
        out.insert(tuple(("f", part) for part in path.split(".")))
    return out


class Conflict(Exception):
    def __init__(self, conflicts: list[tuple[dict, tuple]]):
        self.conflicts = conflicts      # (manager entry, path)
        super().__init__(self.message())

    def message(self) -> str:
        if len(self.conflicts) == 1:
            entry, path = self.conflicts[0]
            return f"Apply failed with 1 conflict: conflict with {describe_manager(entry)}: {path_text(path)}"
        by_manager: dict[str, list] = {}
        for entry, path in self.conflicts:
            by_manager.setdefault(describe_manager(entry), []).append(path)
        lines = []
        for name in sorted(by_manager):
            lines.append(f"conflicts with {name}:")
            lines += [f"- {path_text(p)}" for p in by_manager[name]]
        return f"Apply failed with {len(self.conflicts)} conflicts: " + "\n".join(lines)

    def causes(self) -> list[dict]:
        return [{"reason": "FieldManagerConflict", "message": f"conflict with {describe_manager(entry)}",
                 "field": path_text(path)} for entry, path in self.conflicts]


def describe_manager(entry: dict) -> str:
    """printManager: `"name"`, with its subresource, and for Update managers the version (the
    manager identifier has no time)."""
    text = json.dumps(entry.get("manager", ""))
    if entry.get("subresource"):
        text += f' with subresource "{entry["subresource"]}"'
    if entry.get("operation") == "Update":
        text += f" using {entry.get('apiVersion', '')}"
    return text


def _identity(entry: dict) -> tuple:
    """BuildManagerIdentifier: manager, operation, subresource, and the version of an Update."""
    version = entry.get("apiVersion", "") if entry.get("operation") == "Update" else ""
    return entry.get("manager", ""), entry.get("operation", ""), entry.get("subresource", ""), version


def decode_managed(entries) -> list[tuple[dict, FieldSet]]:
    out = []
    for entry in entries or []:
        if not isinstance(entry, dict) or not entry.get("manager") and not entry.get("fieldsV1"):
            continue
        out.append(({k: v for k, v in entry.items() if k not in ("fieldsV1", "fieldsType")},
                    FieldSet.from_json(entry.get("fieldsV1") or {})))
    return out


def encode_managed(managers: list[tuple[dict, FieldSet]]) -> list[dict]:
    entries = []
    for entry, fields in managers:
        if fields.empty():
            continue
        encoded = {"manager": entry.get("manager", ""), "operation": entry.get("operation", "Update"),
                   "apiVersion": entry.get("apiVersion", "")}
        if entry.get("time"):
            encoded["time"] = entry["time"]
        encoded.update(fieldsType="FieldsV1", fieldsV1=fields.to_json())
        if entry.get("subresource"):
            encoded["subresource"] = entry["subresource"]
        entries.append(encoded)
    # sortEncodedManagedFields: Apply before Update, then by time, manager, version, subresource
    entries.sort(key=lambda e: (e["operation"], e.get("time", ""), e["manager"], e["apiVersion"],
                                e.get("subresource", "")))
    return entries


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _filtered(fields: FieldSet, ignored: FieldSet) -> FieldSet:
    return fields.difference(ignored)


class FieldManager:
    """One request's field management: `manager` (the fieldManager, else the user agent's first
    word) writing at `api_version`, on the main resource or a subresource whose strategy resets
    the fields in `reset`."""

    def __init__(self, root: Node, manager: str, api_version: str, subresource: str = "",
                 reset: FieldSet | None = None):
        self.root = root
        self.manager = manager
        self.api_version = api_version
        self.subresource = subresource
        self.ignored = IGNORED.union(reset) if reset is not None else IGNORED

    def _entry(self, operation: str) -> dict:
        entry = {"manager": self.manager, "operation": operation, "apiVersion": self.api_version, "time": _now()}
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry

    def update(self, live: dict | None, new: dict, managers: list[tuple[dict, FieldSet]]) -> list[dict]:
        """Updater.Update: the managedFields after this manager's update from `live` to `new`."""
        comparison = compare(live if live is not None else {}, new, self.root)
        changed = _filtered(comparison.added.union(comparison.modified), self.ignored)
        removed = _filtered(comparison.removed, self.ignored)
        identity = (self.manager, "Update", self.subresource, self.api_version)
        result, mine = [], None
        for entry, fields in managers:
            if _identity(entry) == identity:
                mine = (entry, fields)
                continue
            result.append((entry, fields.difference(changed).difference(removed)))
        previous = mine[1] if mine else FieldSet()
        fields = previous.difference(removed).union(changed)
        if mine is None or not _same_set(fields, previous):
            entry = self._entry("Update")
        else:
            entry = mine[0]
        result.append((entry, fields))
        return encode_managed(result)

    def apply(self, live: dict | None, config: dict, managers: list[tuple[dict, FieldSet]],
              force: bool) -> tuple[dict, list[dict]]:
        """Updater.Apply: the object with the configuration applied, and its managedFields.
        Raises Conflict when it changes fields other managers own (unless `force`)."""
        base = live if live is not None else {}
        applied = _filtered(to_field_set(config, self.root), self.ignored)
        config = remove(config, self.ignored.intersection(to_field_set(config, self.root)), self.root) or {}
        merged = merge(base, config, self.root)
        identity = (self.manager, "Apply", self.subresource, "")
        last = next((f for e, f in managers if _identity(e) == identity), None)
        others = [(e, f) for e, f in managers if _identity(e) != identity]
        if last is not None:
            owned = applied
            for _, f in others:
                owned = owned.union(f)
            merged = remove(merged, last.difference(owned), self.root) or {}
        comparison = compare(base, merged, self.root)
        changed = _filtered(comparison.added.union(comparison.modified), self.ignored)
        removed = _filtered(comparison.removed, self.ignored)
        conflicts, result = [], []
        for entry, fields in others:
            clash = fields.intersection(changed)
            if not clash.empty():
                conflicts += [(entry, p) for p in clash.paths()]
            result.append((entry, fields.difference(clash).difference(removed)))
        if conflicts and not force:
            raise Conflict(conflicts)
        previous = next((e for e, _ in managers if _identity(e) == identity), None)
        entry = previous if previous is not None and last is not None and _same_set(last, applied) \
            else self._entry("Apply")
        result.append((entry, applied))
        return merged, encode_managed(result)


def _same_set(a: FieldSet, b: FieldSet) -> bool:
    return a.difference(b).empty() and b.difference(a).empty()


def manager_name(field_manager: str | None, user_agent: str) -> str:
    """managerOrUserAgent: the fieldManager, else the user agent up to its first '/'."""
    if field_manager:
        return field_manager
    return (user_agent or "").split("/")[0]
