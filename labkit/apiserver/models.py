"""The schemas of the built-in kinds, read from the `kubernetes` package's generated models, and
the typed decoding that kube-apiserver's JSON decoder performs on every request body.

Every model class of the `kubernetes` client (kubernetes/client/models/*.py, generated from
upstream's OpenAPI document of the version the package is pinned to) carries its fields' JSON
names, types, whether they are required, and upstream's description of each. The files are read
as text, one model at a time when first needed (importing the package would load all ~700
models), and give:

- `decode(...)`: what decoding a body into the Go type does — values of the wrong JSON type are
  refused with encoding/json's message (`json: cannot unmarshal string into Go struct field
  DeploymentSpec.spec.replicas of type int32`), fields the type does not have are dropped and
  reported (for fieldValidation Strict / Warn: `unknown field "spec.foo"`), null values and empty
  optional lists and maps are dropped as Go's decoding and `omitempty` encoding drop them;
- the schemas and descriptions that /openapi/v2 and /openapi/v3 serve (kubectl explain).

Go type names in messages come from the model names (`V1PodSpec` -> `v1.PodSpec`). What the
models flatten — int32 or int64, resource.Quantity strings, metav1.Time or MicroTime — comes
from gotypes.py, generated from the Go types.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import threading
from dataclasses import dataclass

from labkit.apiserver import gobase64, gotypes
from labkit.gojson import value_type

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class Field:
    name: str           # the JSON name
    attribute: str      # the Python attribute (for descriptions)
    type: str           # 'str' 'int' 'bool' 'float' 'datetime' 'object' 'list[X]' 'dict(str, X)' or a model name
    required: bool

    @property
    def container(self) -> str:
        """'list', 'dict' or '' (a single value)."""
        return "list" if self.type.startswith("list[") else "dict" if self.type.startswith("dict(") else ""

    @property
    def item(self) -> str:
        """The type of the value, or of the items of a list or map."""
        return self.type[5:-1] if self.container == "list" else \
            self.type[len("dict(str, "):-1] if self.container == "dict" else self.type


@dataclass
class Model:
    name: str
    fields: dict[str, Field]
    source: str

    def __post_init__(self):
        m = re.match(r"^(?:[A-Z][a-z]+)?(V\d+(?:alpha\d+|beta\d+)?)([A-Z]\w*)$", self.name)
        # `v1.PodSpec` for V1PodSpec, `v1.Event` for CoreV1Event, `v1beta1.X` for V1beta1X
        self.go_name = f"{m.group(1).lower()}.{m.group(2)}" if m else self.name
        self.struct = self.go_name.split(".", 1)[-1]
        # per field: (field, container, item type, Go scalar type or None) for the decoder
        self.plan = {name: (f, f.container, f.item, gotypes.SCALARS.get((self.name, name)))
                     for name, f in self.fields.items()}
        self._children: dict[str, tuple[str, "Model"]] | None = None

    @property
    def children(self) -> dict[str, tuple[str, "Model"]]:
        """Fields holding objects of a model: name -> (container, model)."""
        if self._children is None:
            found = {}
            for name, f in self.fields.items():
                inner = model(f.item)
                if inner is not None:
                    found[name] = (f.container, inner)
            self._children = found
        return self._children

    def descriptions(self) -> dict[str, str]:
        """JSON field name -> upstream's description (from the property docstrings)."""
        found = {}
        by_attribute = {f.attribute: f.name for f in self.fields.values()}
        for attribute, text in _DOC_RE.findall(self.source):
            if attribute in by_attribute:
                text = " ".join(text.split("  # noqa: E501\n")).strip()
                # the docstrings keep the escapes of the generator's string literals (\")
                found[by_attribute[attribute]] = text.encode("latin-1", "backslashreplace").decode("unicode_escape")
        return found


_DOC_RE = re.compile(r'    def (\w+)\(self\):\n        """Gets the \w+ of this \w+\.  # noqa: E501\n\n'
                     r'        (.*?)  # noqa: E501\n\n        :return:', re.S)
_TYPES_RE = re.compile(r"    openapi_types = (\{.*?\})\n", re.S)
_ATTRIBUTES_RE = re.compile(r"    attribute_map = (\{.*?\})\n", re.S)
_REQUIRED_RE = re.compile(r"client_side_validation and (\w+) is None:  # noqa: E501\n"
                          r"            raise ValueError\(\"Invalid value for `\w+`, must not be `None`\"\)")


class _Catalogue:
    def __init__(self):
        self._lock = threading.Lock()
        self._files: dict[str, str] | None = None
        self._models: dict[str, Model | None] = {}

    def _directory(self) -> str:
        spec = importlib.util.find_spec("kubernetes")
        return os.path.join(os.path.dirname(spec.origin), "client", "models")

    def files(self) -> dict[str, str]:
        if self._files is None:
            directory = self._directory()
            found = {}
            with open(os.path.join(directory, "__init__.py")) as f:
                for line in f:
                    m = re.match(r"from kubernetes\.client\.models\.(\w+) import (\w+)$", line.strip())
                    if m:
                        found[m.group(2)] = os.path.join(directory, m.group(1) + ".py")
            self._files = found
        return self._files

    def get(self, name: str) -> Model | None:
        found = self._models.get(name)
        if found is not None:
            return found
        with self._lock:
            if name in self._models:
                return self._models[name]
            path = self.files().get(name)
            model = None
            if path is not None:
                with open(path) as f:
                    source = f.read()
                types = ast.literal_eval(_TYPES_RE.search(source).group(1))
                attributes = ast.literal_eval(_ATTRIBUTES_RE.search(source).group(1))
                required = set(_REQUIRED_RE.findall(source))
                fields = {attributes[a]: Field(attributes[a], a, t, a in required) for a, t in types.items()}
                model = Model(name, fields, source)
            self._models[name] = model
            return model


CATALOGUE = _Catalogue()


def model(name: str) -> Model | None:
    return CATALOGUE.get(name)


def model_name(group: str, version: str, kind: str) -> str | None:
    """The model class of a kind: `V1Deployment`; where kinds of several groups share a name the
    class carries the group (`CoreV1Event`, `EventsV1Event`)."""
    files = CATALOGUE.files()
    prefix = (group.split(".")[0] if group else "core").capitalize()
    for candidate in (f"{prefix}{version.capitalize()}{kind}", f"{version.capitalize()}{kind}"):
        if candidate in files:
            return candidate
    return None


# -- decoding --------------------------------------------------------------------------------

class DecodeError(Exception):
    """A value of the wrong type: encoding/json's UnmarshalTypeError text."""


def go_type(type_: str, scalar: str | None = None) -> str:
    """The Go type of a model's field type (`scalar`: the Go type gotypes.SCALARS names)."""
    if type_ == "str":
        return "[]uint8" if scalar == "[]byte" else "string"
    if type_ == "int":
        return scalar or "int32"
    if type_ == "bool":
        return "bool"
    if type_ == "float":
        return "float64"
    if type_ == "datetime":
        return f"v1.{scalar or 'Time'}"
    if type_ == "object":
        return "interface {}"
    if type_.startswith("list["):
        return "[]" + go_type(type_[5:-1], scalar)
    if type_.startswith("dict("):
        return "map[string]" + go_type(type_[len("dict(str, "):-1], scalar)
    found = model(type_)
    return found.go_name if found else type_


class Decoder:
    """One decoding: the normalised object, and the unknown fields it dropped."""

    def __init__(self):
        self.unknown: list[str] = []

    def object(self, name: str, obj, path: str = "", struct: str = "") -> dict:
        """The decoded copy of `obj` (of model `name`; at `path` inside a `struct`, for values
        decoded inside an object without a model)."""
        m = model(name)
        if not isinstance(obj, dict):
            self._fail(obj, struct or m.struct, path, name, None)
        return self._model(m, obj, path, path)

    def _fail(self, value, struct: str, path: str, type_: str, scalar: str | None):
        kind = value_type(value)
        if kind == "number" and type_ == "int":
            kind = f"number {value}"
        raise DecodeError(f"json: cannot unmarshal {kind} into Go struct field {struct}.{path} of type "
                          f"{go_type(type_, scalar)}")

    def _model(self, m: Model, obj: dict, path: str, plain: str) -> dict:
        out = {}
        plan = m.plan
        for key, value in obj.items():
            entry = plan.get(key)
            if entry is None:
                self.unknown.append(f"{path}.{key}" if path else key)
                continue
            if value is None:
                continue
            field, container, item, scalar = entry
            child = f"{path}.{key}" if path else key
            child_plain = f"{plain}.{key}" if plain else key
            if scalar == "Quantity":
                decoded = _quantities(value)
            elif container == "list":
                if not isinstance(value, list):
                    self._fail(value, m.struct, child_plain, field.type, scalar)
                decoded = []
                for i, v in enumerate(value):
                    if v is None:
                        v = _ZERO.get(item, {})
                        if v is None:
                            continue
                    decoded.append(self._value(item, v, f"{child}[{i}]", child_plain, m.struct, scalar))
                if not decoded and not field.required:
                    continue
            elif container == "dict":
                if not isinstance(value, dict):
                    self._fail(value, m.struct, child_plain, field.type, scalar)
                decoded = {k: self._value(item, v, f"{child}[{k}]", child_plain, m.struct, scalar)
                           for k, v in value.items() if v is not None}
                if not decoded and not field.required:
                    continue
            else:
                decoded = self._value(item, value, child, child_plain, m.struct, scalar)
            out[key] = decoded
        return out

    def _value(self, type_: str, value, path: str, plain: str, struct: str, scalar: str | None):
        if type_ == "str":
            if value.__class__ is not str:
                self._fail(value, struct, plain, type_, scalar)
            if scalar == "[]byte":      # base64, as Go decodes a []byte and encodes it back
                try:
                    return gobase64.canonical(value)
                except gobase64.CorruptInputError as exc:
                    raise DecodeError(str(exc))
            return value
        if type_ == "int":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if value.__class__ is not int:
                self._fail(value, struct, plain, type_, scalar)
            low, high = _INT64 if scalar == "int64" else _INT32
            if not low <= value <= high:
                self._fail(value, struct, plain, type_, scalar)
            return value
        if type_ == "bool":
            if value.__class__ is not bool:
                self._fail(value, struct, plain, type_, scalar)
            return value
        if type_ == "float":
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                self._fail(value, struct, plain, type_, scalar)
            return value
        if type_ == "datetime":
            if not isinstance(value, str):
                self._fail(value, struct, plain, type_, scalar)
            return normalise_time(value, scalar == "MicroTime")
        if type_ == "object":
            return value
        m = model(type_)
        if m is None:
            return value
        if value.__class__ is not dict:
            self._fail(value, struct, plain, type_, scalar)
        return self._model(m, value, path, plain)


_ZERO = {"str": "", "int": 0, "bool": False, "float": 0.0, "datetime": None, "object": None}


def _quantities(value):
    from labkit import quantity
    try:
        if isinstance(value, dict):
            return {k: quantity.canonical(v) for k, v in value.items() if v is not None}
        return quantity.canonical(value)
    except quantity.QuantityError as exc:
        raise DecodeError(str(exc))


_TIME_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def normalise_time(value: str, micro: bool) -> str:
    """metav1.Time / MicroTime as Go writes them back: UTC, seconds (or microseconds)."""
    m = _TIME_RE.match(value)
    if not m:
        layout = "2006-01-02T15:04:05.000000Z07:00" if micro else "2006-01-02T15:04:05Z07:00"
        raise DecodeError(f'parsing time "{value}" as "{layout}": cannot parse "{value}" as "2006"')
    import calendar
    import time as _time
    seconds = calendar.timegm((int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                               int(m.group(5)), int(m.group(6)), 0, 0, 0))
    zone = m.group(8)
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    text = _time.strftime("%Y-%m-%dT%H:%M:%S", _time.gmtime(seconds))
    if micro:
        fraction = (m.group(7) or ".0")[1:]
        text += "." + (fraction + "000000")[:6]
    return text + "Z"
