"""CEL for admission: ValidatingAdmissionPolicy expressions and the matchConditions of webhooks
and policies, evaluated with cel-python (module celpy).

The variables are those k8s.io/apiserver v1.34 gives admission expressions
(pkg/admission/plugin/cel/activation.go, newActivation; composition.go for `variables`):
`object` and `oldObject` (null on CREATE and DELETE respectively), `request` (the
admission.k8s.io AdmissionRequest without the objects: CreateAdmissionRequest), `params`,
`namespaceObject` (CreateNamespaceObject: the namespace's metadata, spec and status; null for
cluster-scoped resources) and `variables.<name>`, each variable evaluated once, in order, before
the validations. `authorizer` is not offered.

Besides CEL's standard functions and macros (has, all, exists, exists_one, map, filter, size,
contains, startsWith, endsWith, matches, string/int/... conversions), the Kubernetes library
functions upstream's policy examples use are provided (k8s.io/apiserver/pkg/cel/library and
cel-go ext strings): strings — charAt, indexOf, lastIndexOf, lowerAscii, upperAscii, replace,
split, substring, trim, join; lists — isSorted, sum, min, max, indexOf, lastIndexOf; regex —
find, findAll; url — url, isURL, getScheme, getHost, getHostname, getPort, getEscapedPath,
getQuery; quantity — quantity, isQuantity, compareTo, isGreaterThan, isLessThan, asInteger,
asApproximateFloat, sign, add, sub.

Errors read as cel-go's: `no such key: <key>`, `no such overload`, `division by zero`; an
evaluation error of an expression reads `expression '<expr>' resulted in error: <error>`
(activation.go, Evaluate).
"""

from __future__ import annotations

import functools
import re
import threading
from urllib.parse import urlsplit

import celpy
from celpy import celtypes

from labkit import quantity as quantities


class EvaluationError(Exception):
    """An expression failed to compile or evaluate (its message is upstream's)."""


_env = celpy.Environment()
_lock = threading.Lock()


@functools.lru_cache(maxsize=2048)
def _compiled(expression: str):
    with _lock:
        return _env.program(_env.compile(expression), functions=FUNCTIONS)


def compile_problem(expression: str) -> str | None:
    """A syntax error in the expression (what API validation refuses), or None."""
    try:
        _env.compile(expression)
    except celpy.CELParseError as exc:
        return f"compilation failed: ERROR: <input>: Syntax error: {_first_line(str(exc))}"
    return None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "syntax error"


def _error_text(exc: celpy.CELEvalError) -> str:
    message = str(exc.args[0]) if exc.args else str(exc)
    cause = exc.args[1] if len(exc.args) > 1 else None
    m = re.match(r"no such member in mapping: '(.*)'$", message)
    if m:
        return f"no such key: {m.group(1)}"
    if "no matching overload" in message or "does not support field selection" in message \
            or "no such overload" in message:
        return "no such overload"
    if cause is ZeroDivisionError:
        return "division by zero"
    if message.startswith("undeclared reference to"):
        name = exc.args[2][0] if len(exc.args) > 2 and exc.args[2] else ""
        return f"undeclared reference to '{name}'"
    return message


def evaluate(expression: str, activation: dict):
    """The value of an expression (a celpy value), or EvaluationError."""
    try:
        program = _compiled(expression)
    except celpy.CELParseError as exc:
        raise EvaluationError(f"compilation failed: ERROR: <input>: Syntax error: {_first_line(str(exc))}")
    try:
        result = program.evaluate(activation)
    except celpy.CELEvalError as exc:
        raise EvaluationError(f"expression '{expression}' resulted in error: {_error_text(exc)}")
    except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, AttributeError) as exc:
        raise EvaluationError(f"expression '{expression}' resulted in error: {exc}")
    if isinstance(result, celpy.CELEvalError):
        raise EvaluationError(f"expression '{expression}' resulted in error: {_error_text(result)}")
    return result


def is_true(value) -> bool:
    return isinstance(value, celtypes.BoolType) and bool(value)


def to_cel(value):
    return celpy.json_to_cel(value)


def to_python(value):
    """A celpy value as plain JSON-like Python."""
    if value is None:
        return None
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.MapType):
        return {str(k): to_python(v) for k, v in value.items()}
    if isinstance(value, celtypes.ListType):
        return [to_python(v) for v in value]
    return value


# -- the activation ----------------------------------------------------------------------------------

def namespace_object(namespace: dict | None) -> dict | None:
    """CreateNamespaceObject: the namespace's metadata (without managed fields), spec and status."""
    if namespace is None:
        return None
    meta = {k: v for k, v in (namespace.get("metadata") or {}).items() if k != "managedFields"}
    return {"metadata": meta, "spec": namespace.get("spec") or {}, "status": namespace.get("status") or {}}


def activation(attrs, rt, params=None, namespace: dict | None = None) -> dict:
    return {
        "object": to_cel(attrs.obj),
        "oldObject": to_cel(attrs.old),
        "request": to_cel(attrs.admission_request(rt)),
        "params": to_cel(params),
        "namespaceObject": to_cel(namespace_object(namespace)),
        "variables": celtypes.MapType({}),
    }


def add_variables(act: dict, variables: list[dict]) -> None:
    """composition.go: each variable in order, able to use the ones before it; an error is kept as
    the variable's value and surfaces in the expressions that use it."""
    values = {}
    for variable in variables or []:
        act["variables"] = celtypes.MapType(values)
        try:
            value = evaluate(variable.get("expression", ""), act)
        except EvaluationError as exc:
            value = celpy.CELEvalError(str(exc))
        values[celtypes.StringType(variable.get("name", ""))] = value
    act["variables"] = celtypes.MapType(values)


def match_conditions(conditions: list[dict], attrs, rt, failure_policy: str = "Fail",
                     act: dict | None = None) -> bool:
    """matchconditions.Matcher.Match: any condition false -> no match; otherwise errors follow the
    failure policy (Fail: an error, Ignore: no match)."""
    act = act if act is not None else activation(attrs, rt)
    errors = []
    for condition in conditions:
        try:
            value = evaluate(condition.get("expression", ""), act)
        except EvaluationError as exc:
            errors.append(str(exc))
            continue
        if not isinstance(value, celtypes.BoolType):
            errors.append(f"expression '{condition.get('expression', '')}' resulted in error: no such overload")
            continue
        if not value:
            return False
    if errors:
        if failure_policy == "Ignore":
            return False
        raise EvaluationError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return True


# -- the Kubernetes library --------------------------------------------------------------------------

def _str(value) -> celtypes.StringType:
    return celtypes.StringType(value)


def _index_of(target, item, start=None):
    if isinstance(target, celtypes.ListType):
        for i, v in enumerate(target):
            if v == item:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    return celtypes.IntType(str(target).find(str(item), int(start or 0)))


def _last_index_of(target, item, end=None):
    if isinstance(target, celtypes.ListType):
        for i in range(len(target) - 1, -1, -1):
            if target[i] == item:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    text = str(target)
    return celtypes.IntType(text.rfind(str(item), 0, len(text) if end is None else int(end) + len(str(item))))


def _substring(text, start, end=None):
    text = str(text)
    start = int(start)
    end = len(text) if end is None else int(end)
    if start < 0 or end > len(text) or start > end:
        raise ValueError(f"index out of range: {start if start < 0 or start > len(text) else end}")
    return _str(text[start:end])


def _replace(text, old, new, count=None):
    return _str(str(text).replace(str(old), str(new), -1 if count is None else int(count)))


def _split(text, sep, count=None):
    parts = str(text).split(str(sep)) if count is None or int(count) < 0 else \
        str(text).split(str(sep), max(int(count) - 1, 0)) if int(count) else []
    return celtypes.ListType([_str(p) for p in parts])


def _join(items, sep=""):
    return _str(str(sep).join(str(i) for i in items))


def _find(text, pattern):
    m = re.search(str(pattern), str(text))
    return _str(m.group(0) if m else "")


def _find_all(text, pattern, limit=None):
    found = [m.group(0) for m in re.finditer(str(pattern), str(text))]
    if limit is not None and int(limit) >= 0:
        found = found[:int(limit)]
    return celtypes.ListType([_str(f) for f in found])


def _url(text):
    parts = urlsplit(str(text))
    if not parts.scheme and not str(text).startswith("/"):
        raise ValueError(f"URL {text!r} must be an absolute URL or an absolute path")
    return celtypes.MapType({_str("__url__"): _str(str(text))})


def _url_parts(url):
    return urlsplit(str(url[_str("__url__")]))


def _is_url(text):
    try:
        _url(text)
        return celtypes.BoolType(True)
    except ValueError:
        return celtypes.BoolType(False)


def _quantity(text):
    quantities.parse(str(text))      # QuantityError (a ValueError) with upstream's message
    return celtypes.MapType({_str("__quantity__"): _str(str(text))})


def _q(value):
    return quantities.parse(str(value[_str("__quantity__")]))[0]


def _is_quantity(text):
    try:
        _quantity(text)
        return celtypes.BoolType(True)
    except ValueError:
        return celtypes.BoolType(False)


def _q_new(value) -> celtypes.MapType:
    return celtypes.MapType({_str("__quantity__"): _str(quantities.format_quantity(value, "DecimalSI"))})


FUNCTIONS = {
    "charAt": lambda s, i: _str(str(s)[int(i)] if int(i) < len(str(s)) else ""),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": lambda s: _str(str(s).lower()),
    "upperAscii": lambda s: _str(str(s).upper()),
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": lambda s: _str(str(s).strip()),
    "join": _join,
    "isSorted": lambda items: celtypes.BoolType(list(items) == sorted(items)),
    "sum": lambda items: functools.reduce(lambda a, b: a + b, items, celtypes.IntType(0)),
    "min": lambda items: min(items),
    "max": lambda items: max(items),
    "find": _find,
    "findAll": _find_all,
    "url": _url,
    "isURL": _is_url,
    "getScheme": lambda u: _str(_url_parts(u).scheme),
    "getHost": lambda u: _str(_url_parts(u).netloc.rpartition("@")[2]),
    "getHostname": lambda u: _str(_url_parts(u).hostname or ""),
    "getPort": lambda u: _str(str(_url_parts(u).port or "")),
    "getEscapedPath": lambda u: _str(_url_parts(u).path),
    "getQuery": lambda u: celtypes.MapType({_str(k): celtypes.ListType([_str(v) for v in vs]) for k, vs in
                                            __import__("urllib.parse").parse.parse_qs(_url_parts(u).query).items()}),
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "compareTo": lambda a, b: celtypes.IntType((_q(a) > _q(b)) - (_q(a) < _q(b))),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_q(a) > _q(b)),
    "isLessThan": lambda a, b: celtypes.BoolType(_q(a) < _q(b)),
    "asInteger": lambda a: celtypes.IntType(int(_q(a))),
    "asApproximateFloat": lambda a: celtypes.DoubleType(float(_q(a))),
    "sign": lambda a: celtypes.IntType((_q(a) > 0) - (_q(a) < 0)),
    "add": lambda a, b: _q_new(_q(a) + (_q(b) if isinstance(b, celtypes.MapType) else int(b))),
    "sub": lambda a, b: _q_new(_q(a) - (_q(b) if isinstance(b, celtypes.MapType) else int(b))),
}
