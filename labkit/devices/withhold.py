"""The device-plugins lab's prediction exercise `checkpoint`, for labkit.predictions: which cases
`labkit devices play` shows only once a prediction is written — the exercise's scenario, or any
case with the same situation whatever the Pods and containers are called (the same checkpoint
entries, the same active Pods, the same plugin events and Pods admitted, their times and the
Allocate answers aside: the devices each Pod ends up with depend on nothing else). Keeping the
prediction when the outcome is first shown, and grading that kept copy, is labkit.predictions'."""

from __future__ import annotations

import json
from pathlib import Path

LAB = "device-plugins"
EXERCISE = "checkpoint"          # params.case: the scenario it is about


def situation(case: dict) -> str:
    """What the devices every Pod holds at the end of a case depend on, with the Pods' and
    containers' names replaced by their order of appearance."""
    names: dict[str, str] = {}

    def pod(uid) -> str:
        return names.setdefault(str(uid), f"pod-{len(names)}")

    given = case.get("given") or {}
    data = ((given.get("checkpoint") or {}).get("Data")) or {}
    containers: dict[tuple[str, str], str] = {}

    def container(uid, name) -> str:
        return containers.setdefault((pod(uid), str(name)), f"c-{len(containers)}")

    entries = [[pod(e.get("PodUID")), container(e.get("PodUID"), e.get("ContainerName")), e.get("ResourceName"),
                {str(k): sorted(v or []) for k, v in (e.get("DeviceIDs") or {}).items()}]
               for e in data.get("PodDeviceEntries") or []]
    active = given.get("active_pods")
    steps = []
    for step in case.get("steps") or []:
        op = step.get("op")
        if op == "create_pod":
            p = step.get("pod") or {}
            uid = p.get("uid") or p.get("name")
            steps.append([op, pod(uid), [[container(uid, c.get("name")), c.get("limits") or {}]
                                         for kind in ("initContainers", "containers") for c in p.get(kind) or []]])
        else:
            steps.append([op, step.get("resource"), step.get("devices"), step.get("version"),
                          step.get("stopped_seconds_ago")])
    return json.dumps({"numa": given.get("numa_nodes"), "entries": entries,
                       "registered": data.get("RegisteredDevices") or {},
                       "checksum": (given.get("checkpoint") or {}).get("Checksum", "computed"),
                       "active": None if active is None else sorted(pod(u) for u in active),
                       "resources": given.get("resources"), "steps": steps}, sort_keys=True)


def _scenario() -> tuple[dict, Path] | None:
    from labkit.inputs import load_yaml
    from labkit.labs import discover, load_lab
    directory = discover().get(LAB)
    if directory is None:
        return None
    try:
        lab = load_lab(directory)
        path = lab.directory / lab.exercise(EXERCISE).params["case"]
        return load_yaml(path), path
    except Exception:      # a scenario broken by hand withholds nothing
        return None


def gate(case: dict, path: Path, tool: str = "labkit devices play") -> str | None:
    """None when `case` may be played and shown; else what to say instead. Showing the exercise's
    situation with a prediction written keeps that prediction (the first time)."""
    from labkit import predictions
    found = _scenario()
    if found is None or situation(case) != situation(found[0]):
        return None
    if predictions.reveal(LAB, EXERCISE, tool, situation=str(path)):
        return None
    return (f"{path} is the situation of exercise {EXERCISE}, whose outcome you are to predict "
            f"(`labkit show {LAB} {EXERCISE}`): " + predictions.how_to_record(LAB, EXERCISE))
