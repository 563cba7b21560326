"""The device-plugins lab's prediction exercise `checkpoint`, for labkit.predictions: which cases
`labkit devices play` shows only once a prediction is written — the exercise's scenario, or any
case with the same situation whatever the Pods and containers are called (the same checkpoint
entries, the same active Pods, the same plugin events and Pods admitted, their times and the
Allocate answers aside: the devices each Pod ends up with depend on nothing else) — and any case
whose kubelet restart restores the exercise's Pods in the exercise's state: played on labkit's
device manager, a restart that brings back, among others, Pods holding what the exercise's Pods
hold, each active or ended as they are, shows which of them keep their devices, whatever the case
does before or after (other steps, another Pod asking, more NUMA nodes). Keeping the prediction
when the outcome is first shown, and grading that kept copy, is labkit.predictions'."""

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


def restored(case: dict) -> list[list[str]]:
    """What each kubelet restart of `case` restores, as labkit's device manager plays it
    (labkit.devices.play; manager.go readCheckpoint): one entry a restart, the restored Pods
    without their names — each Pod's devices per resource over its containers (container names
    aside), and whether it is active (None: kubelet's Pod sources not ready), as sorted texts."""
    from labkit.devices.play import play

    seen: list[list[str]] = []

    def observe(step: dict, dm) -> None:
        if step.get("op") != "kubelet_restart":
            return
        active = dm.active_pods
        seen.append(sorted(json.dumps([None if active is None else uid in active,
                                       sorted([r, sorted(a.devices)] for rs in cs.values() for r, a in rs.items())])
                           for uid, cs in dm.pod_devices.items()))
    try:
        play(case, observe)
    except Exception:       # a case labkit cannot play shows nothing
        return []
    return seen


def _contains(pods: list[str], own: list[str]) -> bool:
    """Whether the restored Pods `pods` hold every one of `own` (a multiset: as many of each)."""
    left = list(pods)
    for pod in own:
        if pod not in left:
            return False
        left.remove(pod)
    return True


def restores_exercise(case: dict, scenario: dict) -> bool:
    """Whether a restart of `case` brings back the Pods of the exercise's scenario as the
    exercise's restart does (and maybe more): then its outcome answers the exercise."""
    own = [pods for pods in restored(scenario) if pods]
    return any(_contains(pods, mine) for pods in restored(case) for mine in own)


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
    if found is None or (situation(case) != situation(found[0]) and not restores_exercise(case, found[0])):
        return None
    return predictions.reveal_or_refuse(LAB, EXERCISE, tool, str(path),
                                        f"{path} is the situation of exercise {EXERCISE}, whose outcome you are to predict")
