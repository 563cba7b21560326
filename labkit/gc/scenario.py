"""Scenario files (fidelity/gc/README.md): loading and checking their format, so that a malformed
file is reported as one line naming the file, the field and what was expected.

Beyond that README, labkit's scenarios may use `op: find` with `object: {ref, apiVersion, kind,
namespace, name | labelSelector}` and `timeout_s`: wait until such an object exists (one that a
controller makes, e.g. a namespace's `default` ServiceAccount or a Service's EndpointSlice) and
bind the ref to it, and the predicate `field(ref, "dotted.path")` (predicates.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


from labkit.errors import ConfigError
from labkit.inputs import load_yaml
from labkit.gc.predicates import Predicate, PredicateError

OPS = ("create", "delete", "update", "patch", "finalize", "wait", "assert", "restart-gc", "find")
CONTROLLER_STATES = {"garbagecollector": ("running", "stopped", "started-after-setup"),
                     "namespace": ("running", "stopped"),
                     **{name: ("running", "stopped") for name in ("serviceaccount", "root-ca-cert-publisher",
                                                                  "endpointslice", "endpoint", "node", "podgc", "pvc-protection",
                                                                  "pv-protection", "replicaset",
                                                                  "deployment")}}
OBJECT_META_KEYS = ("name", "generateName", "namespace", "labels", "annotations", "finalizers", "ownerReferences")
OBJECT_RESERVED = ("ref", "existing", "apiVersion", "kind", "labelSelector", *OBJECT_META_KEYS)
PATCH_TYPES = ("json", "merge", "strategic", "apply")
# ${ref.uid}, ${ref.name}, ${ref.<dotted field>}, ${ref.<field>@stepN} (a value step N returned)
REF_EXPR = re.compile(r"\$\{([A-Za-z0-9_-]+)\.([A-Za-z0-9_.-]+?)(?:@(?:step)?(\d+))?\}")


@dataclass
class ObjectSpec:
    ref: str
    api_version: str
    kind: str
    namespace: str | None
    name: str | None
    generate_name: str | None
    existing: bool
    raw: dict

    def body(self) -> dict:
        """The object as sent to the server (still holding ${...} references)."""
        meta = {k: self.raw[k] for k in OBJECT_META_KEYS if k in self.raw and k != "namespace"}
        if self.namespace:
            meta["namespace"] = self.namespace
        body = {"apiVersion": self.api_version, "kind": self.kind, "metadata": meta}
        for key, value in self.raw.items():
            if key not in OBJECT_RESERVED:
                body[key] = value
        return body


@dataclass
class Step:
    index: int                 # 1-based, as ${ref.field@stepN} counts
    op: str
    raw: dict
    until: Predicate | None = None
    that: list[Predicate] = field(default_factory=list)
    object: ObjectSpec | None = None

    @property
    def target(self) -> str | None:
        return self.raw.get("target")

    def describe(self) -> str:
        if self.op == "wait":
            if self.until is not None:
                return f"wait until {self.until}"
            return f"wait for {self.raw.get('for')}"
        if self.op == "assert":
            return "assert " + " and ".join(str(p) for p in self.that)
        if self.op in ("create", "find"):
            return f"{self.op} {self.object.ref}"
        return f"{self.op} {self.target or ''}".strip()


@dataclass
class Invariant:
    while_: Predicate
    then: Predicate


@dataclass
class Scenario:
    path: Path
    id: str
    title: str
    category: str
    controllers: dict[str, str]
    requires: list[str]
    namespaces: list[str]
    objects: list[ObjectSpec]
    steps: list[Step]
    expect: dict
    invariants: list[Invariant]
    discovery: object = None
    raw: dict = field(default_factory=dict)
    emulated_version: str | None = None      # the embedded server emulates this release (version.py)

    def refs(self) -> dict[str, ObjectSpec]:
        found = {o.ref: o for o in self.objects}
        for step in self.steps:
            if step.object is not None:
                found[step.object.ref] = step.object
        return found


def _require(cond: bool, path: Path, fld: str, problem: str) -> None:
    if not cond:
        raise ConfigError(path, fld, problem)


def _predicate(path: Path, fld: str, text) -> Predicate:
    _require(isinstance(text, str) and text.strip() != "", path, fld, "expected a predicate (a string)")
    try:
        return Predicate(text)
    except PredicateError as exc:
        raise ConfigError(path, fld, str(exc))


def _object(path: Path, fld: str, raw) -> ObjectSpec:
    _require(isinstance(raw, dict), path, fld, "expected a mapping describing an object")
    for key in ("ref", "apiVersion", "kind"):
        _require(isinstance(raw.get(key), str) and raw[key], path, f"{fld}.{key}", "expected a non-empty string")
    _require(bool(raw.get("name")) != bool(raw.get("generateName")), path, f"{fld}.name",
             "expected exactly one of name and generateName")
    for key in ("finalizers",):
        _require(raw.get(key) is None or isinstance(raw[key], list), path, f"{fld}.{key}", "expected a list")
    _require(raw.get("ownerReferences") is None or isinstance(raw["ownerReferences"], list), path,
             f"{fld}.ownerReferences", "expected a list of owner references")
    return ObjectSpec(raw["ref"], raw["apiVersion"], raw["kind"], raw.get("namespace"), raw.get("name"),
                      raw.get("generateName"), bool(raw.get("existing")), raw)


def _strict(path: Path, text: str, specs: list[tuple[str, ObjectSpec]]) -> None:
    """Refuse an object with a field its kind does not have, or a key given twice, as kubectl v1.34
    (fieldValidation=Strict) gets it refused by kube-apiserver (labkit.strict): a misspelt
    `ownerRefrences` or `blockOwnerDeletoin` would otherwise be dropped without a word. The keys
    a scenario writes beside `ref` (name, finalizers, ownerReferences, ...) are the object's
    metadata, and named so. Values of the wrong type are left to the server (a `${ref.uid}` is
    filled in when the scenario plays)."""
    from labkit import strict
    documents = strict.key_positions(text)
    if not documents:
        return
    for prefix, spec in specs:
        found = documents[0].within(prefix + ".")
        positions = strict.KeyPositions()

        def named(key: str) -> str:
            head = key.split(".", 1)[0].split("[", 1)[0]
            return f"metadata.{key}" if head in OBJECT_META_KEYS and head != "namespace" else key
        positions.lines = {named(k): line for k, line in found.lines.items()}
        positions.duplicates = [(line, named(k)) for line, k in found.duplicates]
        try:
            strict.check_object(spec.body(), str(path), positions)
        except strict.StrictDecodingError as exc:
            if "strict decoding error" in str(exc):
                raise


def load(path: str | Path) -> Scenario:
    path = Path(path)
    raw = load_yaml(path)
    _require(isinstance(raw, dict), path, None, "expected a mapping at the top level")
    _require(isinstance(raw.get("id"), str), path, "id", "expected the scenario id (a string)")
    _require(raw["id"] == path.stem, path, "id", f"expected the file's stem {path.stem!r}, got {raw['id']!r}")

    controllers = raw.get("controllers") or {}
    _require(isinstance(controllers, dict), path, "controllers", "expected a mapping of controller: state")
    for name, state in controllers.items():
        allowed = CONTROLLER_STATES.get(name)
        _require(allowed is not None, path, f"controllers.{name}",
                 f"unknown controller; expected one of {', '.join(CONTROLLER_STATES)}")
        _require(state in allowed, path, f"controllers.{name}", f"expected one of {', '.join(allowed)}, got {state!r}")

    requires = raw.get("requires") or []
    _require(isinstance(requires, list) and all(isinstance(r, str) for r in requires), path, "requires",
             "expected a list of feature names")
    namespaces = raw.get("namespaces") or []
    _require(isinstance(namespaces, list) and all(isinstance(n, str) for n in namespaces), path, "namespaces",
             "expected a list of namespace names")

    objects_raw = raw.get("objects") or []
    _require(isinstance(objects_raw, list), path, "objects", "expected a list of objects")
    objects = [_object(path, f"objects[{i}]", o) for i, o in enumerate(objects_raw)]
    specs = [(f"objects[{i}]", o) for i, o in enumerate(objects)]
    seen = set()
    for i, o in enumerate(objects):
        _require(o.ref not in seen, path, f"objects[{i}].ref", f"duplicate ref {o.ref!r}")
        seen.add(o.ref)

    steps_raw = raw.get("steps") or []
    _require(isinstance(steps_raw, list), path, "steps", "expected a list of steps")
    steps = []
    for i, s in enumerate(steps_raw):
        fld = f"steps[{i}]"
        _require(isinstance(s, dict), path, fld, "expected a mapping")
        op = s.get("op")
        _require(op in OPS, path, f"{fld}.op", f"expected one of {', '.join(OPS)}, got {op!r}")
        step = Step(i + 1, op, s)
        if op in ("delete", "update", "patch", "finalize"):
            _require(isinstance(s.get("target"), str), path, f"{fld}.target", "expected the ref of an object")
        if op == "create":
            step.object = _object(path, f"{fld}.object", s.get("object"))
            specs.append((f"steps[{i}].object", step.object))
        if op == "find":
            raw_obj = s.get("object")
            _require(isinstance(raw_obj, dict) and bool(raw_obj.get("name")) != bool(raw_obj.get("labelSelector")),
                     path, f"{fld}.object", "expected {ref, apiVersion, kind, namespace, name or labelSelector}")
            step.object = _object(path, f"{fld}.object", {**raw_obj, "name": raw_obj.get("name") or "(found)"})
            if raw_obj.get("labelSelector"):
                step.object.name = None
            _require(s.get("timeout_s") is None or _is_number(str(s["timeout_s"])), path, f"{fld}.timeout_s",
                     "expected a number of seconds")
        if op == "delete":
            _require(s.get("body") is None or isinstance(s["body"], dict), path, f"{fld}.body",
                     "expected DeleteOptions (a mapping)")
            _require(s.get("query") is None or isinstance(s["query"], dict), path, f"{fld}.query", "expected a mapping")
        if op == "patch":
            _require(s.get("type") in PATCH_TYPES, path, f"{fld}.type", f"expected one of {', '.join(PATCH_TYPES)}")
            _require(isinstance(s.get("patch"), (str, dict, list)), path, f"{fld}.patch", "expected the patch")
        if op == "update":
            _require(isinstance(s.get("set"), dict), path, f"{fld}.set", "expected a mapping of dotted.path: value")
        if op == "finalize":
            _require(isinstance(s.get("spec_finalizers"), list), path, f"{fld}.spec_finalizers",
                     "expected a list of finalizer names")
        if op == "wait":
            _require(("until" in s) != ("for" in s), path, fld, "expected exactly one of until and for")
            if "until" in s:
                step.until = _predicate(path, f"{fld}.until", s["until"])
            else:
                value = str(s["for"])
                _require(value == "settle" or (value.endswith("s") and _is_number(value[:-1])), path, f"{fld}.for",
                         f"expected settle or a duration like 15s, got {value!r}")
            _require(s.get("timeout_s") is None or _is_number(str(s["timeout_s"])), path, f"{fld}.timeout_s",
                     "expected a number of seconds")
        if op == "assert":
            that = s.get("that")
            that = [that] if isinstance(that, str) else that
            _require(isinstance(that, list) and that, path, f"{fld}.that", "expected a predicate or a list of them")
            step.that = [_predicate(path, f"{fld}.that[{j}]", t) for j, t in enumerate(that)]
        if "expect" in s:
            _require(isinstance(s["expect"], dict), path, f"{fld}.expect", "expected a mapping")
        steps.append(step)

    expect = raw.get("expect") or {}
    _require(isinstance(expect, dict), path, "expect", "expected a mapping")
    for key in ("present", "absent"):
        _require(isinstance(expect.get(key, []), list), path, f"expect.{key}", "expected a list of refs")
    _require(isinstance(expect.get("objects", {}), dict), path, "expect.objects", "expected a mapping ref: fields")
    invariants = []
    for i, inv in enumerate(expect.get("invariants") or []):
        _require(isinstance(inv, dict) and "while" in inv and "then" in inv, path, f"expect.invariants[{i}]",
                 "expected {while: predicate, then: predicate}")
        invariants.append(Invariant(_predicate(path, f"expect.invariants[{i}].while", inv["while"]),
                                    _predicate(path, f"expect.invariants[{i}].then", inv["then"])))
    _require(isinstance(expect.get("events", []), list), path, "expect.events", "expected a list of events")
    _require(isinstance(expect.get("conditions", {}), dict), path, "expect.conditions",
             "expected a mapping ref: [conditions]")

    _strict(path, path.read_text(), specs)
    emulated = raw.get("emulatedVersion")
    if emulated is not None:
        from labkit.apiserver.version import EffectiveVersion, VersionError
        try:
            EffectiveVersion.parse(str(emulated))
        except VersionError as exc:
            raise ConfigError(path, "emulatedVersion", str(exc))
    scenario = Scenario(path, raw["id"], str(raw.get("title", "")), str(raw.get("category", "gc")), controllers,
                        requires, namespaces, objects, steps, expect, invariants, raw.get("discovery"), raw,
                        None if emulated is None else str(emulated))
    known = set(scenario.refs())
    used = [("expect.present", r) for r in expect.get("present", [])] + \
           [("expect.absent", r) for r in expect.get("absent", [])] + \
           [("expect.objects", r) for r in expect.get("objects", {})] + \
           [("expect.conditions", r) for r in expect.get("conditions", {})] + \
           [(f"steps[{s.index - 1}].target", s.target) for s in steps if s.target]
    for inv in invariants:
        used += [("expect.invariants", r) for r in inv.while_.refs() | inv.then.refs()]
    for s in steps:
        for p in ([s.until] if s.until else []) + s.that:
            used += [(f"steps[{s.index - 1}]", r) for r in p.refs()]
    for fld, ref in used:
        _require(isinstance(ref, str) and ref in known, path, fld, f"unknown ref {ref!r} (known: {', '.join(sorted(known))})")
    _check_references(path, raw, known, len(steps))
    return scenario


def _check_references(path: Path, raw: dict, known: set[str], steps: int) -> None:
    """Every ${...} must be well-formed and name a known ref (and an existing step)."""
    def walk(node, where: str):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{where}.{k}" if where else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")
        elif isinstance(node, str) and "${" in node:
            for text in re.findall(r"\$\{[^}]*\}?", node):
                m = REF_EXPR.fullmatch(text)
                _require(m is not None, path, where, f"cannot read {text!r}: expected ${{ref.field}} or "
                                                      "${ref.field@stepN}")
                _require(m.group(1) in known, path, where, f"unknown ref {m.group(1)!r} in {text}")
                _require(m.group(3) is None or 1 <= int(m.group(3)) <= steps, path, where,
                         f"{text} names step {m.group(3)}, but there are {steps} steps")
    for key in ("objects", "steps", "expect"):
        walk(raw.get(key), key)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False
