"""A ValidatingAdmissionPolicy's expressions asked again about the same data give the result
celpy gave before (labkit/apiserver/admission/cel.py evaluate's memo), and the decisions are the
ones evaluated afresh: for match conditions (no variables yet), each variable (those before it
only) and the validations (every variable)."""

from __future__ import annotations

import json

import pytest

from labkit.apiserver.admission import cel
from labkit.apiserver.admission.policy import ValidatingPolicies
from labkit.requests.reconstruct import pod_attributes

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"tier": "web"}},
       "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}

SPECS = [
    # a variable and a validation with the same text: `variables.b` is not yet there for `a`
    {"variables": [{"name": "a", "expression": "variables.b"}, {"name": "b", "expression": "1"}],
     "validations": [{"expression": "variables.b == 1"}, {"expression": "variables.b"},
                     {"expression": "variables.a == 1"}]},
    # a match condition and a validation with the same text, before and after the variables
    {"matchConditions": [{"name": "m", "expression": "!has(variables.x)"}],
     "variables": [{"name": "x", "expression": "object.metadata.name"}],
     "validations": [{"expression": "!has(variables.x)", "message": "x is set"}]},
    {"validations": [{"expression": "object.spec.containers.all(c, c.image.contains(':'))",
                      "messageExpression": "'no tag: ' + object.metadata.name"},
                     {"expression": "object.metadata.labels.tier == 'db'", "reason": "Forbidden"}],
     "auditAnnotations": [{"key": "k", "valueExpression": "object.metadata.labels.tier"}]},
]


def _decisions(spec: dict, data: str | None) -> list:
    attrs = pod_attributes("shop", POD)
    return ValidatingPolicies._decide(spec, attrs, attrs.rt, None, None, cel, data)


@pytest.mark.parametrize("index", range(len(SPECS)))
def test_decisions_with_the_memo_are_those_evaluated_afresh(index):
    spec = SPECS[index]
    fresh = _decisions(spec, None)
    data = json.dumps(["memo-test", index])
    assert _decisions(spec, data) == fresh          # evaluated, and kept
    assert _decisions(spec, data) == fresh          # given again


def test_an_expression_asked_again_about_the_same_data_is_not_evaluated_again(monkeypatch):
    calls = []
    evaluate = cel._evaluate
    monkeypatch.setattr(cel, "_evaluate", lambda expression, act: calls.append(expression) or evaluate(expression, act))
    attrs = pod_attributes("shop", POD)
    act = cel.Activation(attrs, attrs.rt)
    expression = "object.metadata.labels.tier == 'web'"
    assert cel.evaluate(expression, act, "memo-test data 1")
    assert cel.evaluate(expression, act, "memo-test data 1")
    assert calls == [expression]
    # another memo, or none, is evaluated
    assert cel.evaluate(expression, act, "memo-test data 2")
    assert cel.evaluate(expression, act)
    assert calls == [expression] * 3
    # an error is given again as an error
    with pytest.raises(cel.EvaluationError) as first:
        cel.evaluate("object.missing", act, "memo-test data 1")
    with pytest.raises(cel.EvaluationError) as again:
        cel.evaluate("object.missing", act, "memo-test data 1")
    assert str(first.value) == str(again.value) == "expression 'object.missing' resulted in error: no such key: missing"
    assert calls.count("object.missing") == 1
