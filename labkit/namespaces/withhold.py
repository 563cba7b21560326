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


def fixes_withheld(name: str, asked) -> str | None:
    """What `labkit ns explain NAME` says instead of its fixes, or None to show them: while the
    namespace lab is up, NAME is the namespace an exercise of it is about, that exercise is not
    passed yet, and `asked` (the HttpClient explain reads) talks to the lab's own cluster. The
    causes stay: they say where to look; the fixes would be the exercise's answer (which finalizer
    to remove and how, which taint the pod garbage collector needs)."""
    from labkit.apiserver.client import HttpClient
    from labkit.labs import discover, load_lab
    from labkit.state import LabState

    state = LabState(LAB)
    if state.phase != "up":
        return None
    directory = discover().get(LAB)
    if directory is None:
        return None
    exercise = next((e.id for e in load_lab(directory).exercises if e.params.get("namespace") == name), None)
    if exercise is None or exercise in state.credit:
        return None
    options = state.status.get("options") or {}
    try:
        if options.get("kubeconfig"):
            lab = HttpClient.from_kubeconfig(options["kubeconfig"], options.get("context"))
        else:
            from labkit import paths
            lab = HttpClient.for_embedded(paths.state_root() / LAB / "apiserver" / "kubeconfig")
    except Exception:       # the lab's kubeconfig is gone or unreadable: nothing to compare with
        return None
    if (lab.host, lab.port, lab.prefix) != (asked.host, asked.port, asked.prefix):
        return None
    return (f"withheld while exercise {exercise} of lab {LAB} is not passed: the cause above says where to look "
            f"(`labkit hint {LAB} {exercise}` gives hints one at a time)")
