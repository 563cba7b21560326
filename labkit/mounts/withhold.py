"""`labkit mounts play` must not answer the prediction exercise of the mount-propagation lab.

Playing the lab's e2e scenario (or a copy of it with other names or another host path: what the
outcome depends on is the same) shows the matrix the exercise asks students to predict. So play
withholds that outcome until the prediction is written to the exercise's answer file; when it
shows the outcome the first time, it keeps a copy of the prediction as it was then in the lab's
state directory (predictions/<exercise>.yaml), and the check grades that copy: a prediction
corrected after seeing the outcome does not count. A reset keeps the copy, as it keeps the
recorded passes.
"""

from __future__ import annotations

from pathlib import Path

from labkit.mounts.scenario import Scenario

LAB = "mount-propagation"
EXERCISE = "predict-e2e-matrix"


def signature(s: Scenario) -> tuple:
    """What the outcome of a scenario depends on, without names and paths: the host path's
    propagation, each container's mode and privilege, and the steps with parties and mounts
    numbered in the order they first appear."""
    roles, numbers = {"host": "host", "upstream": "upstream"}, {}
    containers = []
    for pod in s.pods:
        for c in pod.containers:
            modes = tuple((vm.propagation or "None", vm.read_only) for vm in c.volume_mounts)
            roles[pod.name if len(pod.containers) == 1 else f"{pod.name}/{c.name}"] = f"c{len(containers)}"
            containers.append((modes, c.privileged, c.capabilities_add, c.capabilities_drop, bool(c.command)))
    steps = []
    for kind, arg in s.steps:
        if isinstance(arg, dict):
            number = numbers.setdefault(arg["name"], len(numbers))
            steps.append((kind, roles.get(arg["by"], arg["by"]), number, arg.get("lazy", False)))
        else:
            steps.append((kind, tuple(sorted(roles.get(a, a) for a in arg))))
    return s.propagation, tuple(containers), tuple(steps)


def _exercise():
    from labkit.labs import get_lab

    lab = get_lab(LAB)
    return lab, lab.exercise(EXERCISE)


def guarded(s: Scenario) -> bool:
    """Whether playing `s` would show the outcome the prediction exercise asks for."""
    from labkit.mounts import scenario

    try:
        lab, exercise = _exercise()
    except Exception:      # the lab is not installed: nothing to protect
        return False
    return signature(s) == signature(scenario.load(lab.directory / exercise.params["scenario"]))


def _snapshot(lab_id: str) -> Path:
    from labkit.state import LabState

    return LabState(lab_id).dir / "predictions" / f"{EXERCISE}.yaml"


def recorded_prediction(lab_id: str) -> dict | None:
    """{"text", "path"} of the prediction kept when play first showed the outcome, or None."""
    path = _snapshot(lab_id)
    try:
        return {"text": path.read_text(), "path": str(path)}
    except OSError:
        return None


def release(say) -> bool:
    """Before play shows the guarded outcome: False (and why, through `say`) while there is no
    prediction; else keep the prediction as it is now (the first time) and return True."""
    from labkit.exercises import answer_path

    answer = answer_path(LAB, EXERCISE)
    try:
        text = answer.read_text()
    except OSError:
        text = ""
    if not _complete(text):
        say(f"this is the experiment of exercise {EXERCISE} of lab {LAB}: its outcome is what you are asked to predict. "
            f"Write your prediction to {answer} first (every party, each with a list); then play shows the outcome, "
            "and the check grades the prediction as it was at that moment")
        return False
    snapshot = _snapshot(LAB)
    if not snapshot.exists():
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        snapshot.write_text(text)
        say(f"your prediction is kept as it is now ({snapshot}): the check of {EXERCISE} grades this one")
    return True


def _complete(text: str) -> bool:
    """A prediction that says something of every party: a mapping of the five to lists."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    parties = ("host", "master", "slave", "private", "default")
    return isinstance(data, dict) and all(isinstance(data.get(p), list) for p in parties)
