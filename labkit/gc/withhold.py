"""The gc lab's prediction exercise predict-dangling, for labkit.predictions: which scenarios
`labkit gc run` plays only once a prediction is recorded (its experiment file, a copy of its objects
with other names, or any scenario with an owner that never existed or lives in another namespace),
by what they are (`signature`), not by the file they came from. Keeping the prediction when the
outcome is first shown, and grading that kept copy, is labkit.predictions'."""

from __future__ import annotations

from pathlib import Path

LAB, EXERCISE = "gc", "predict-dangling"
TOOL = "labkit gc run"


def signature(scenario) -> tuple:
    """The experiment's shape, whatever its names: each object by kind and namespace (numbered in
    order of appearance), with its owners, each by kind and as an owner that never existed (a
    literal UID), one of the scenario's objects in the same namespace, or one in another."""
    from labkit.gc.scenario import REF_EXPR
    namespaces: dict[str, int] = {}
    refs = {o.ref: o for o in scenario.objects}

    def ns(o) -> int:
        return namespaces.setdefault(o.namespace or "", len(namespaces))
    shape = []
    for o in scenario.objects:
        owners = []
        for r in o.raw.get("ownerReferences") or []:
            found = REF_EXPR.fullmatch(str(r.get("uid", "")))
            target = refs.get(found.group(1)) if found else None
            where = "never-existed" if target is None else \
                "same-namespace" if (target.namespace or "") == (o.namespace or "") else "other-namespace"
            owners.append((str(r.get("kind", "")), where))
        shape.append((o.kind, ns(o), tuple(sorted(owners))))
    return tuple(sorted(shape))


def experiment_path() -> Path | None:
    from labkit.labs import discover, load_lab
    directory = discover().get(LAB)
    if directory is None:
        return None
    return load_lab(directory).directory / load_lab(directory).exercise(EXERCISE).params["experiment"]


def _built_copy() -> str | None:
    """The experiment as the running lab was built (lab.py keeps it in built.json), if any."""
    import json
    from labkit import paths
    try:
        return json.loads((paths.state_root() / LAB / "built.json").read_text())[EXERCISE]["experiment"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_the_experiment(scenario) -> bool:
    """Whether `scenario` has the shape of the experiment: the lab's file as it is, or as the
    running lab was built with it."""
    import tempfile
    from labkit.gc.scenario import load
    shapes = []
    path = experiment_path()
    if path is not None and path.exists():
        try:
            shapes.append(signature(load(path)))
        except Exception:       # a file broken by hand: its copy as built still counts
            pass
    text = _built_copy()
    if text and path is not None:
        with tempfile.TemporaryDirectory(prefix="labkit-gc-") as tmp:
            copy = Path(tmp) / path.name
            copy.write_text(text)
            try:
                shapes.append(signature(load(copy)))
            except Exception:
                pass
    return signature(scenario) in shapes


UNTOLD = ("never-existed", "other-namespace")       # the owners whose fate the experiment asks about


def shows_part_of_the_experiment(scenario) -> bool:
    """Whether playing `scenario` shows part of the experiment's outcome: the experiment itself,
    or any scenario with an object whose owner never existed (a UID of no object of the scenario)
    or lives in another namespace, whatever its names and whatever else it holds (what the
    garbage collector does to such an object is what the prediction is about)."""
    return is_the_experiment(scenario) or any(where in UNTOLD for _kind, _ns, owners in signature(scenario)
                                              for _owner, where in owners)


def gate(scenario) -> str | None:
    """None when `scenario` may be played and shown; else what to say instead. Playing the
    experiment with a prediction written keeps that prediction (the first time)."""
    from labkit import predictions
    if not shows_part_of_the_experiment(scenario):
        return None
    if predictions.reveal(LAB, EXERCISE, TOOL, situation=str(scenario.path)):
        return None
    return (f"{scenario.path} is, or holds part of, the experiment of exercise {EXERCISE} (an owner that never "
            f"existed or lives in another namespace), whose outcome you are to predict (`labkit show {LAB} {EXERCISE}`): "
            + predictions.how_to_record(LAB, EXERCISE))
