"""A celpy runner that evaluates an expression as Python compiled from it (celpy's Transpiler,
with labkit's own code for the constructs below), giving exactly what celpy's tree-walking
InterpretedRunner gives: the same value, or the same error.

Why not celpy's CompiledRunner: its generated code names every function `<module>.<qualname>`,
which resolves only for celpy's own functions (labkit's are not found, and closures do not
compile); its evaluate() stores the activation and the result in celpy.evaluation's module
globals, shared by the API server's request threads; and its Python differs from the interpreter
wherever something fails (errors become Python exceptions with other texts, `e.f` on null is an
AttributeError, both branches of `?:` are evaluated, ...).

How exactness is kept: the compiled code is a fast path for evaluations in which nothing fails.
Every function is bound to a generated name in a globals dict of the program's own (copied for
each evaluation, so threads share none), and a call whose result is an error value raises.
Where nothing raises, every node computed what the interpreter computes for it (the same
functions on the same values, `e.f`, identifiers, `has(e.f)`, `?:` and the macros written here as
celpy's Evaluator does them: Evaluator.member_dot, primary, macro_has_eval, expr,
member_dot_arg). When anything raises, or the variables hold an error value, the evaluation is
done again by the interpreter, whose result (an error text, or a value where CEL absorbs an
error, as in `true || error`) is the one given. An expression is interpreted always when the
transpiler cannot handle it (it raises while transpiling, or its Python does not compile) or when
it uses a construct written for the interpreter only: message construction (`T{f: v}`),
leading-dot names (`.name`), the `reduce` and `min` macros, `has()` of anything but a field
selection, and `dyn()` with other than one argument.
"""

from __future__ import annotations

import builtins
import types
from functools import reduce

import celpy
import celpy.evaluation as evaluation
from celpy import celtypes

CELEvalError = celpy.CELEvalError


class _Untranspilable(Exception):
    """An expression the compiled path does not take: it is interpreted."""


class _Failed(Exception):
    """Something failed in the compiled path: the evaluation is done by the interpreter."""


# -- the generated code's helpers: each the interpreter's handling of a node where nothing fails ----

def _call(activation, expression):
    """In place of celpy.evaluation.result: exceptions are not turned into error values."""
    return expression(activation)


def _ident(activation, name):
    # Evaluator.primary (ident) -> ident_value -> Activation.resolve_variable; a KeyError is an error
    return activation.resolve_variable(name)


def _dot(member, name):
    # Evaluator.member_dot: a map's (not a message's) entry; everything else is an error
    if type(member) is not celtypes.MapType:
        raise _Failed("field selection of a non-map")
    return member[name]


def _has_field(member, name):
    # Evaluator.macro_has_eval of `e.f`: false where member_dot gives an error
    if type(member) is not celtypes.MapType:
        raise _Failed("has() of a non-map")
    try:
        member[name]
    except KeyError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _ternary(func, activation, cond, left, right):
    # Evaluator.expr: only the branch taken is evaluated; the other is given as false
    cond_value = cond(activation)
    left_value = right_value = celtypes.BoolType(False)
    if cond_value:
        left_value = left(activation)
    else:
        right_value = right(activation)
    return func(cond_value, left_value, right_value)


def _map(pairs):
    # Evaluator.mapinits: a duplicate key is an error
    result = celtypes.MapType()
    for key, value in pairs:
        if key in result:
            raise _Failed("duplicate key")
        result[key] = value
    return result


def _nested(activation, name, value):
    return activation.nested_activation(vars={name: value})


def _interpret(tree, activation):
    """The interpreter's Result for one node (a value or an error value), in the activation the
    compiled code reached it with: what Evaluator.visit_children gives its parent."""
    return evaluation.Evaluator(ast=tree, activation=activation).visit(tree)


def _side(activation, fast, tree):
    """An operand of `||` or `&&`: compiled, or where that fails, interpreted."""
    try:
        return fast(activation)
    except Exception:       # noqa: BLE001 - the interpreter's Result for the operand
        return _interpret(tree, activation)


def _logic(func, activation, left, left_tree, right, right_tree):
    # Evaluator.conditionalor / conditionaland: both operands, each a value or an error value
    left_value = _side(activation, left, left_tree)
    right_value = _side(activation, right, right_tree)
    try:
        return _checked(func(left_value, right_value))
    except TypeError:
        raise _Failed("no overload") from None


def _macro(macro, activation, member, name, expression, tree):
    # Evaluator.member_dot_arg's macros, each element's expression evaluated in a nested activation
    def sub(value):
        return _checked(expression(_nested(activation, name, value)))

    def short_circuit_sub(value):
        # build_ss_macro_eval: an element's error is a value
        nested = _nested(activation, name, value)
        try:
            return expression(nested)
        except Exception:       # noqa: BLE001 - the interpreter's, with its errors as values
            try:
                result = _interpret(tree, nested)
            except CELEvalError as exc:
                return exc
            return result

    def combine(func):
        def call(a, b):
            try:
                return func(a, b)
            except TypeError:
                raise _Failed("no overload") from None
        return call

    if macro == "map":
        return celtypes.ListType(map(sub, member))
    if macro == "filter":
        return celtypes.ListType(filter(sub, member))
    if macro == "all":
        return _checked(reduce(combine(celtypes.logical_and), map(short_circuit_sub, member),
                               celtypes.BoolType(True)))
    if macro == "exists":
        return _checked(reduce(combine(celtypes.logical_or), map(short_circuit_sub, member),
                               celtypes.BoolType(False)))
    if macro == "exists_one":
        return celtypes.BoolType(sum(1 for value in member if bool(sub(value))) == 1)
    raise _Failed(f"macro {macro}")


def _checked(value):
    if isinstance(value, CELEvalError):
        raise _Failed("an error value")
    return value


def _bound(func):
    """A function as the compiled path calls it: an error value it returns is a failure."""
    def call(*args):
        value = func(*args)
        if isinstance(value, CELEvalError):
            raise _Failed("an error value")
        return value
    return call


_CELPY = types.SimpleNamespace(celtypes=celtypes, evaluation=types.SimpleNamespace(result=_call))
_BASE_GLOBALS = {"__builtins__": builtins, "celpy": _CELPY, "_labkit_ident": _ident, "_labkit_dot": _dot,
                 "_labkit_has_field": _has_field, "_labkit_ternary": _ternary, "_labkit_map": _map,
                 "_labkit_macro": _macro, "_labkit_logic": _logic}
_MACROS = {"map", "filter", "all", "exists", "exists_one"}


# -- the transpiler ----------------------------------------------------------------------------------

def _single(tree, kind):
    """The `kind` node a chain of one-child nodes leads to, or None."""
    while getattr(tree, "data", None) != kind:
        if not hasattr(tree, "children") or len(tree.children) != 1:
            return None
        tree = tree.children[0]
    return tree


class _Phase1(evaluation.Phase1Transpiler):
    """celpy's first phase, with functions bound by generated names and labkit's code for the
    constructs where celpy's Python differs from its interpreter."""

    def __init__(self, facade, bound: dict):
        super().__init__(facade)
        self.bound = bound
        self.names: dict[str, str] = {}

    def func_name(self, label: str) -> str:
        name = self.names.get(label)
        if name is None:
            try:
                func = self.activation.resolve_function(label)
            except KeyError:
                raise _Untranspilable(f"unbound function {label}") from None
            name = self.names[label] = f"_labkit_fn_{len(self.names)}"
            self.bound[name] = _bound(func)
        return name

    def raw_func(self, label: str) -> str:
        """A function's generated name, bound to the function itself (its errors handled by the caller)."""
        try:
            func = self.activation.resolve_function(label)
        except KeyError:
            raise _Untranspilable(f"unbound function {label}") from None
        name = f"_labkit_raw_{len(self.bound)}"
        self.bound[name] = func
        return name

    def tree_name(self, tree) -> str:
        name = f"_labkit_tree_{len(self.bound)}"
        self.bound[name] = tree
        return name

    def conditionalor(self, tree, label="_||_") -> None:
        if len(tree.children) != 2:
            return super().conditionalor(tree)
        left, right = tree.children
        tree.transpiled = (f"_labkit_logic({self.raw_func(label)}, activation, lambda activation: {left.transpiled}, "
                           f"{self.tree_name(left)}, lambda activation: {right.transpiled}, {self.tree_name(right)})")

    def conditionaland(self, tree) -> None:
        if len(tree.children) != 2:
            return super().conditionaland(tree)
        return self.conditionalor(tree, "_&&_")

    def expr(self, tree) -> None:
        if len(tree.children) != 3:
            return super().expr(tree)
        cond, left, right = (c.transpiled for c in tree.children)
        func = self.func_name("_?_:_")
        tree.transpiled = (f"_labkit_ternary({func}, activation, lambda activation: {cond}, "
                           f"lambda activation: {left}, lambda activation: {right})")

    def ident(self, tree) -> None:
        tree.transpiled = f"_labkit_ident(activation, {str(tree.children[0].value)!r})"

    def member_dot(self, tree) -> None:
        member, name = tree.children
        tree.transpiled = f"_labkit_dot({member.transpiled}, {str(name.value)!r})"

    def member_dot_arg(self, tree) -> None:
        name = str(tree.children[1].value)
        if name in ("reduce", "min"):
            raise _Untranspilable(f"the {name} macro")
        if name not in _MACROS:
            return super().member_dot_arg(tree)
        if len(tree.children) != 3 or len(tree.children[2].children) != 2:
            raise _Untranspilable(f"{name} without a variable and an expression")
        variable, expression = tree.children[2].children
        idents = list(variable.find_data("ident"))
        if len(idents) != 1:
            raise _Untranspilable(f"{name} without one variable")
        bind = str(idents[0].children[0].value)
        tree.transpiled = (f"_labkit_macro({name!r}, activation, {tree.children[0].transpiled}, {bind!r}, "
                           f"lambda activation: {expression.transpiled}, {self.tree_name(expression)})")

    def ident_arg(self, tree) -> None:
        op = str(tree.children[0].value)
        if op == "has":
            arg = tree.children[1].children if len(tree.children) == 2 else []
            field = _single(arg[0], "member_dot") if len(arg) == 1 else None
            if field is None:
                raise _Untranspilable("has() of other than a field selection")
            member, name = field.children
            tree.transpiled = f"_labkit_has_field({member.transpiled}, {str(name.value)!r})"
            return None
        if op == "dyn" and (len(tree.children) != 2 or len(tree.children[1].children) != 1):
            raise _Untranspilable("dyn() with other than one argument")
        return super().ident_arg(tree)

    def map_lit(self, tree) -> None:
        inits = tree.children[0].transpiled if tree.children else ""
        tree.transpiled = f"_labkit_map([{inits}])"

    def member_object(self, tree) -> None:
        raise _Untranspilable("message construction")

    def dot_ident(self, tree) -> None:
        raise _Untranspilable("a leading-dot name")

    dot_ident_arg = dot_ident


class _Transpiled:
    """The code object and globals of one expression."""

    def __init__(self, ast, activation):
        bound: dict = {}
        facade = evaluation.Transpiler(ast=ast, activation=activation)
        _Phase1(facade, bound).visit(ast)
        phase_2 = evaluation.Phase2Transpiler(facade)
        phase_2.visit(ast)
        self.source_text = "\n".join(phase_2.statements(ast))
        self.code = compile(self.source_text, "<cel>", "exec")
        self.globals = {**_BASE_GLOBALS, **bound}


def _holds_error(context) -> bool:
    """Whether an error value is among the variables (a `variables` entry that failed)."""
    for value in context.values():
        if isinstance(value, CELEvalError):
            return True
        if type(value) is celtypes.MapType and any(isinstance(v, CELEvalError) for v in value.values()):
            return True
    return False


class CompiledRunner(celpy.InterpretedRunner):
    """Compiled where nothing fails, else celpy's interpreter (the base class)."""

    tree_node_class = evaluation.TranspilerTree

    def __init__(self, environment, ast, functions=None):
        super().__init__(environment, ast, functions)
        self.transpiled: _Transpiled | None = None
        if not isinstance(ast, evaluation.TranspilerTree):
            return
        self.base_activation = self.new_activation()
        try:
            self.transpiled = _Transpiled(ast, self.base_activation)
        except Exception:       # noqa: BLE001 - whatever the transpiler cannot do is interpreted
            self.transpiled = None

    def evaluate(self, context):
        if self.transpiled is None or _holds_error(context):
            return super().evaluate(context)
        activation = self.base_activation.clone()
        activation.identifiers.load_values(context)
        scope = self.transpiled.globals.copy()
        scope["base_activation"] = activation
        try:
            exec(self.transpiled.code, scope)
        except Exception:       # noqa: BLE001 - anything that fails is the interpreter's to say
            return super().evaluate(context)
        return _checked_result(scope["CEL"], self, context)


def _checked_result(value, runner, context):
    if isinstance(value, CELEvalError):
        return celpy.InterpretedRunner.evaluate(runner, context)
    return value
