"""The scenario predicate language (fidelity/gc/README.md):

    present(ref)  absent(ref)  deleting(ref)  finalizers(ref)  spec_finalizers(ref)  owner_uids(ref)
    ns_phase(ref)  condition(ref, Type).status|reason|message  gc_observed(ref, ...)
    field(ref, "dotted.path")   (a list index is a number, a key with dots is bracketed:
                                 "subsets.0.addresses", "metadata.labels[kubernetes.io/service-name]")

combined with `and`, `or`, `not`, `==`, `!=`, `in`, parentheses, and literals: "strings",
'strings', numbers, [lists], true/false/null. Strings may hold ${ref.uid}-style references,
expanded by the view.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

FUNCTIONS = {"present", "absent", "deleting", "finalizers", "spec_finalizers", "owner_uids", "ns_phase",
             "condition", "gc_observed", "field"}
_TOKEN = re.compile(r"""\s*(?:
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<op>==|!=|\(|\)|\[|\]|,|\.)
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
)""", re.VERBOSE)


_PATH_PART = re.compile(r"\[[^\]]*\]|[^.\[\]]+")


class PredicateError(ValueError):
    """A predicate that does not parse (or names an unknown ref)."""


class View(Protocol):
    def object(self, ref: str) -> dict | None: ...
    def gc_observed(self, ref: str) -> bool: ...
    def expand(self, value: Any) -> Any: ...


@dataclass
class Node:
    kind: str              # call | attr | literal | list | not | and | or | compare
    value: Any = None
    args: tuple = ()


def tokenize(text: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise PredicateError(f"unexpected character {text[pos]!r} at position {pos} in {text!r}")
        for kind in ("string", "number", "op", "name"):
            if m.group(kind) is not None:
                tokens.append((kind, m.group(kind)))
                break
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0

    def peek(self, offset: int = 0):
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else (None, None)

    def take(self, value: str | None = None):
        tok = self.peek()
        if tok[0] is None or (value is not None and tok[1] != value):
            raise PredicateError(f"expected {value or 'more input'} in {self.text!r}")
        self.pos += 1
        return tok

    def parse(self) -> Node:
        node = self.or_expr()
        if self.pos != len(self.tokens):
            raise PredicateError(f"unexpected {self.peek()[1]!r} in {self.text!r}")
        return node

    def or_expr(self) -> Node:
        node = self.and_expr()
        while self.peek() == ("name", "or"):
            self.take()
            node = Node("or", args=(node, self.and_expr()))
        return node

    def and_expr(self) -> Node:
        node = self.not_expr()
        while self.peek() == ("name", "and"):
            self.take()
            node = Node("and", args=(node, self.not_expr()))
        return node

    def not_expr(self) -> Node:
        if self.peek() == ("name", "not"):
            self.take()
            return Node("not", args=(self.not_expr(),))
        return self.comparison()

    def comparison(self) -> Node:
        left = self.term()
        kind, value = self.peek()
        if (kind, value) in (("op", "=="), ("op", "!="), ("name", "in")):
            self.take()
            return Node("compare", value, (left, self.term()))
        return left

    def term(self) -> Node:
        kind, value = self.peek()
        if kind == "string":
            self.take()
            return Node("literal", bytes(value[1:-1], "utf-8").decode("unicode_escape"))
        if kind == "number":
            self.take()
            return Node("literal", float(value) if "." in value else int(value))
        if (kind, value) == ("op", "("):
            self.take()
            node = self.or_expr()
            self.take(")")
            return node
        if (kind, value) == ("op", "["):
            self.take()
            items = []
            while self.peek() != ("op", "]"):
                items.append(self.term())
                if self.peek() == ("op", ","):
                    self.take()
                elif self.peek() != ("op", "]"):
                    raise PredicateError(f"expected ',' or ']' in {self.text!r}")
            self.take("]")
            return Node("list", args=tuple(items))
        if kind == "name":
            self.take()
            if value in ("true", "false", "null", "True", "False", "None"):
                return Node("literal", {"true": True, "True": True, "false": False, "False": False}.get(value))
            if value not in FUNCTIONS:
                raise PredicateError(f"unknown function {value!r} in {self.text!r} "
                                     f"(known: {', '.join(sorted(FUNCTIONS))})")
            self.take("(")
            args = []
            while self.peek() != ("op", ")"):
                k, v = self.take()
                if k not in ("name", "string"):
                    raise PredicateError(f"expected a ref or a name as argument of {value}() in {self.text!r}")
                args.append(v if k == "name" else v[1:-1])
                if self.peek() == ("op", ","):
                    self.take()
            self.take(")")
            node = Node("call", value, tuple(args))
            if self.peek() == ("op", "."):
                self.take()
                _, attr = self.take()
                node = Node("attr", attr, (node,))
            return node
        raise PredicateError(f"unexpected {value!r} in {self.text!r}")


class Predicate:
    def __init__(self, text: str):
        self.text = text
        self.tree = _Parser(text).parse()

    def refs(self) -> set[str]:
        found: set[str] = set()

        def walk(node: Node):
            if node.kind == "call":
                found.update(node.args if node.value not in ("condition", "field") else node.args[:1])
            for arg in node.args:
                if isinstance(arg, Node):
                    walk(arg)
        walk(self.tree)
        return found

    def evaluate(self, view: View) -> bool:
        return bool(_eval(self.tree, view))

    def __str__(self) -> str:
        return self.text


def _meta(obj: dict | None) -> dict:
    return (obj or {}).get("metadata") or {}


def _eval(node: Node, view: View):
    k = node.kind
    if k == "literal":
        return view.expand(node.value)
    if k == "list":
        return [_eval(a, view) for a in node.args]
    if k == "not":
        return not _eval(node.args[0], view)
    if k == "and":
        return bool(_eval(node.args[0], view)) and bool(_eval(node.args[1], view))
    if k == "or":
        return bool(_eval(node.args[0], view)) or bool(_eval(node.args[1], view))
    if k == "compare":
        left, right = _eval(node.args[0], view), _eval(node.args[1], view)
        if node.value == "==":
            return left == right
        if node.value == "!=":
            return left != right
        return left in (right or [])
    if k == "attr":
        cond = _eval(node.args[0], view)
        return None if cond is None else cond.get(node.value)
    name, args = node.value, node.args
    if name == "gc_observed":
        return all(view.gc_observed(ref) for ref in args)
    obj = view.object(args[0])
    if name == "present":
        return obj is not None
    if name == "absent":
        return obj is None
    if name == "deleting":
        return bool(_meta(obj).get("deletionTimestamp"))
    if name == "finalizers":
        return list(_meta(obj).get("finalizers") or [])
    if name == "spec_finalizers":
        return list(((obj or {}).get("spec") or {}).get("finalizers") or [])
    if name == "owner_uids":
        return [r.get("uid") for r in _meta(obj).get("ownerReferences") or []]
    if name == "ns_phase":
        return ((obj or {}).get("status") or {}).get("phase")
    if name == "field":
        value = obj
        for part in _PATH_PART.findall(args[1] if len(args) > 1 else ""):
            part = part[1:-1] if part.startswith("[") else part
            if isinstance(value, list) and part.isdigit():
                value = value[int(part)] if int(part) < len(value) else None
            else:
                value = value.get(part) if isinstance(value, dict) else None
        return value
    if name == "condition":
        for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == (args[1] if len(args) > 1 else None):
                return cond
        return None
    raise PredicateError(f"unknown function {name}")
