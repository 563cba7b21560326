"""Strict field validation of the Kubernetes objects labkit's own commands read (`labkit
kube-proxy apply`, `labkit mounts apply`, `labkit resources apply`, ...), worded as kubectl
v1.34 prints what kube-apiserver answers.

kubectl v1.34 asks the server for `fieldValidation=Strict` by default (kubectl's
`--validate=strict`, KEP-2885), and kube-apiserver's strict decoder refuses a body with a field
its Go type does not have, or with a key given twice, in one error that lists them in the order
they occur (apimachinery/pkg/runtime/serializer/json/json.go, strict errors of sigs.k8s.io/json;
the expected text is test/integration/apiserver/field_validation_test.go's
`strict decoding error: duplicate field "metadata.name", unknown field "spec.unknown1", ...`):

    Error from server (BadRequest): error when creating "svc.yaml": Service in version "v1"
    cannot be handled as a Service: strict decoding error: unknown field "spec.sessionAfinity"

A silently dropped misspelling (`sessionAfinity`, `mountPropagaton`) would otherwise leave the
student with a check that fails for a reason nothing names. The fields a kind has are the
`kubernetes` client's generated models (labkit.apiserver.models), the same schemas the embedded
API server decodes with.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from labkit.apiserver import models
from labkit.errors import LabkitError


class StrictDecodingError(LabkitError):
    """An object kube-apiserver would refuse as it is written (exit code 2, one line)."""


class KeyPositions:
    """Where the keys of one YAML document stand: `lines[path]` is the line of the key's first
    occurrence, `duplicates` the keys given twice in one mapping as [(line, path)], paths as
    the strict decoder names them (`spec.ports[0].port`)."""

    def __init__(self):
        self.lines: dict[str, int] = {}
        self.duplicates: list[tuple[int, str]] = []

    def within(self, prefix: str) -> "KeyPositions":
        """The positions below `prefix` (a List's `items[0].`), relative to it."""
        out = KeyPositions()
        out.lines = {p[len(prefix):]: line for p, line in self.lines.items() if p.startswith(prefix)}
        out.duplicates = [(line, p[len(prefix):]) for line, p in self.duplicates if p.startswith(prefix)]
        return out


def key_positions(text: str) -> list[KeyPositions]:
    """KeyPositions for each YAML document of `text`. Unparseable text gives []: the loader
    that reads it reports the syntax error."""
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return []
    out = []
    for node in documents:
        found = KeyPositions()
        _walk(node, "", found)
        out.append(found)
    return out


def _walk(node, path: str, found: KeyPositions) -> None:
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            child = f"{path}.{key}" if path else str(key)
            if key is not None and key in seen:
                found.duplicates.append((key_node.start_mark.line, child))
            seen.add(key)
            found.lines.setdefault(child, key_node.start_mark.line)
            _walk(value_node, child, found)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, f"{path}[{index}]", found)


def field_problems(obj: dict, positions: KeyPositions | None = None) -> list[str]:
    """What the strict decoder says of `obj`, in the order the fields occur in the text:
    `duplicate field "…"` and `unknown field "…"` items. For kinds whose schema labkit does not
    know, only the duplicates. A value of the wrong type raises models.DecodeError."""
    positions = positions or KeyPositions()
    name = _model_of(obj)
    unknown: list[str] = []
    if name is not None:
        decoder = models.Decoder()
        decoder.object(name, obj)
        unknown = [u for u in decoder.unknown if not _is_type_meta(u)]
    items = [(line, 0, f'duplicate field "{path}"') for line, path in positions.duplicates]
    items += [(positions.lines.get(path, 1 << 30), i, f'unknown field "{path}"') for i, path in enumerate(unknown)]
    items.sort(key=lambda item: item[:2])
    return [text for _line, _i, text in items]


def _is_type_meta(path: str) -> bool:
    return path in ("apiVersion", "kind")


def _model_of(obj: dict) -> str | None:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    group, _, version = api_version.rpartition("/")
    return models.model_name(group, version, kind)


def check_object(obj: Any, source: str, positions: KeyPositions | None = None, *, verb: str = "creating") -> None:
    """Refuse `obj` (read from `source`) as kube-apiserver v1.34 refuses it under
    fieldValidation=Strict, in kubectl's words; nothing for an object it accepts."""
    if not isinstance(obj, dict):
        return
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    version = str(api_version).rpartition("/")[2] if api_version else ""
    source = "STDIN" if source == "-" else source          # kubectl's name for `-f -`
    prefix = (f'Error from server (BadRequest): error when {verb} "{source}": '
              f'{kind} in version "{version}" cannot be handled as a {kind}: ')
    try:
        problems = field_problems(obj, positions)
    except models.DecodeError as exc:
        raise StrictDecodingError(prefix + str(exc)) from None
    if problems:
        raise StrictDecodingError(prefix + "strict decoding error: " + ", ".join(problems))


# Texts checked before and what they gave (their documents, or the refusal): a check reads the same
# Pod files at every judgement, and each reading parsed the text twice with PyYAML's pure-Python
# parser (the documents, then the key positions), milliseconds per kilobyte. Each caller gets a copy
# of its own; a text that is not YAML is not kept, so its error is made afresh.
_CHECKED: dict[tuple[str, str], tuple[list | None, StrictDecodingError | None]] = {}
_CHECKED_MAX = 256


def load_strict(text: str, source: str) -> list[Any]:
    """Every YAML document of `text`, each checked with `check_object` (List items too), in
    order. Syntax errors are left to the caller's YAML loader (labkit.inputs)."""
    key = (text, source)
    if key not in _CHECKED:
        try:
            found = (_load_strict(text, source), None)
        except StrictDecodingError as exc:
            found = (None, exc)
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[key] = found
    documents, refused = _CHECKED[key]
    if refused is not None:
        raise StrictDecodingError(str(refused))
    return copy.deepcopy(documents)


def _load_strict(text: str, source: str) -> list[Any]:
    documents = list(yaml.safe_load_all(text))
    positions = key_positions(text)
    for index, doc in enumerate(documents):
        where = positions[index] if index < len(positions) else KeyPositions()
        if isinstance(doc, dict) and isinstance(doc.get("items"), list) and str(doc.get("kind", "")).endswith("List"):
            for i, item in enumerate(doc["items"]):
                check_object(item, source, where.within(f"items[{i}]."))
        else:
            check_object(doc, source, where)
    return documents
