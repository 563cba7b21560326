"""CEL in ValidatingAdmissionPolicy as v1.34 compiles it: optional field selection (cel-go's
OptionalTypes, on in the Kubernetes environments since 1.28) in validations and matchConditions, and
the policies API validation refuses at creation with 422; and `==` and `!=` as cel-go evaluates
them (heterogeneous equality: `oldObject != null` is a bool, never an error).

Expected values: staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/compile.go
(CompileCELExpression: `compilation failed: <issues>`, `must evaluate to bool but got <type>`);
staging/src/k8s.io/apiserver/pkg/cel/environment/base.go (cel.OptionalTypes, the AST validators with
cel-go's ValidateRegexLiterals: `invalid matches argument`); cel-go common/error.go
ToDisplayString (`ERROR: <input>:LINE:COLUMN: message`, the line, a caret under the column);
pkg/apis/admissionregistration/validation/validation.go (field.Invalid at the expression's path);
cel-go v0.26 interpreter/interpretable.go (evalEq, evalNe) and common/types (Equal: null equals only
null; Int.Equal, Double.Equal, baseList.Equal, baseMap.Equal: across types unequal, numbers by value).
"""

from __future__ import annotations

import pytest

from labkit.apiserver.admission import cel
from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store

A = "admissionregistration.k8s.io/v1"
PODS = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}


@pytest.fixture
def client(tmp_path):
    api = Api(Registry(Store(tmp_path / "objects.db")))
    admin = LocalClient(api, "admin", ["system:masters", "system:authenticated"])
    admin.registry = api.registry
    admin.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    admin.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")    # the controller's
    return admin


def policy(name, expression, match_conditions=None):
    spec = {"matchConstraints": {"resourceRules": [PODS]},
            "validations": [{"expression": expression, "message": "init containers need a tag"}]}
    if match_conditions:
        spec["matchConditions"] = match_conditions
    return {"metadata": {"name": name}, "spec": spec}


def refused(fn, *args) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args)
    return info.value


@pytest.mark.parametrize("expression, expected", [
    ("object.spec.?initContainers.orValue([])", []),
    ("object.spec.?containers.orValue([]).size()", 1),
    ("object.?spec.?nothing.?deeper.hasValue()", False),
    ("object.spec[?'containers'].hasValue()", True),
    ("optional.none().orValue('x') + optional.of('y').value()", "xy"),
    ("'a.?b' == 'a.' + '?b'", True),        # inside a string it is text
])
def test_optional_values(expression, expected):
    act = {"object": cel.to_cel({"spec": {"containers": [{"name": "c"}]}})}
    assert cel.to_python(cel.evaluate(expression, act)) == expected


def test_optional_selection_in_a_validation_and_a_match_condition(client):
    client.create(A, "validatingadmissionpolicies", policy(
        "init-tags", "object.spec.?initContainers.orValue([]).all(c, c.image.contains(':'))",
        [{"name": "has-init", "expression": "object.spec.?initContainers.hasValue()"}]))
    client.create(A, "validatingadmissionpolicybindings", {"metadata": {"name": "init-tags"}, "spec": {
        "policyName": "init-tags", "validationActions": ["Deny"]}})
    plain = {"metadata": {"name": "plain"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
    client.create("v1", "pods", plain, "ns")
    untagged = {"metadata": {"name": "untagged"}, "spec": {
        "initContainers": [{"name": "i", "image": "busybox"}], "containers": [{"name": "c", "image": "busybox:1.36"}]}}
    err = refused(client.create, "v1", "pods", untagged, "ns")
    assert err.code == 422
    assert err.message.endswith("ValidatingAdmissionPolicy 'init-tags' with binding 'init-tags' denied request: "
                                "init containers need a tag")


@pytest.mark.parametrize("expression, detail", [
    ("object.metadata.name.matches('[')",
     "compilation failed: ERROR: <input>:1:30: invalid matches argument\n"
     " | object.metadata.name.matches('[')\n"
     " | .............................^"),
    ("matches(object.metadata.name, '(?=x)')",
     "compilation failed: ERROR: <input>:1:31: invalid matches argument\n"
     " | matches(object.metadata.name, '(?=x)')\n"
     " | ..............................^"),
    ("size(object.spec.containers)", "must evaluate to bool but got int"),
    ("'deny'", "must evaluate to bool but got string"),
])
def test_a_policy_that_does_not_compile_is_refused_at_creation(client, expression, detail):
    err = refused(client.create, A, "validatingadmissionpolicies", policy("broken", expression))
    assert err.code == 422
    quoted = expression.replace("\\", "\\\\").replace('"', '\\"')
    assert err.message == (f'ValidatingAdmissionPolicy.admissionregistration.k8s.io "broken" is invalid: '
                           f'spec.validations[0].expression: Invalid value: "{quoted}": {detail}')


def test_a_match_condition_must_be_bool_too(client):
    body = policy("cond", "true", [{"name": "n", "expression": "object.metadata.name"}])
    assert cel.compile_problem("object.metadata.name", "bool") is None      # dyn passes, as upstream's
    body["spec"]["matchConditions"][0]["expression"] = "object.metadata.name.startsWith('a') ? 'x' : 'y'"
    assert refused(client.create, A, "validatingadmissionpolicies", body).message.endswith(
        "spec.matchConditions[0].expression: Invalid value: \"object.metadata.name.startsWith('a') ? 'x' : "
        "'y'\": must evaluate to bool but got string")


@pytest.mark.parametrize("expression, expected", [
    ("object != null", True),
    ("null != object", True),
    ("object == null", False),
    ("object.spec.containers != null", True),
    ("object.spec.containers[0] != null", True),
    ("nothing != null", False),
    ("nothing == null", True),
    ("object.spec != 'x'", True),
    ("object.spec == 'x'", False),
    ("object.spec.containers == {}", False),
    ("object.spec.replicas == 2.0", True),
    ("object.spec.replicas != 'two'", True),
    ("{'a': [1]} == {'a': [1.0]}", True),
    ("double('NaN') == double('NaN')", False),
])
def test_equality_is_heterogeneous_as_in_cel_go(expression, expected):
    act = {"object": cel.to_cel({"spec": {"containers": [{"name": "c"}], "replicas": 2}}), "nothing": None}
    assert cel.to_python(cel.evaluate(expression, act)) is expected


def test_an_update_is_judged_with_old_object_compared_to_null(client):
    """`oldObject != null` tells an update from a creation (the idiom of upstream's examples): it
    must admit a label change, not fail with no such overload."""
    body = policy("updates", "oldObject == null || oldObject != null && object.metadata.name == oldObject.metadata.name")
    body["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = ["CREATE", "UPDATE"]
    client.create(A, "validatingadmissionpolicies", body)
    client.create(A, "validatingadmissionpolicybindings", {"metadata": {"name": "updates"}, "spec": {
        "policyName": "updates", "validationActions": ["Deny"]}})
    client.create("v1", "pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}},
                  "ns")
    patched = client.patch("v1", "pods", "p", {"metadata": {"labels": {"team": "web"}}}, namespace="ns")
    assert patched["metadata"]["labels"] == {"team": "web"}
