"""`labkit numa admit | merge | take | show` withhold a prediction exercise's answer until the
student has recorded theirs.

The numa lab's prediction exercises (qos, cpu-hints, merge, static-cpus, memory) ask what kubelet
does with the lab's scenario files; the tools compute exactly that. While the lab is running, a
tool given one of those situations (a Pod whose spec is one of the exercise's Pods, the merge
exercise's provider hints, the static-cpus machine for `take`) prints that result only once the
exercise's check has seen an answer file (`labkit check numa EXERCISE` records it): the first
prediction is the student's own. Without a running lab nothing is withheld (the tools work on any
input, for instructors and everyone else).
"""

from __future__ import annotations

import json
from pathlib import Path

LAB_ID = "numa"
MARKER = "answered.json"
POD_SCENARIOS = {"qos": "qos-pods.yaml", "cpu-hints": "hints-pod.yaml", "static-cpus": "static-pods.yaml",
                 "memory": "memory-pods.yaml"}
MERGE_SCENARIOS = ("merge-trainer.json", "merge-feeder.json")
TAKE_MACHINE = "dual-socket-ht"     # the static-cpus exercise's machine


def _state():
    """The running numa lab's state, or None."""
    from labkit.state import LabState
    try:
        state = LabState(LAB_ID)
        return state if state.phase == "up" else None
    except Exception:       # no state directory, no permission: no lab running for this user
        return None


def _scenarios() -> Path:
    from labkit.labs import get_lab
    return get_lab(LAB_ID).directory / "scenarios"


def record(env, exercise_id: str) -> None:
    """The exercise's check saw an answer file: its tools may show the outcome from now on."""
    path = Path(env.dir) / MARKER
    try:
        done = json.loads(path.read_text())
    except (OSError, ValueError):
        done = []
    if exercise_id not in done:
        path.write_text(json.dumps(sorted(set(done) | {exercise_id})))


def recorded(exercise_id: str, state=None) -> bool:
    state = state or _state()
    if state is None:
        return True
    try:
        return exercise_id in json.loads((state.dir / MARKER).read_text())
    except (OSError, ValueError):
        return False


def message(exercise_id: str) -> str:
    from labkit.exercises import answer_path
    return (f"withheld until you record your answer to exercise {exercise_id}: write it to "
            f"{answer_path(LAB_ID, exercise_id)} and run `labkit check {LAB_ID} {exercise_id}`")


def _docs(path: Path) -> list:
    import yaml
    docs = []
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            docs += doc["items"]
        elif doc is not None:
            docs.append(doc)
    return docs


def pending_for_pods(path: Path) -> dict[int, str]:
    """{index of a Pod in the file: exercise} for each Pod whose spec is one of an unanswered
    prediction exercise's Pods (names and labels do not matter)."""
    state = _state()
    if state is None:
        return {}
    pending = [ex for ex in POD_SCENARIOS if not recorded(ex, state)]
    if not pending:
        return {}
    specs = {}
    for ex in pending:
        for doc in _docs(_scenarios() / POD_SCENARIOS[ex]):
            specs.setdefault(json.dumps(doc.get("spec"), sort_keys=True), ex)
    try:
        docs = _docs(Path(path))
    except Exception:
        return {}
    return {i: specs[key] for i, doc in enumerate(docs) if isinstance(doc, dict)
            and (key := json.dumps(doc.get("spec"), sort_keys=True)) in specs}


def pending_for_merge(data: dict) -> str | None:
    state = _state()
    if state is None or recorded("merge", state):
        return None
    for name in MERGE_SCENARIOS:
        scenario = json.loads((_scenarios() / name).read_text())
        if data.get("providers") == scenario["providers"] and sorted(data.get("numaNodes") or []) == sorted(scenario["numaNodes"]):
            return "merge"
    return None


def pending_for_take(machine: str) -> str | None:
    state = _state()
    if state is None or recorded("static-cpus", state):
        return None
    from labkit.numa.machine import load_machine
    try:
        same = machine == TAKE_MACHINE or load_machine(machine).to_dict() == load_machine(TAKE_MACHINE).to_dict()
    except Exception:
        return None
    return "static-cpus" if same else None
