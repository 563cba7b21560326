"""The namespace lab's prediction exercise terminating-create, for labkit.predictions: `labkit gc run`
plays a scenario that sends a create into a namespace its own steps deleted before (NamespaceLifecycle
refuses it with the very message the exercise asks for, another name in it) only once a prediction
is recorded. Keeping the prediction when the refusal is first shown, and grading that kept copy, is
labkit.predictions'."""

from __future__ import annotations

LAB, EXERCISE = "namespace", "terminating-create"
TOOL = "labkit gc run"


def creates_in_a_terminating_namespace(scenario) -> bool:
    """Whether a step of `scenario` creates an object (a create step, or a server-side apply: a
    PATCH that NamespaceLifecycle admits as a create, lifecycle/admission.go Admit) in a namespace
    that an earlier step deleted: its answer is the refusal the exercise asks about."""
    refs = scenario.refs()
    deleted: set[str] = set()
    for step in scenario.steps:
        if step.op == "delete":
            target = refs.get(step.target)
            if target is not None and target.kind == "Namespace" and target.name:
                deleted.add(target.name)
        elif step.op == "create" and step.object is not None and (step.object.namespace or "") in deleted:
            return True
        elif step.op == "patch" and step.raw.get("type") == "apply":
            target = refs.get(step.target)
            if target is not None and (target.namespace or "") in deleted:
                return True
    return False


def gate(scenario) -> str | None:
    """None when `scenario` may be played and shown; else what to say instead. Playing such a
    scenario with a prediction written keeps that prediction (the first time)."""
    from labkit import predictions
    if not creates_in_a_terminating_namespace(scenario):
        return None
    return predictions.reveal_or_refuse(
        LAB, EXERCISE, TOOL, str(scenario.path),
        f"{scenario.path} creates content in a namespace being terminated: the API server's refusal is what "
        f"exercise {EXERCISE} of lab {LAB} asks you to predict")
