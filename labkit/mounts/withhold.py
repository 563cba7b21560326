"""`labkit mounts play`, `matrix` and `graph` must not answer the mount-propagation lab's reading
and prediction exercises for the student.

predict-e2e-matrix asks which party of the e2e experiment sees which tmpfs. A scenario reveals
part of that answer when it has a party of one propagation class see (or not see) a mount made
by a party of another class, both running on a host path of the experiment's propagation, the
viewer started before the mount (`facts`: pairs (viewer class, mounter class), the classes being
host, Bidirectional, HostToContainer and private, which None and unset both are, kubelet
translateMountPropagation). Names, paths, the order of steps and the number of parties do not
change what a scenario reveals, so they do not change whether it is withheld: play withholds any
scenario that reveals one such pair of the exercise's own scenario until the prediction is
written to the exercise's answer file; when it first shows one, labkit.predictions keeps the
prediction as it was then, and the check grades that copy (a prediction corrected after seeing
the outcome does not count). Resets keep the copy (labkit.predictions: the rule of every lab).

The live lab runs the same four Pods: `matrix` and `graph` show what they see only once the
prediction is kept (a complete prediction is kept at that moment, as play keeps it), and the
propagation fields of their volume mounts (what peer-groups asks to read from mountinfo) only
once peer-groups has passed.
"""

from __future__ import annotations

from labkit.mounts.scenario import Scenario

LAB = "mount-propagation"
EXERCISE = "predict-e2e-matrix"
READING = "peer-groups"
E2E_PODS = ("master", "slave", "private", "default")
PARTIES = ("host", *E2E_PODS)
E2E_HOST_PATH = "/var/lib/kubelet/e2e"     # the lab's e2e Pods' hostPath (pods/e2e.yaml)
WITHHELD = "(withheld)"


def _class(container) -> str:
    mode = container.volume_mounts[0].propagation if container.volume_mounts else None
    return mode if mode in ("Bidirectional", "HostToContainer") else "private"


def _can_mount(container) -> bool:
    added = {name.upper() for name in container.capabilities_add}
    return container.privileged or bool(added & {"SYS_ADMIN", "CAP_SYS_ADMIN", "ALL"})


def facts(s: Scenario) -> frozenset:
    """The (viewer class, mounter class) pairs a scenario shows, viewer and mounter different
    parties, both running when the mount is made and the viewer still running at the end (see the
    module docstring); each with the host path's propagation."""
    classes, can_mount = {"host": "host"}, {"host": True}
    for pod in s.pods:
        for c in pod.containers:
            name = pod.name if len(pod.containers) == 1 else f"{pod.name}/{c.name}"
            classes[name], can_mount[name] = _class(c), _can_mount(c)
            classes.setdefault(pod.name, classes[name])
            can_mount.setdefault(pod.name, can_mount[name])
    running, seen = {"host"}, set()
    for kind, arg in s.steps:
        names = [arg] if isinstance(arg, str) else arg if isinstance(arg, (list, tuple)) else []
        if kind == "start":
            running |= set(names)
        elif kind == "stop":
            running -= set(names)
        elif kind == "mount" and isinstance(arg, dict):
            maker = arg.get("by")
            if maker in running and can_mount.get(maker):
                seen |= {(viewer, maker) for viewer in running if viewer != maker}
    return frozenset((s.propagation, classes[v], classes[m]) for v, m in seen
                     if v in running and v in classes and m in classes)


def _exercise():
    from labkit.labs import get_lab

    lab = get_lab(LAB)
    return lab, lab.exercise(EXERCISE)


def guarded(s: Scenario) -> bool:
    """Whether playing `s` would show part of the outcome the prediction exercise asks for."""
    from labkit.mounts import scenario

    try:
        lab, exercise = _exercise()
    except Exception:      # the lab is not installed: nothing to protect
        return False
    return bool(facts(s) & facts(scenario.load(lab.directory / exercise.params["scenario"])))


def recorded_prediction(lab_id: str) -> dict | None:
    """{"text"} of the prediction kept when its outcome was first shown, or None."""
    from labkit import predictions
    found = predictions.kept(lab_id, EXERCISE)
    return None if found is None else {"text": found.text}


def release(say, tool: str = "labkit mounts play") -> bool:
    """Before the guarded outcome is shown: False (and why, through `say`) while there is no
    prediction; else keep the prediction as it is now (the first time) and return True."""
    from labkit import predictions
    from labkit.exercises import answer_path

    if predictions.kept(LAB, EXERCISE) is not None:
        return True
    if not predictions.reveal(LAB, EXERCISE, tool, complete=_complete):
        say(f"this shows part of the experiment of exercise {EXERCISE} of lab {LAB}: its outcome is what you are asked "
            f"to predict. Write your prediction to {answer_path(LAB, EXERCISE)} first (every party, each with a list); "
            "then the outcome is shown, and the check grades the prediction as it was at that moment")
        return False
    say(f"your prediction is kept as it is now: the check of {EXERCISE} grades this one")
    return True


def _complete(text: str) -> bool:
    """A prediction that says something of every party: a mapping of the five to lists."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and all(isinstance(data.get(p), list) for p in PARTIES)


def _reading_passed(env) -> bool:
    return READING in env.state.credit


def live_withheld(env, say, tool: str = "labkit mounts matrix") -> dict:
    """What of the e2e Pods `matrix` and `graph` must not show on the lab `env` now:
    {"seen": what they see below their volume, "tags": their volume mount's fields}."""
    if env.lab.id != LAB:
        return {"seen": False, "tags": False}
    kept = []          # release's "kept" note is passed on; its refusal is said below, in these words
    seen = recorded_prediction(LAB) is None and not release(kept.append, tool)
    for note in kept if not seen else []:
        say(note)
    tags = not _reading_passed(env)
    if seen:
        say(f"the e2e Pods' mounts are withheld until your prediction for {EXERCISE} is written (its outcome is what "
            "these Pods would show)")
    if tags:
        say(f"the propagation fields of the e2e Pods' volume mounts are withheld until {READING} passes: read them "
            "from each one's /proc/<pid>/mountinfo")
    return {"seen": seen, "tags": tags}


def _below_e2e(host_path: str, relative: str) -> bool:
    from labkit.mounts import mountinfo

    return mountinfo.is_under(f"{host_path.rstrip('/')}/{relative}", E2E_HOST_PATH)


def redact_matrix(table: dict, withheld: dict) -> dict:
    """`table` (observe.matrix) without what `withheld` says must not show: the volume mount
    fields of the e2e Pods and of every party on the e2e host path or a directory above it;
    every party's cells of mounts below the e2e host path (the watcher sees them
    too)."""
    from labkit.mounts import mountinfo

    for host_path, entry in table.items():
        # the node's answer is the mount holding the e2e host path: any entry at or above it shows it
        related = mountinfo.is_under(E2E_HOST_PATH, host_path) or mountinfo.is_under(host_path, E2E_HOST_PATH)
        for party, row in entry["rows"].items():
            if withheld["tags"] and (party in E2E_PODS or related):
                row["tags"] = WITHHELD
            if withheld["seen"]:
                row["sees"] = {rel: src for rel, src in row["sees"].items() if not _below_e2e(host_path, rel)}
        if withheld["seen"]:
            entry["columns"] = [rel for rel in entry["columns"] if not _below_e2e(host_path, rel)]
    return table


def redact_graph(g: dict, withheld: dict) -> dict:
    """`g` (observe.graph) without the e2e Pods' mounts (when anything of them is withheld) and,
    while the prediction is, without any party's mounts below the e2e host path."""
    from labkit.mounts import mountinfo

    def keep(v):
        if (withheld["seen"] or withheld["tags"]) and v.party in E2E_PODS:
            return False
        return not (withheld["seen"] and mountinfo.is_under(v.mount.mountpoint, E2E_HOST_PATH)
                    and v.mount.mountpoint != E2E_HOST_PATH)

    groups = {}
    for number, group in g["groups"].items():
        members, slaves = [v for v in group["members"] if keep(v)], [v for v in group["slaves"] if keep(v)]
        if members or slaves:
            groups[number] = {"members": members, "slaves": slaves}
    return {"vertices": [v for v in g["vertices"] if keep(v)], "groups": groups,
            "private": [v for v in g["private"] if keep(v)]}


def e2e_paths(party) -> list[str]:
    """Where the e2e host path is in `party`'s mount namespace: on the node the path itself; in a
    container below each volume mount whose host path holds it (the e2e Pods' /mnt/test, the
    watcher's /var/lib/kubelet/e2e)."""
    from labkit.mounts import mountinfo
    from labkit.mounts.node import NODE

    if party.name == NODE:
        return [E2E_HOST_PATH]
    out = []
    for volume in party.volumes:
        if mountinfo.is_under(E2E_HOST_PATH, volume.host_path):
            rest = E2E_HOST_PATH[len(volume.host_path.rstrip("/")):]
            out.append(volume.path.rstrip("/") + rest if rest else volume.path)
    return out


def experiment_live(parties) -> list[str]:
    """The mounts made in the live lab below the e2e host path, party by party ("party:path"): once
    there is one, what any party sees there is the e2e experiment's outcome, done by hand."""
    from labkit.mounts import mountinfo

    found = []
    for party in parties:
        paths = e2e_paths(party)
        if not paths:
            continue
        try:
            mounts = mountinfo.read(party.pid)
        except OSError:
            continue
        found += [f"{party.name}:{m.mountpoint}" for m in mounts
                  if any(mountinfo.is_under(m.mountpoint, p) and m.mountpoint != p for p in paths)]
    return found


def before_shell(env, parties, say) -> bool:
    """`labkit mounts exec` / `labkit shell` into any party of the live lab: once mounts were made
    below the e2e host path and the prediction is not kept yet, whatever the command prints can be
    the e2e experiment's outcome (the e2e Pods run exactly that experiment): like matrix and graph,
    it runs only once the prediction is written, which is then kept. False (and why, through
    `say`) when it must not run."""
    if env.lab.id != LAB or recorded_prediction(LAB) is not None or not experiment_live(parties):
        return True
    kept = []
    if release(kept.append, "labkit shell"):
        for note in kept:
            say(note)
        return True
    say(f"mounts were made below {E2E_HOST_PATH} (the e2e Pods' volume): what any container or the node shows "
        f"there now is the outcome exercise {EXERCISE} asks you to predict. Write your prediction to its answer file "
        f"first (`labkit show {LAB} {EXERCISE}`); then this runs, and the check grades the prediction as it was at "
        f"that moment. (`labkit reset {LAB} {EXERCISE}` unmounts what was mounted there.)")
    return False
