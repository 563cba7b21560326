"""CEL expressions evaluated as Python compiled from them (labkit/apiserver/admission/celrunner.py)
give what celpy's interpreter gives: the same value of the same type, or the same error text, for
every expression the labs and the tests use, over requests of many shapes; and evaluations on
several threads at once give each its own result."""

from __future__ import annotations

import ast
import functools
import importlib.util
import threading
from pathlib import Path

import celpy
import pytest
from celpy import celtypes

from labkit.apiserver.admission import cel
from labkit.requests.reconstruct import other_requests, pod_attributes

ROOT = Path(__file__).resolve().parent.parent
ADMISSION_NAMES = ("object", "oldObject", "request", "params", "namespaceObject", "variables")


def _parses(text: str) -> bool:
    try:
        cel._env.compile(cel._optional_syntax(text))
        return True
    except Exception:       # noqa: BLE001 - not CEL (prose, Python, a template)
        return False


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"celrunner_test_{path.stem.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _expressions() -> list[str]:
    """Every string literal in labs/*/ and tests/ that is a CEL expression reading the admission
    variables (or the value of an `expression`, `messageExpression` or `valueExpression` key), and
    the requests lab's image policy with each of its mutants' image tests."""
    found: set[str] = set()
    for path in sorted([*ROOT.glob("labs/*/**/*.py"), *ROOT.glob("labs/*/**/*.yaml"), *ROOT.glob("tests/*.py")]):
        if path.suffix == ".yaml":
            for line in path.read_text().splitlines():
                key, _, value = line.strip().lstrip("- ").partition(":")
                if key in ("expression", "messageExpression", "valueExpression") and value.strip():
                    found.add(value.strip().strip("'\""))
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and key.value in ("expression", "messageExpression",
                                                                       "valueExpression") \
                            and isinstance(value, ast.Constant) and isinstance(value.value, str):
                        found.add(value.value)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 2000 \
                    and any(name in node.value for name in ADMISSION_NAMES):
                found.add(node.value)
    solution = _module(ROOT / "labs/requests/solutions/image-tag-policy.py")
    mutants = ast.parse((ROOT / "labs/requests/mutants/image-tag-policy.py").read_text())
    tests = next(ast.literal_eval(n.value) for n in mutants.body
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "TESTS")
    for expression in solution.EXPRESSIONS:
        found.add(expression)
        found.add(f"request.operation != 'CREATE' || {expression}")
        found.update(expression.replace(solution.PINNED, test) for test in tests)
    return sorted(e for e in found if _parses(e))


# besides: literals, operators, macros, has(), ?:, optional values and the Kubernetes library,
# each where it succeeds and where something in it fails (an error absorbed by `||`, `&&`, all(),
# exists(), or surfacing)
EDGE = ["0x1F + 1", "1u + 2u", "1e3 > 2.5", "'a\\nb' + \"c\"", "b'abc'", "-9223372036854775808",
        "9223372036854775807 + 1", "{'a': 1, 'a': 2}", "[1, 2, 3].map(x, x * 2)", "[1, 2].exists_one(x, x > 1)",
        "[1, 'a'].all(x, x > 0)", "[0, 'a'].exists(x, x > 0)", "['a', 0].exists(x, x > 0)", "{'a': 1}.a", "has({'a': 1}.a)",
        "has({'a': 1}.b)", "true ? 1 : 1 / 0", "false ? 1 / 0 : 2", "1 / 0 > 1 || true", "true && 1 / 0 > 1",
        "false && 1 / 0 > 1", "1 / 0 > 1 && false", "size('abc')", "'abc'.size()", "dyn(1)", "type(1) == int",
        "int('12')", "x.y", "[1, 2][5]", "{'a': 1}['b']", "null == null", "optional.of(1).value()",
        "object.?spec.orValue(1)", "object[?'spec'].hasValue()", "[1, 2].filter(x, x > 1)", "'abc'.matches('^a')",
        "1 in [1, 2]", "'a' in {'a': 1}", "!true", "-(1)", "timestamp('2020-01-01T00:00:00Z')", "duration('1s')",
        "[[1]].map(x, x.map(y, y + 1))", "[1, 2, 3].all(x, x / 0 > 1)", "[1].all(x, false)", "[1, 0].all(x, 1 / x > 0)",
        "[0, 1].all(x, 1 / x > 0)", "[1, 0].exists(x, 1 / x > 0)", "[1].map(x, 1 / 0)", "has([1].map(x, 1 / 0)[0].a)",
        "string(1) + 'a'", "object.spec.containers[0].image", "object.spec.containers.map(c, c.name).join(',')",
        "object.spec.containers.all(c, has(c.securityContext) && c.securityContext.privileged == true)",
        "object.spec.containers.exists(c, c.securityContext.privileged)", "variables.b == 1 || true",
        "has(object.metadata.labels.app)", "has(object.nope.x)", "object.metadata.name.startsWith(1)",
        "[1, 2, 3].reduce(r, x, 0, r + x)", "[3, 1].min()", "{'a': 1}.map(k, k)", "'ab'.all(c, c != 'z')",
        "1 ? 2 : 3", "null.a", "has(null.a)", "request.userInfo.groups.exists(g, g == 'system:masters') ? 'a' : 1 / 0",
        "object == null ? 'deleted' : object.metadata.name", "oldObject != null && oldObject.metadata.name == 'x'",
        "[1, 2] == [1, 2.0]", "{'a': [1]} != {'a': [1]}", "quantity('1Gi').isGreaterThan(quantity('1G'))",
        "'a-b'.split('-').size() == 2 && 'x'.lowerAscii() == 'x'", "url('https://x/y').getHost()",
        "params.maxReplicas >= 1", "params == null || params.maxReplicas > 0", "namespaceObject.metadata.labels['environment']"]

@functools.cache
def expressions() -> list[str]:
    """Every expression the tests evaluate: found in the repository (read when a test asks, not at
    collection, where every test worker would read it) and the edge cases."""
    return sorted(set(_expressions()) | set(EDGE))

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web", "labels": {"app": "web", "tier": "frontend", "exempt": "true", "run": "web"},
                    "annotations": {"example.com/owner": "alice"}},
       "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "securityContext": {"privileged": True}},
                               {"name": "side", "image": "registry.example.com:5000/tools"},
                               {"name": "pinned", "image": "busybox@sha256:" + "a" * 64}],
                "initContainers": [{"name": "init", "image": "busybox"}],
                "ephemeralContainers": [{"name": "debugger", "image": "busybox:latest"}]}}
BARE_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
NAMESPACE = {"metadata": {"name": "web", "labels": {"kubernetes.io/metadata.name": "web", "environment": "test"}},
             "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
PARAMS = {"maxReplicas": 3, "allowed": ["nginx", "busybox"]}


def _activations() -> list[dict]:
    cases = [(pod_attributes("web", POD), PARAMS, NAMESPACE),
             (pod_attributes("shop", BARE_POD), None, None),
             (pod_attributes("kube-system", {**BARE_POD, "spec": {"containers": []}}, dry_run=True), None, NAMESPACE)]
    update = pod_attributes("web", POD, operation="UPDATE")
    update.old = BARE_POD
    cases.append((update, PARAMS, NAMESPACE))
    others = list(other_requests("shop", labels={"app": "web"}))
    cases += [(attrs, None, NAMESPACE) for attrs in others[::max(1, len(others) // 12)]]
    values = []
    for index, (attrs, params, namespace) in enumerate(cases):
        act = cel.Activation(attrs, attrs.rt, params, namespace)
        if index % 2 == 0:
            act.variables = {celtypes.StringType(k): cel.to_cel(v) for k, v in
                             {"environment": "test", "exempt": False, "containers": POD["spec"]["containers"],
                              "a": 1, "b": 1, "x": "web"}.items()}
        else:
            act.variables = {celtypes.StringType("b"): celpy.CELEvalError("no such key: b")}
        values.append(act.values())
    return values


def _outcome(expression: str, activation: dict, interpreted: bool):
    try:
        value = cel._evaluate(expression, activation, interpreted=interpreted)
    except cel.EvaluationError as exc:
        return ("error", str(exc))
    return ("value", type(value).__name__, repr(value))


def test_expressions_were_collected():
    assert len(expressions()) > 100
    assert any("ephemeralContainers.all(c" in e for e in expressions())


def test_the_expressions_are_compiled_but_reduce_and_min():
    interpreted = [e for e in expressions() if cel._compiled(e).transpiled is None]
    assert [e for e in interpreted if ".reduce(" in e or ".min()" in e] == ["[1, 2, 3].reduce(r, x, 0, r + x)",
                                                                            "[3, 1].min()"]
    assert len(interpreted) <= 4


@pytest.mark.parametrize("chunk", range(4))
def test_compiled_and_interpreted_runners_agree(chunk):
    activations = _activations()
    differences = []
    for expression in expressions()[chunk::4]:
        for index, activation in enumerate(activations):
            compiled = _outcome(expression, activation, False)
            interpreted = _outcome(expression, activation, True)
            if compiled != interpreted:
                differences.append((expression, index, compiled, interpreted))
    assert differences == []


def test_evaluations_on_many_threads_give_each_its_own_result():
    expression = "object.metadata.name + '/' + string(size(object.spec.containers)) + '/' + request.namespace"
    assert cel._compiled(expression).transpiled is not None
    cases = []
    for i in range(8):
        pod = {"metadata": {"name": f"pod-{i}"}, "spec": {"containers": [{"name": "c", "image": "x"}] * (i + 1)}}
        attrs = pod_attributes(f"ns-{i}", pod)
        cases.append((cel.Activation(attrs, attrs.rt).values(), f"pod-{i}/{i + 1}/ns-{i}"))
    errors: list = []
    barrier = threading.Barrier(len(cases))

    def work(activation, expected):
        barrier.wait()
        for _ in range(200):
            got = cel._evaluate(expression, activation)
            if got != expected:
                errors.append((expected, got))
                return

    threads = [threading.Thread(target=work, args=case) for case in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
