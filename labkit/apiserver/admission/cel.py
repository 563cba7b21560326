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

Optional values (cel-go's OptionalTypes, which the Kubernetes environments enable): `x.?field`,
`x[?key]`, `optional.of(v)`, `optional.none()`, `hasValue()`, `value()`, `orValue(default)`; cel-python
has no such syntax, so the expression is rewritten into calls of this module's functions before
it is parsed. What API validation refuses at creation is `compile_problem`'s.

Errors read as cel-go's: `no such key: <key>`, `no such overload`, `division by zero`; an
evaluation error of an expression reads `expression '<expr>' resulted in error: <error>`
(activation.go, Evaluate).
"""

from __future__ import annotations

import ast
import functools
import re
import threading
from collections import OrderedDict
from urllib.parse import urlsplit

import celpy
from celpy import celtypes

from labkit import quantity as quantities
from labkit.apiserver.admission.celrunner import CompiledRunner


class EvaluationError(Exception):
    """An expression failed to compile or evaluate (its message is upstream's)."""


# expressions run as Python compiled from them where that gives the interpreter's results exactly
# (celrunner.py), else on celpy's interpreter
_env = celpy.Environment(runner_class=CompiledRunner)
_lock = threading.Lock()


@functools.lru_cache(maxsize=2048)
def _compiled(expression: str, interpreted: bool = False):
    """The program of an expression; `interpreted`: on celpy's InterpretedRunner alone."""
    with _lock:
        tree = _env.compile(_optional_syntax(expression))
        if interpreted:
            return celpy.InterpretedRunner(_env, tree, FUNCTIONS)
        return _env.program(tree, functions=FUNCTIONS)


def compile_problem(expression: str, returns: str | None = None) -> str | None:
    """What API validation refuses in an expression, as staging/src/k8s.io/apiserver/pkg/admission/
    plugin/cel/compile.go CompileCELExpression words it, or None: a syntax error (`compilation
    failed: ...`), an invalid regular expression literal given to matches() (cel-go's
    ValidateRegexLiterals, one of the AST validators k8s.io/apiserver/pkg/cel/environment/base.go
    enables: `invalid matches argument`), and, when `returns` names the type the field needs
    (ValidationCondition and MatchCondition: bool), an expression whose type is known to be another
    (`must evaluate to bool but got int`). The type is inferred from literals, operators and the
    library's functions; whatever depends on the objects is dyn, as upstream's admission
    environment declares them, and passes."""
    try:
        tree = _env.compile(_optional_syntax(expression))
    except celpy.CELParseError as exc:
        return f"compilation failed: ERROR: <input>: Syntax error: {_first_line(str(exc))}"
    issues = [_issue(expression, offset, "invalid matches argument") for offset in _bad_regex_literals(tree)]
    if issues:
        return "compilation failed: " + "\n".join(issues)
    if returns is not None:
        found = _static_type(tree)
        if found is not None and found != returns:
            return f"must evaluate to {returns} but got {found}"
    return None


def _issue(expression: str, offset: int, message: str) -> str:
    """cel-go's Error.ToDisplayString: the 1-based line and column, the line and a caret under it."""
    line_no = expression.count("\n", 0, offset) + 1
    start = expression.rfind("\n", 0, offset) + 1
    column = offset - start
    line = expression.split("\n")[line_no - 1].replace("\t", " ")
    return f"ERROR: <input>:{line_no}:{column + 1}: {message}\n | {line}\n | {'.' * column}^"


# -- optional values (cel-go's OptionalTypes, on in the Kubernetes environments since 1.28) ------------
# cel-python has no optional syntax: `x.?field`, `x[?key]`, `optional.of(v)` and `optional.none()`
# are rewritten, outside string literals, into calls of the functions below; the resulting value
# answers hasValue(), value(), orValue(default) and further optional selections.

_OPTIONAL_FIELD = re.compile(r"\.\?\s*([_a-zA-Z][_a-zA-Z0-9]*)")


def _optional_syntax(expression: str) -> str:
    if "?" not in expression and "optional." not in expression:
        return expression
    out, i, brackets = [], 0, []
    n = len(expression)
    while i < n:
        c = expression[i]
        if c in "\"'":
            end = _string_end(expression, i)
            out.append(expression[i:end])
            i = end
            continue
        m = _OPTIONAL_FIELD.match(expression, i)
        if m and not _after_number(expression, i):
            out.append(f'._opt_field("{m.group(1)}")')
            i = m.end()
            continue
        if c == "[":
            j = i + 1
            while j < n and expression[j].isspace():
                j += 1
            optional = j < n and expression[j] == "?"
            brackets.append(optional)
            out.append("._opt_index(" if optional else "[")
            i = j + 1 if optional else i + 1
            continue
        if c == "]" and brackets:
            out.append(")" if brackets.pop() else "]")
            i += 1
            continue
        for word, call in (("optional.of(", "_optional_of("), ("optional.none(", "_optional_none("),
                           ("optional.ofNonZeroValue(", "_optional_of_non_zero(")):
            if expression.startswith(word, i) and (i == 0 or not (expression[i - 1].isalnum()
                                                                  or expression[i - 1] in "_.")):
                out.append(call)
                i += len(word)
                break
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _string_end(text: str, i: int) -> int:
    """The index after the string literal starting at text[i] (a quote)."""
    raw = i > 0 and text[i - 1] in "rR"
    quote = text[i] * 3 if text.startswith(text[i] * 3, i) else text[i]
    j = i + len(quote)
    while j < len(text):
        if not raw and text[j] == "\\":
            j += 2
            continue
        if text.startswith(quote, j):
            return j + len(quote)
        j += 1
    return len(text)


def _after_number(text: str, i: int) -> bool:
    """`1.?a:b` is a float literal in a conditional, not an optional selection."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_"):
        j -= 1
    return text[j:i].isdigit()


class Optional:
    """cel-go's optional_type value."""

    def __init__(self, value=None, present: bool = False):
        self.value, self.present = value, present

    def __eq__(self, other):
        return isinstance(other, Optional) and (self.present, self.value) == (other.present, other.value)

    def __hash__(self):
        return hash(self.present)

    def __repr__(self):
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


NONE = Optional()


def _opt_field(target, name):
    if isinstance(target, Optional):
        return _opt_field(target.value, name) if target.present else NONE
    if isinstance(target, celtypes.MapType):
        key = celtypes.StringType(name)
        return Optional(target[key], True) if key in target else NONE
    raise TypeError("no such overload")


def _opt_index(target, key):
    if isinstance(target, Optional):
        return _opt_index(target.value, key) if target.present else NONE
    if isinstance(target, celtypes.MapType):
        return Optional(target[key], True) if key in target else NONE
    if isinstance(target, celtypes.ListType):
        return Optional(target[int(key)], True) if 0 <= int(key) < len(target) else NONE
    raise TypeError("no such overload")


def _optional_only(fn):
    def call(target, *args):
        if not isinstance(target, Optional):
            raise TypeError("no such overload")
        return fn(target, *args)
    return call


def _value(opt: Optional):
    if not opt.present:
        raise ValueError("optional.none() dereference")
    return opt.value


def _is_zero(value) -> bool:
    return value is None or not value


OPTIONAL_FUNCTIONS = {
    "_opt_field": _opt_field,
    "_opt_index": _opt_index,
    "_optional_of": lambda value: Optional(value, True),
    "_optional_none": lambda: NONE,
    "_optional_of_non_zero": lambda value: NONE if _is_zero(value) else Optional(value, True),
    "hasValue": _optional_only(lambda o: celtypes.BoolType(o.present)),
    "value": _optional_only(_value),
    "orValue": _optional_only(lambda o, default: o.value if o.present else default),
}


# -- what API validation sees without evaluating -----------------------------------------------------

_PASS_THROUGH = {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
                 "member", "primary", "paren_expr"}
_LITERAL_TYPES = {"INT_LIT": "int", "UINT_LIT": "uint", "FLOAT_LIT": "double", "STRING_LIT": "string",
                  "MLSTRING_LIT": "string", "BYTES_LIT": "bytes", "BOOL_LIT": "bool", "NULL_LIT": "null_type"}
# the result types of the standard and Kubernetes library functions whose result does not depend
# on their arguments' types
_CALL_TYPES = {"size": "int", "int": "int", "uint": "uint", "double": "double", "string": "string",
               "bytes": "bytes", "bool": "bool", "has": "bool", "matches": "bool", "startsWith": "bool",
               "endsWith": "bool", "contains": "bool", "all": "bool", "exists": "bool", "exists_one": "bool",
               "isSorted": "bool", "isURL": "bool", "isQuantity": "bool", "hasValue": "bool",
               "isGreaterThan": "bool", "isLessThan": "bool", "lowerAscii": "string", "upperAscii": "string",
               "trim": "string", "replace": "string", "substring": "string", "charAt": "string",
               "join": "string", "indexOf": "int", "lastIndexOf": "int", "compareTo": "int", "sign": "int",
               "asInteger": "int", "asApproximateFloat": "double", "getScheme": "string", "getHost": "string",
               "getHostname": "string", "getPort": "string", "getEscapedPath": "string", "find": "string"}


def _unwrap(tree):
    while hasattr(tree, "data") and tree.data in _PASS_THROUGH and len(tree.children) == 1 \
            and hasattr(tree.children[0], "data"):
        tree = tree.children[0]
    return tree


def _static_type(tree) -> str | None:
    """The type cel-go's checker gives the expression when it does not depend on a dyn variable
    (formatted as *cel.Type's String()), or None."""
    tree = _unwrap(tree)
    kind, children = tree.data, tree.children
    if kind == "expr" and len(children) == 3:               # a ? b : c
        a, b = _static_type(children[1]), _static_type(children[2])
        return a if a == b else None
    if kind in ("conditionalor", "conditionaland") and len(children) == 2:
        return "bool"
    # celpy's tree: relation(relation_gt(left), right), addition(addition_add(left), right), ...
    if kind == "relation" and len(children) == 2:            # <, <=, >, >=, ==, !=, in
        return "bool"
    if kind in ("addition", "multiplication") and len(children) == 2:
        left, right = _static_type(children[0].children[0]), _static_type(children[1])
        return left if left == right else None               # the same type on both sides, or dyn
    if kind == "unary" and len(children) == 2:
        op = getattr(children[0], "data", "")
        return "bool" if op == "unary_not" else _static_type(children[1])
    if kind == "primary" and len(children) == 1:
        return _static_type(children[0])
    if kind == "literal":
        return _LITERAL_TYPES.get(children[0].type)
    if kind == "list_lit":
        elements = children[0].children if children else []
        types = {_static_type(e) for e in elements}
        if not elements:
            return None
        return f"list({types.pop()})" if len(types) == 1 and None not in types else "list(dyn)"
    if kind == "map_lit":
        inits = children[0].children if children else []
        keys, values = {_static_type(k) for k in inits[0::2]}, {_static_type(v) for v in inits[1::2]}
        if not inits:
            return None
        key = keys.pop() if len(keys) == 1 and None not in keys else "dyn"
        value = values.pop() if len(values) == 1 and None not in values else "dyn"
        return f"map({key}, {value})"
    if kind in ("ident_arg", "member_dot_arg"):
        name = children[0 if kind == "ident_arg" else 1]
        return _CALL_TYPES.get(str(name))
    return None


def _string_value(token) -> str | None:
    text = str(token)
    raw = text[0] in "rR"
    body = text[1:] if raw else text
    quote = body[:3] if body[:3] in ('"""', "'''") else body[0]
    body = body[len(quote):-len(quote)]
    if raw:
        return body
    try:
        return ast.literal_eval(quote + body + quote)
    except (ValueError, SyntaxError):
        return None


# constructs Python's re accepts and RE2 (Go's regexp) refuses
_NOT_RE2 = re.compile(r"\(\?(?:=|!|<=|<!)|\\[1-9]|[*+?}]\+")


def _bad_regex_literals(tree) -> list[int]:
    """The offsets of string literals given to matches() as the pattern that RE2 would refuse."""
    bad = []
    for node in tree.iter_subtrees_topdown():
        if node.data == "member_dot_arg" and str(node.children[1]) == "matches" and len(node.children) > 2:
            args = node.children[2].children[:1]
        elif node.data == "ident_arg" and str(node.children[0]) == "matches" and len(node.children) > 1:
            args = node.children[1].children[1:2]
        else:
            continue
        for arg in args:
            literal = _unwrap(arg)
            if literal.data != "literal" or literal.children[0].type not in ("STRING_LIT", "MLSTRING_LIT"):
                continue
            pattern = _string_value(literal.children[0])
            if pattern is None:
                continue
            try:
                re.compile(pattern)
                ok = not _NOT_RE2.search(pattern)
            except re.error:
                ok = False
            if not ok:
                bad.append(literal.children[0].start_pos)
    return bad


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


# evaluate's results by (expression, the caller's name for the activation's data), least recently
# used first: a celpy value, or the EvaluationError's message
_RESULTS: OrderedDict[tuple[str, str], tuple[bool, object]] = OrderedDict()
_RESULTS_MAX = 20000
_RESULTS_LOCK = threading.Lock()


def evaluate(expression: str, activation: dict | Activation, memo: str | None = None):
    """The value of an expression (a celpy value), or EvaluationError.

    With `memo`, a string the caller gives only to activations holding the same data (the JSON of
    the objects, the request, params, namespace and the variables' expressions), the result is kept
    and given again for the same expression and memo: CEL expressions here are functions of their
    activation alone (no clock, no authorizer). labkit's reconstruction asks the same expressions
    about the same requests under policies that differ in one other part (a near-miss of a policy,
    another binding); values are shared, and callers only read them."""
    if memo is None:
        return _evaluate(expression, activation)
    key = (expression, memo)
    with _RESULTS_LOCK:
        found = _RESULTS.get(key)
        if found is not None:
            _RESULTS.move_to_end(key)
    if found is None:
        try:
            found = (True, _evaluate(expression, activation))
        except EvaluationError as exc:
            found = (False, str(exc))
        with _RESULTS_LOCK:
            _RESULTS[key] = found
            if len(_RESULTS) > _RESULTS_MAX:
                _RESULTS.popitem(last=False)
    ok, value = found
    if not ok:
        raise EvaluationError(value)
    return value


def _evaluate(expression: str, activation: dict | Activation, interpreted: bool = False):
    if isinstance(activation, Activation):
        activation = activation.values()
    try:
        program = _compiled(expression, interpreted)
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


class Activation:
    """What one request's expressions see (activation.go newActivation): its celpy values are made
    when an expression is first evaluated, not when evaluate's memo gives every result."""

    def __init__(self, attrs, rt, params=None, namespace: dict | None = None):
        self._source = (attrs, rt, params, namespace)
        self._values: dict | None = None
        self.variables: dict = {}       # the composited variables so far: name -> celpy value or error

    def values(self) -> dict:
        if self._values is None:
            attrs, rt, params, namespace = self._source
            self._values = {
                "object": to_cel(attrs.obj),
                "oldObject": to_cel(attrs.old),
                "request": to_cel(attrs.admission_request(rt)),
                "params": to_cel(params),
                "namespaceObject": to_cel(namespace_object(namespace)),
            }
        self._values["variables"] = celtypes.MapType(self.variables)
        return self._values


def add_variables(act: Activation, variables: list[dict], memo: str | None = None) -> None:
    """composition.go: each variable in order, able to use the ones before it; an error is kept as
    the variable's value and surfaces in the expressions that use it. `memo`: evaluate's, naming
    the activation's data and every variable's expression."""
    for index, variable in enumerate(variables or []):
        try:
            # the variables before this one only: a memo of its own
            value = evaluate(variable.get("expression", ""), act, None if memo is None else f"{index} {memo}")
        except EvaluationError as exc:
            value = celpy.CELEvalError(str(exc))
        act.variables[celtypes.StringType(variable.get("name", ""))] = value


def match_conditions(conditions: list[dict], attrs, rt, failure_policy: str = "Fail",
                     act: Activation | None = None, memo: str | None = None) -> bool:
    """matchconditions.Matcher.Match: any condition false -> no match; otherwise errors follow the
    failure policy (Fail: an error, Ignore: no match). `memo`: evaluate's."""
    act = act if act is not None else Activation(attrs, rt)
    errors = []
    for condition in conditions:
        try:
            value = evaluate(condition.get("expression", ""), act, memo)
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


# -- equality: cel-go's heterogeneous equality ----------------------------------------------------------
# cel-go (v0.26, which v1.34 vendors) evaluates `==` as common/types' Equal (null equals only null,
# else lhs.Equal(rhs)) and `!=` as its negation (interpreter/interpretable.go
# evalEq, evalNe: an operand that is an error or unknown is the result). The values' Equal methods
# compare across types without an error: numbers by value (int, uint and double; NaN equals
# nothing), lists and maps element by element, and values of different kinds are unequal
# (common/types: Int.Equal, Double.Equal, baseList.Equal, baseMap.Equal). The objects are plain maps
# there (the admission activation hands them to CEL unstructured, declared dyn), so `object != null`
# and `oldObject.spec != null` are true or false, never an error; celpy raises no-such-overload for
# a map or list compared with anything else.

def _null(value) -> bool:
    return value is None or isinstance(value, celtypes.NullType)


_BOOLS = (bool, celtypes.BoolType)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, _BOOLS)


def _plain(number):
    return float(number) if isinstance(number, float) else int(number)


def cel_equal(a, b) -> bool:
    """types.Equal(a, b) == types.True (celpy's values are Python's: BoolType an int, StringType a
    str, ListType a list, MapType a dict; an operator's result may be the plain Python type)."""
    if _null(a) or _null(b):
        return _null(a) and _null(b)
    if isinstance(a, _BOOLS) or isinstance(b, _BOOLS):
        return isinstance(a, _BOOLS) and isinstance(b, _BOOLS) and bool(a) == bool(b)
    if _number(a) or _number(b):
        # Python compares int and float exactly, as compareIntDouble does; NaN equals nothing
        return _number(a) and _number(b) and _plain(a) == _plain(b)
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(cel_equal(x, y) for x, y in zip(a, b)))
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or len(a) != len(b):
            return False
        return all(k in b and cel_equal(v, b[k]) for k, v in a.items())
    for kind in (str, bytes):
        if isinstance(a, kind) or isinstance(b, kind):
            return isinstance(a, kind) and isinstance(b, kind) and kind(a) == kind(b)
    try:
        return type(a) is type(b) and bool(a == b)
    except TypeError:
        return False


def _equals(a, b):
    if isinstance(a, celpy.CELEvalError):
        return a
    if isinstance(b, celpy.CELEvalError):
        return b
    return celtypes.BoolType(cel_equal(a, b))


def _not_equals(a, b):
    if isinstance(a, celpy.CELEvalError):
        return a
    if isinstance(b, celpy.CELEvalError):
        return b
    return celtypes.BoolType(not cel_equal(a, b))


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
FUNCTIONS.update(OPTIONAL_FUNCTIONS)
FUNCTIONS.update({"_==_": _equals, "_!=_": _not_equals})
