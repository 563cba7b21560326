"""The device-plugins lab's prediction exercise `checkpoint`, for labkit.predictions: which cases
`labkit devices play` shows only once a prediction is written — the exercise's scenario, or any
case with the same situation whatever the Pods and containers are called (the same checkpoint
entries, the same active Pods, the same plugin events and Pods admitted, their times and the
Allocate answers aside: the devices each Pod ends up with depend on nothing else) — and any case
whose kubelet restart restores the exercise's Pods in the exercise's state: played on labkit's
device manager, a restart that brings back, among others, Pods holding what the exercise's running
Pods hold, each active as they are (the exercise's ended Pods with them or not), shows which of
them keep their devices, whatever the case does before or after (other steps, another Pod asking,
more NUMA nodes). Keeping the prediction
when the outcome is first shown, and grading that kept copy, is labkit.predictions'."""

from __future__ import annotations

import json
from pathlib import Path

LAB = "device-plugins"
EXERCISE = "checkpoint"          # params.case: the scenario it is about


class _Names:
    """The case's resource names and device IDs replaced by their order of first appearance (the
    checkpoint's RegisteredDevices, its entries, the resources given, then the steps): a copy with
    every widget and the resource renamed (`sed s/widget/gizmo/`) is the same story."""

    def __init__(self, case: dict):
        self.resources: dict[str, str] = {}
        self.devices: dict[str, str] = {}
        given = case.get("given") or {}
        data = ((given.get("checkpoint") or {}).get("Data")) or {}
        for resource, ids in (data.get("RegisteredDevices") or {}).items():
            self.resource(resource)
            for d in ids or []:
                self.device(d)
        for e in data.get("PodDeviceEntries") or []:
            self.resource(e.get("ResourceName"))
            for ids in (e.get("DeviceIDs") or {}).values():
                for d in ids or []:
                    self.device(d)
        for resource, spec in (given.get("resources") or {}).items():
            self.resource(resource)
            for d in (spec or []) if isinstance(spec, list) else []:
                self.device(d.get("id") if isinstance(d, dict) else d)
        for step in case.get("steps") or []:
            if step.get("resource") is not None:
                self.resource(step.get("resource"))
            for d in step.get("devices") or []:
                self.device(d.get("id") if isinstance(d, dict) else d)

    def resource(self, name) -> str:
        return self.resources.setdefault(str(name), f"resource-{len(self.resources)}")

    def device(self, name) -> str:
        return self.devices.setdefault(str(name), f"device-{len(self.devices)}")

    def step_devices(self, devices):
        """A list_and_watch step's devices, their IDs replaced."""
        if not isinstance(devices, list):
            return devices
        return [{**d, "id": self.device(d.get("id"))} if isinstance(d, dict) else self.device(d) for d in devices]


def situation(case: dict) -> str:
    """What the devices every Pod holds at the end of a case depend on, with the Pods' and
    containers' names, the resources' names and the devices' IDs replaced by their order of
    appearance."""
    names: dict[str, str] = {}
    ours = _Names(case)

    def pod(uid) -> str:
        return names.setdefault(str(uid), f"pod-{len(names)}")

    given = case.get("given") or {}
    data = ((given.get("checkpoint") or {}).get("Data")) or {}
    containers: dict[tuple[str, str], str] = {}

    def container(uid, name) -> str:
        return containers.setdefault((pod(uid), str(name)), f"c-{len(containers)}")

    entries = [[pod(e.get("PodUID")), container(e.get("PodUID"), e.get("ContainerName")),
                ours.resource(e.get("ResourceName")),
                {str(k): sorted(ours.device(d) for d in v or []) for k, v in (e.get("DeviceIDs") or {}).items()}]
               for e in data.get("PodDeviceEntries") or []]
    active = given.get("active_pods")
    steps = []
    for step in case.get("steps") or []:
        op = step.get("op")
        if op == "create_pod":
            p = step.get("pod") or {}
            uid = p.get("uid") or p.get("name")
            steps.append([op, pod(uid), [[container(uid, c.get("name")),
                                          {ours.resource(r): n for r, n in (c.get("limits") or {}).items()}]
                                         for kind in ("initContainers", "containers") for c in p.get(kind) or []]])
        else:
            steps.append([op, None if step.get("resource") is None else ours.resource(step.get("resource")),
                          ours.step_devices(step.get("devices")), step.get("version"),
                          step.get("stopped_seconds_ago")])
    registered = {ours.resource(r): [ours.device(d) for d in ids or []]
                  for r, ids in (data.get("RegisteredDevices") or {}).items()}
    resources = given.get("resources")
    if isinstance(resources, dict):
        resources = {ours.resource(r): ours.step_devices(spec) for r, spec in resources.items()}
    return json.dumps({"numa": given.get("numa_nodes"), "entries": entries,
                       "registered": registered,
                       "checksum": (given.get("checkpoint") or {}).get("Checksum", "computed"),
                       "active": None if active is None else sorted(pod(u) for u in active),
                       "resources": resources, "steps": steps}, sort_keys=True)


def restored(case: dict) -> list[list[str]]:
    """What each kubelet restart of `case` restores, as labkit's device manager plays it
    (labkit.devices.play; manager.go readCheckpoint): one entry a restart, the restored Pods
    without their names — each Pod's devices per resource over its containers (container names
    aside; resources and devices by their order of appearance in the case, _Names), and whether it
    is active (None: kubelet's Pod sources not ready), as sorted texts."""
    from labkit.devices.play import play

    seen: list[list[str]] = []
    ours = _Names(case)

    def observe(step: dict, dm) -> None:
        if step.get("op") != "kubelet_restart":
            return
        active = dm.active_pods
        seen.append(sorted(json.dumps([None if active is None else uid in active,
                                       sorted([ours.resource(r), sorted(ours.device(d) for d in a.devices)]
                                              for rs in cs.values() for r, a in rs.items())])
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
    exercise's restart does (and maybe more): then its outcome answers the exercise. The Pods that
    ended while kubelet was down need not be among them: kubelet frees theirs before it admits a
    Pod, so a copy of the scenario without them (their entries taken out of the checkpoint) shows
    every Pod's widgets as the exercise ends, the graded answer."""
    own = [kept for pods in restored(scenario) if (kept := [p for p in pods if json.loads(p)[0] is not False])]
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
