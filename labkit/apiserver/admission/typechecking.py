"""The type checking of a ValidatingAdmissionPolicy's expressions, whose warnings the status
controller writes to the policy's `status.typeChecking` (k8s.io/apiserver v1.34
pkg/admission/plugin/policy/validating/typechecking.go, TypeChecker.Check; the controller:
labkit.controllers.vapstatus).

What upstream does: the kinds a policy's matchConstraints.resourceRules name without wildcards
(typesToCheck: groups, versions and resources without `*`, resources without `/`, at most 10
kinds, sorted by group, version, kind) are resolved to their OpenAPI schemas; each validation's
`expression` and `messageExpression` is compiled by cel-go with `object` and `oldObject` typed by
each kind's schema in turn and `params` by the paramKind's schema. Every compile issue becomes one
ExpressionWarning: fieldRef `spec.validations[i].expression` (or `.messageExpression`), warning
`<group>/<version>, Kind=<kind>: <cel-go issues>` and a newline for each kind with issues, joined
by newlines (TypeCheckingResult.String, TypeCheckingResults.String). cel-go prints an issue as
`ERROR: <input>:<line>:<column>: <message>`, then ` | ` and the expression's line, then ` | `,
one dot per character before the column and `^` (common/errors.go ToDisplayString).

What labkit reconstructs, with its own knowledge of kinds (labkit.apiserver.models for the
built-in kinds, a CRD's structural schema for custom resources): the issue `undefined field
'<name>'` where a chain of field selections `object.a.b`, `oldObject.a.b` or `params.a.b`
(`.?name` too, and inside has()) names a field the type does not have. The chain is followed
through structs; a map's values and a list, scalar or schemaless value end it.

Not covered (no warning where upstream may give one): type mismatches and overloads
(`no matching overload for '_>_'`), selections on lists or scalars (`does not support field
selection`), selections after an index (`object.spec.containers[0].foo`), inside macros on their
iteration variables, and on `variables.<name>`; a macro variable named like a root variable is
taken for it.
"""

from __future__ import annotations

from labkit.apiserver import schema

MAX_TYPES_TO_CHECK = 10         # typechecking.go maxTypesToCheck
ROOTS = ("object", "oldObject", "params")


# -- the kinds to check ----------------------------------------------------------------------

def types_to_check(policy: dict, catalog) -> list:
    """typesToCheck: the ResourceTypes of the rules' exact group/version/resource triples."""
    found: dict[tuple[str, str, str], object] = {}
    rules = ((policy.get("spec") or {}).get("matchConstraints") or {}).get("resourceRules") or []
    count = 0
    for rule in rules:
        groups = rule.get("apiGroups") or []
        versions = rule.get("apiVersions") or []
        if any("*" in g for g in groups) or any("*" in v for v in versions):
            continue
        resources = sorted(r for r in rule.get("resources") or [] if "*" not in r and "/" not in r)
        for group in sorted(groups):
            for version in sorted(versions):
                for resource in resources:
                    rt = catalog.lookup(group, version, resource)
                    if rt is None:
                        continue
                    found[(rt.group, rt.version, rt.kind)] = rt
                    count += 1
                    if count == MAX_TYPES_TO_CHECK:
                        return [found[k] for k in sorted(found)]
    return [found[k] for k in sorted(found)]


def param_type(policy: dict, catalog):
    """The ResourceType of spec.paramKind, or None (params is then untyped)."""
    kind = (policy.get("spec") or {}).get("paramKind") or {}
    api_version, name = kind.get("apiVersion") or "", kind.get("kind") or ""
    if not api_version or not name:
        return None
    group, _, version = api_version.rpartition("/")
    for rt in catalog.all():
        if (rt.group, rt.version, rt.kind) == (group, version, name):
            return rt
    return None


def root_node(rt) -> schema.Node:
    if rt.strategy.builtin:
        return schema.for_model(rt.model)
    return schema.CustomResourceNode(getattr(rt.strategy, "schema", None) or {})


def gvk_string(rt) -> str:
    """schema.GroupVersionKind.String()."""
    return f"{rt.group}/{rt.version}, Kind={rt.kind}"


# -- the expression --------------------------------------------------------------------------

def _tokens(expression: str) -> list[tuple[str, str, int]]:
    """(kind, text, offset) of identifiers, `.`, `.?`, `(` and everything else, string literals
    skipped."""
    out: list[tuple[str, str, int]] = []
    i, n = 0, len(expression)
    while i < n:
        ch = expression[i]
        if ch in "\"'" or (ch in "rRbB" and i + 1 < n and expression[i + 1] in "\"'"):
            start = i
            if ch not in "\"'":
                i += 1
            quote = expression[i]
            triple = expression[i:i + 3] == quote * 3
            end = quote * 3 if triple else quote
            i += len(end)
            raw = expression[start] in "rR"
            while i < n and not expression.startswith(end, i):
                i += 2 if expression[i] == "\\" and not raw else 1
            i += len(end)
            out.append(("string", expression[start:i], start))
        elif ch.isalpha() or ch == "_":
            start = i
            while i < n and (expression[i].isalnum() or expression[i] == "_"):
                i += 1
            out.append(("ident", expression[start:i], start))
        elif ch == "." and i + 1 < n and expression[i + 1] == "?":
            out.append(("select", ".?", i))
            i += 2
        elif ch == "." and not (i + 1 < n and expression[i + 1].isdigit()):
            out.append(("select", ".", i))
            i += 1
        elif ch.isspace():
            i += 1
        else:
            out.append(("other", ch, i))
            i += 1
    return out


def _known(node: schema.Node, name: str) -> bool | None:
    """Whether a struct has the field (None: not a struct whose fields are known)."""
    if isinstance(node, schema.ModelNode):
        return name in node.model.fields
    if isinstance(node, schema.SchemaNode) and node.kind == "struct":
        if node.schema.get("x-kubernetes-preserve-unknown-fields"):
            return None
        if isinstance(node, schema.CustomResourceNode) and name in ("apiVersion", "kind", "metadata"):
            return True
        return name in (node.schema.get("properties") or {})
    return None


def undefined_fields(expression: str, roots: dict[str, schema.Node]) -> list[tuple[int, str]]:
    """(offset of the `.`, field name) of each selection of a field its type does not have."""
    tokens = _tokens(expression)
    found = []
    for t, (kind, text, _) in enumerate(tokens):
        if kind != "ident" or text not in roots or (t and tokens[t - 1][0] == "select"):
            continue
        node = roots[text]
        k = t + 1
        while k + 1 < len(tokens) and tokens[k][0] == "select" and tokens[k + 1][0] == "ident":
            name = tokens[k + 1][1]
            if k + 2 < len(tokens) and tokens[k + 2][1] == "(":
                break                       # a method call (x.all(...), x.orValue(...)), not a field
            known = _known(node, name)
            if known is False:
                found.append((tokens[k][2], name))
                break
            if known is None:
                if node.kind != "map":
                    break
                node = node.elem            # a map's value, selected by key
            else:
                node = node.field(name)
            k += 2
    return found


def _display(expression: str, offset: int, message: str) -> str:
    """cel-go common/errors.go ToDisplayString, for a one-byte-per-character expression."""
    line = expression.count("\n", 0, offset) + 1
    start = expression.rfind("\n", 0, offset) + 1
    column = offset - start
    end = expression.find("\n", start)
    snippet = expression[start:end if end >= 0 else len(expression)].replace("\t", " ")
    return f"ERROR: <input>:{line}:{column + 1}: {message}\n | {snippet}\n | {'.' * column}^"


def check_expression(expression: str, roots: dict[str, schema.Node]) -> str:
    """cel-go's Issues.String() for the issues labkit finds (empty: none)."""
    return "\n".join(_display(expression, offset, f"undefined field '{name}'")
                     for offset, name in sorted(undefined_fields(expression, roots)))


def check(policy: dict, catalog) -> list[dict]:
    """TypeChecker.Check: the policy's ExpressionWarnings."""
    kinds = types_to_check(policy, catalog)
    params = param_type(policy, catalog)
    warnings = []
    for i, v in enumerate((policy.get("spec") or {}).get("validations") or []):
        for key in ("expression", "messageExpression"):
            expression = v.get(key) or ""
            if not expression:
                continue
            results = []
            for rt in kinds:
                roots = {"object": root_node(rt), "oldObject": root_node(rt)}
                if params is not None:
                    roots["params"] = root_node(params)
                issues = check_expression(expression, roots)
                if issues:
                    results.append(f"{gvk_string(rt)}: {issues}\n")
            if results:
                warnings.append({"fieldRef": f"spec.validations[{i}].{key}", "warning": "\n".join(results)})
    return warnings
