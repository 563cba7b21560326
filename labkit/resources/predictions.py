"""Predictions come before the outcome: the lab's tools that would show a prediction exercise's
outcome (`labkit resources get` the QoS classes and oom_score_adj of the qos Pods, `evict` the
eviction ranking, `convert` the requests behind the weight Pod's value) show it only once an
answer is recorded, and keep that answer as it was then (<lab dir>/predictions/<exercise>.yaml).
The exercise's check grades the kept answer: a prediction changed after its outcome was shown is
a copy, not a prediction. `labkit reset resources EXERCISE` forgets the kept answer (the answer
file itself is the student's and stays as it is).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from labkit.exercises import answer_path

LAB_ID = "resources"


def directory(env) -> Path:
    return Path(env.dir) / "predictions"


def kept_path(env, exercise_id: str) -> Path:
    return directory(env) / f"{exercise_id}.yaml"


def _answer_text(exercise_id: str) -> str | None:
    try:
        text = answer_path(LAB_ID, exercise_id).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    return text if text.strip() else None


def kept(env, exercise_id: str) -> tuple[str, dict] | None:
    """(the answer as it was when its outcome was first shown, {tool, at}), or None."""
    path = kept_path(env, exercise_id)
    try:
        text = path.read_text()
        info = json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return None
    return text, info


def reveal(env, exercise_id: str, tool: str) -> bool:
    """A tool is about to show the exercise's outcome: True if an answer is recorded (it is kept
    as it is now, unless an earlier one was kept already), False if the tool must withhold it."""
    if kept(env, exercise_id) is not None:
        return True
    text = _answer_text(exercise_id)
    if text is None:
        return False
    directory(env).mkdir(parents=True, exist_ok=True)
    path = kept_path(env, exercise_id)
    path.with_suffix(".json").write_text(json.dumps({"tool": tool, "at": round(time.time(), 3)}))
    path.write_text(text)
    return True


def forget(env, exercise_id: str) -> None:
    path = kept_path(env, exercise_id)
    path.unlink(missing_ok=True)
    path.with_suffix(".json").unlink(missing_ok=True)


def withheld(exercise_id: str, what: str) -> str:
    """What a tool says instead of the outcome."""
    return (f"{what} withheld: exercise {exercise_id} asks you to work it out. Write your answer to "
            f"{answer_path(LAB_ID, exercise_id)} first; from then on this shows it, and "
            f"`labkit check {LAB_ID} {exercise_id}` grades the answer as it was at that moment")


# -- what each prediction exercise's outcome is, to know when a tool is about to show it ------------

def _exercise(lab, exercise_id: str):
    return lab.exercise(exercise_id)


def _scenario(lab, file: str, node: str) -> list:
    from labkit.inputs import load_yaml
    from labkit.resources.node import load_pods_strict
    classes = {str(k): int(v) for k, v in (load_yaml(lab.directory / "nodes.yaml").get("priorityClasses") or {}).items()}
    return load_pods_strict(lab.directory / "scenarios" / file, node, classes)


def qos_pods(lab) -> dict:
    """The qos exercise's Pods as the lab ships them, by name."""
    params = _exercise(lab, "qos").params
    names = [n.strip() for n in params["pods"].split(",")]
    pods = {p.name: p for p in _scenario(lab, params["file"].rsplit("/", 1)[-1], params["node"])}
    return {n: pods[n] for n in names}


def _bare_spec(manifest: dict) -> dict:
    spec = dict(manifest.get("spec") or {})
    spec.pop("nodeName", None)
    return spec


def is_qos_pod(lab, pod) -> bool:
    """A Pod whose spec is one of the qos exercise's (whatever its name or node)."""
    return any(_bare_spec(pod.manifest) == _bare_spec(p.manifest) for p in qos_pods(lab).values())


def eviction_pods_among(lab, pods) -> set[str]:
    """The names of `pods` that are the eviction-order exercise's Pods: by name, or by spec under
    another name (a renamed copy is ranked exactly as the original is)."""
    params = _exercise(lab, "eviction-order").params
    ours = _scenario(lab, params["file"].rsplit("/", 1)[-1], params["node"])
    names = {p.name for p in ours}
    specs = [_bare_spec(p.manifest) for p in ours]
    return {p.name for p in pods if p.name in names or _bare_spec(p.manifest) in specs}


def weight_values(lab) -> tuple[int, int]:
    """(cpu.shares, cpu.weight) kubelet writes into the weight exercise's pod cgroup."""
    from labkit.resources import kubelet
    params = _exercise(lab, "weight").params
    pod = next(p for p in _scenario(lab, "node-1.yaml", params["node"]) if p.name == params["pod"])
    shares = kubelet.pod_cgroup(pod).cpu_shares
    return shares, kubelet.shares_to_weight(shares)
