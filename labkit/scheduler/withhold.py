"""The scheduler lab's prediction exercises (score-predict, preempt-predict), for
labkit.predictions: which cases `labkit scheduler explain` and `play` show only once a prediction is
recorded (the exercise's case file, a copy of it with other names, or any case that holds one of
its nodes with the same Pods and the same incoming Pod, other nodes added or left out). Keeping the
prediction when the decision is first shown, and grading that kept copy, is labkit.predictions'."""

from __future__ import annotations

import json
from pathlib import Path

LAB = "scheduler"
EXERCISES = ("score-predict", "preempt-predict")     # each has params.case: the case file it is about


def _node_shapes(case: dict) -> set[str]:
    """Each node of the case with the Pods bound to it, whatever their names: the node's allocatable
    resources, labels other than its hostname, taints; each of its Pods' priority, labels,
    containers' requests and tolerations."""
    def pod(p: dict) -> str:
        return json.dumps({"priority": p.get("priority", 0), "labels": p.get("labels") or {},
                           "containers": [c.get("requests") for c in p.get("containers") or []],
                           "tolerations": p.get("tolerations") or []}, sort_keys=True)
    shapes = set()
    for n in case.get("nodes") or []:
        labels = {k: v for k, v in (n.get("labels") or {}).items() if k != "kubernetes.io/hostname"}
        pods = sorted(pod(p) for p in case.get("pods") or [] if p.get("nodeName") == n.get("name"))
        shapes.add(json.dumps({"allocatable": n.get("allocatable"), "labels": labels,
                               "taints": n.get("taints") or [], "pods": pods}, sort_keys=True))
    return shapes


def _incoming(case: dict) -> str:
    """What of the incoming Pod decides its scores and its victims: its requests and priority."""
    incoming = case.get("incoming") or {}
    return json.dumps({"priority": incoming.get("priority", 0),
                       "containers": [c.get("requests") for c in incoming.get("containers") or []]}, sort_keys=True)


def reveals(case: dict, exercise_case: dict) -> bool:
    """Whether playing `case` shows part of the exercise case's outcome: the same incoming Pod
    (requests, priority) and at least one of the exercise's nodes with the same Pods on it, whatever
    the names, other nodes added or some left out (each node's NodeResourcesFit score, and the
    victims preemption would pick there, depend on that node, its Pods and the incoming Pod alone)."""
    return _incoming(case) == _incoming(exercise_case) and bool(_node_shapes(case) & _node_shapes(exercise_case))


def exercise_of(case: dict) -> tuple[str, Path] | None:
    """The prediction exercise whose case this is, or shows a part of (`reveals`), with the case
    file, or None."""
    from labkit.inputs import load_yaml
    from labkit.labs import discover, load_lab
    directory = discover().get(LAB)
    if directory is None:
        return None
    lab = load_lab(directory)
    for exercise in EXERCISES:
        path = lab.directory / lab.exercise(exercise).params["case"]
        try:
            if reveals(case, load_yaml(path)):
                return exercise, path
        except Exception:       # a file broken by hand is no longer the exercise's case
            continue
    return None


def gate(case: dict, path: Path, tool: str = "labkit scheduler explain") -> str | None:
    """None when `case` may be played and shown; else what to say instead. Showing the case of a
    prediction exercise with a prediction written keeps that prediction (the first time)."""
    from labkit import predictions
    found = exercise_of(case)
    if found is None:
        return None
    exercise, _case_path = found
    if predictions.reveal(LAB, exercise, tool, situation=str(path)):
        return None
    return (f"{path} is, or holds part of, the case of exercise {exercise}, whose outcome you are to predict "
            f"(`labkit show {LAB} {exercise}`): " + predictions.how_to_record(LAB, exercise))
