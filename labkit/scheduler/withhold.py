"""The scheduler lab's predictions are not answered by labkit's own tools: `labkit scheduler
explain` and `play` on the case of a prediction exercise (score-predict, preempt-predict: its
file, or a copy of it with other names) show the decision only once a prediction is written
down, and keep a copy of that prediction, which the check then judges (a prediction changed
after seeing the decision is not one)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

LAB = "scheduler"
EXERCISES = ("score-predict", "preempt-predict")     # each has params.case: the case file it is about


def revealed_name(exercise: str) -> str:
    """The copy of the prediction, in the lab's state directory (the lab's checks read it)."""
    return f"revealed-{exercise}.yaml"


def signature(case: dict) -> str:
    """The case's shape, whatever its names: each node's allocatable resources, labels other than
    its hostname, taints; each Pod's node (by position), priority, labels, containers and
    tolerations; the PDBs' selectors and budgets; the incoming Pod the same way."""
    nodes = case.get("nodes") or []
    position = {n.get("name"): i for i, n in enumerate(nodes)}

    def node(n: dict) -> dict:
        labels = {k: v for k, v in (n.get("labels") or {}).items() if k != "kubernetes.io/hostname"}
        return {"allocatable": n.get("allocatable"), "labels": labels, "taints": n.get("taints") or []}

    def pod(p: dict) -> dict:
        return {"node": position.get(p.get("nodeName")), "priority": p.get("priority", 0),
                "labels": p.get("labels") or {}, "containers": [c.get("requests") for c in p.get("containers") or []],
                "tolerations": p.get("tolerations") or []}
    shape = {"nodes": [node(n) for n in nodes],
             "pods": sorted(json.dumps(pod(p), sort_keys=True) for p in case.get("pods") or []),
             "pdbs": sorted(json.dumps({"selector": d.get("selector"), "status": d.get("status")}, sort_keys=True)
                            for d in case.get("pdbs") or []),
             "incoming": pod(case.get("incoming") or {})}
    return json.dumps(shape, sort_keys=True)


def exercise_of(case: dict) -> tuple[str, Path] | None:
    """The prediction exercise whose case this is (by shape), with the case file, or None."""
    from labkit.inputs import load_yaml
    from labkit.labs import discover, load_lab
    directory = discover().get(LAB)
    if directory is None:
        return None
    lab = load_lab(directory)
    wanted = signature(case)
    for exercise in EXERCISES:
        path = lab.directory / lab.exercise(exercise).params["case"]
        try:
            if signature(load_yaml(path)) == wanted:
                return exercise, path
        except Exception:       # a file broken by hand is no longer the exercise's case
            continue
    return None


def gate(case: dict, path: Path) -> str | None:
    """None when `case` may be played and shown; else what to say instead. Showing the case of a
    prediction exercise with a prediction written keeps a copy of that prediction (the first time)."""
    from labkit import paths
    from labkit.exercises import answer_path
    found = exercise_of(case)
    if found is None:
        return None
    exercise, _case_path = found
    answer = answer_path(LAB, exercise)
    if not answer.exists():
        return (f"{path} is the case of exercise {exercise}, whose outcome you are to predict: write your "
                f"prediction to {answer} first (`labkit show {LAB} {exercise}`); then `labkit scheduler explain` "
                "shows the decision, and the check judges the prediction you had written then")
    kept = paths.state_root() / LAB / revealed_name(exercise)
    if not kept.exists():
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(answer, kept)
    return None
