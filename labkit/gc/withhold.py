"""The gc lab's prediction exercise predict-dangling, for labkit.predictions: which scenarios
`labkit gc run` plays only once a prediction is recorded (its experiment file, a copy of its objects
with other names, or any scenario with an owner that never existed or lives in another namespace,
given at creation or written by a later step),
by what they are (`signature`), not by the file they came from. Keeping the prediction when the
outcome is first shown, and grading that kept copy, is labkit.predictions'."""

from __future__ import annotations

from pathlib import Path

import yaml

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


def _where(owner, dependent_ns: str | None, refs: dict) -> str:
    """never-existed, same-namespace or other-namespace: an owner reference as the experiment's
    signature classes it (a `${ref.uid}` of one of the scenario's objects, or a literal UID)."""
    from labkit.gc.scenario import REF_EXPR
    found = REF_EXPR.fullmatch(str((owner or {}).get("uid", ""))) if isinstance(owner, dict) else None
    target = refs.get(found.group(1)) if found else None
    if target is None:
        return "never-existed"
    return "same-namespace" if (target.namespace or "") == (dependent_ns or "") else "other-namespace"


def _owner_lists(value):
    """Every owner reference a step's body writes: the items of any `ownerReferences` list, a JSON
    patch operation's value at an ownerReferences path, or a dotted `metadata.ownerReferences` key."""
    if isinstance(value, dict):
        for key, item in value.items():
            if "ownerReferences" in str(key):
                if isinstance(item, list):
                    yield from item
                else:
                    yield item
            else:
                yield from _owner_lists(item)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and "ownerReferences" in str(item.get("path", "")) and "value" in item:
                found = item["value"]
                yield from (found if isinstance(found, list) else [found])
            else:
                yield from _owner_lists(item)


def written_owners(scenario) -> list[tuple[str, str]]:
    """The owners the scenario's steps give objects, by kind and as `signature` classes them: an
    object created by a step with owners, or owner references a step's update or patch writes (an
    object made without owners and given one that never existed afterwards shows the same outcome
    as the experiment). A body that cannot be read counts as an owner that never existed."""
    import json
    refs = scenario.refs()
    out = []
    for step in scenario.steps:
        if step.op == "create" and step.object is not None:
            for r in step.object.raw.get("ownerReferences") or []:
                out.append((str((r or {}).get("kind", "")), _where(r, step.object.namespace, refs)))
        elif step.op in ("update", "patch"):
            body = step.raw.get("set") if step.op == "update" else step.raw.get("patch")
            if "ownerReferences" not in json.dumps(body, default=str):
                continue
            if isinstance(body, str):
                try:
                    body = json.loads(body)
                except ValueError:
                    try:
                        body = yaml.safe_load(body)
                    except yaml.YAMLError:
                        out.append(("", "never-existed"))
                        continue
            target = refs.get(step.target)
            owners = list(_owner_lists(body))
            if not owners:
                out.append(("", "never-existed"))
            for r in owners:
                out.append((str((r or {}).get("kind", "")) if isinstance(r, dict) else "",
                            _where(r, target.namespace if target else None, refs)))
    return out


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
                                              for _owner, where in owners) \
        or any(where in UNTOLD for _kind, where in written_owners(scenario))


def gate(scenario) -> str | None:
    """None when `scenario` may be played and shown; else what to say instead. Playing the
    experiment with a prediction written keeps that prediction (the first time)."""
    from labkit import predictions
    if not shows_part_of_the_experiment(scenario):
        return None
    return predictions.reveal_or_refuse(
        LAB, EXERCISE, TOOL, str(scenario.path),
        f"{scenario.path} is, or holds part of, the experiment of exercise {EXERCISE} (an owner that never "
        "existed or lives in another namespace), whose outcome you are to predict")
