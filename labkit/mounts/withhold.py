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

The live lab runs the same four Pods, and a student can make more (copies of them on another
hostPath, under other names, in other namespaces). The live lab is judged as play judges a
scenario, by the reconstruction's classes rather than by paths or names (`live_revealing`): on
each host path a running party views, the node's propagation for it and each viewing party's
class make the (propagation, viewer class, mounter class) pairs its mounts show; a mount made
below it since the lab was built (the lab's own mounts, as built.json records them, are not an
experiment) shows the pairs of every party that sees it and may have made it. While the
prediction is not written, `matrix` and `graph` leave out every such mount whose pairs meet the
exercise's, and `labkit mounts exec` / `labkit shell` do not run once there is one (a complete
prediction is kept at the first look, as play keeps it). The propagation fields of the e2e Pods'
volume mounts, and of every mount in their peer groups (what peer-groups asks to read from
mountinfo: a copy of an e2e Pod is in the same group), and of every volume mount whose
mountPropagation is None or unset (whatever its host path or Pod, live or in a scenario `play`
plays: its mount is private, which is what peer-groups asks of two e2e Pods), are shown only once
peer-groups has passed.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

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


def exercise_facts() -> frozenset:
    """facts() of the exercise's own scenario (empty when the lab is not installed)."""
    try:
        lab, exercise = _exercise()
    except Exception:      # the lab is not installed: nothing to protect
        return frozenset()
    path = lab.directory / exercise.params["scenario"]
    return _facts_of(str(path), path.read_text())


@functools.lru_cache(maxsize=2)
def _facts_of(path: str, text: str) -> frozenset:
    from labkit.mounts import scenario
    return facts(scenario.load(path))


def guarded(s: Scenario) -> bool:
    """Whether playing `s` would show part of the outcome the prediction exercise asks for."""
    return bool(facts(s) & exercise_facts())


CAP_SYS_ADMIN = 21


def _propagations(holder) -> set[str]:
    """The hostPath propagation (scenario's terms) of the node's mount holding a host path."""
    if holder is None:
        return {"private"}
    found = set()
    if holder.shared is not None:
        found.add("shared")
    if holder.master is not None:
        found.add("slave")
    return found or {"private"}


def _built_mounts(env) -> set[tuple[str, str, str]]:
    """(party, mount point, device) of the mounts the lab itself made when it was built (recorded
    by labs/mount-propagation/lab.py in <lab state>/mounts/built.json): not an experiment."""
    try:
        built = json.loads((Path(env.dir) / "mounts" / "built.json").read_text())
    except (OSError, ValueError):
        return set()
    found = {("node", row[0], row[5]) for row in built.get("node") or [] if len(row) > 5}
    for party, rows in (built.get("leak") or {}).items():
        found |= {(party, row[0], row[4]) for row in rows if len(row) > 4}
    return found


def volume_classes(node, parties: dict | None = None) -> dict[tuple[str, str], str]:
    """{(party, host path): its volume mount's class as facts() classes it}: Bidirectional,
    HostToContainer, or private for None and unset (pkg/kubelet/kubelet_pods.go
    translateMountPropagation gives the runtime PROPAGATION_PRIVATE for both, and the runtime
    binds it rprivate: mountinfo shows no optional field on that mount, whatever the host
    path's)."""
    if parties is None:
        parties = {p.name: p for p in node.parties()}
    classes: dict[tuple[str, str], str] = {}
    for party in parties.values():
        pod = node.pod(party.pod) if party.pod else None
        container = next((c for c in pod.containers if c.name == party.container), None) if pod else None
        for volume, mount in zip(party.volumes, container.volume_mounts if container else ()):
            mode = mount.propagation
            classes[(party.name, volume.host_path)] = mode if mode in ("Bidirectional", "HostToContainer") else "private"
    return classes


def private_volumes(node) -> set[tuple[str, str]]:
    """(party, host path) of every volume mount whose propagation is None or unset: whatever its
    host path, name or namespace, its mount shows what peer-groups asks of the e2e Pods private
    and default (volume_classes), so it is withheld with theirs."""
    return {key for key, cls in volume_classes(node).items() if cls == "private"}


def live_revealing(env, node) -> dict[str, dict]:
    """The mounts of the live lab whose visibility shows part of the prediction exercise's outcome:
    {host path: {"columns": {relative path}, "mounts": {(party, mount point)}}}, only host paths with
    one. On each host path a running party views: the node's propagation for it (its mount
    holding the path), each viewer's class (host, or its volume mount's mode as facts() classes
    it), and for each mount below it made since the lab was built, the parties that see it and
    could have made it (the node, or a container with CAP_SYS_ADMIN; anyone, when none of them
    could): the pairs (propagation, viewer class, mounter class) of every other viewer."""
    from labkit.mounts import mountinfo, observe
    from labkit.mounts.node import NODE

    wanted = exercise_facts()
    if not wanted:
        return {}
    built = _built_mounts(env)
    parties = {p.name: p for p in node.parties()}
    classes = volume_classes(node, parties)
    cache: dict[int, list] = {}
    views: dict[str, list] = {}
    for view in observe.views(node):
        views.setdefault(view.host_path, []).append(view)
    found: dict[str, dict] = {}
    for host_path, seen_by in views.items():
        node_mounts = cache.setdefault(parties[NODE].pid, mountinfo.read(parties[NODE].pid))
        props = _propagations(mountinfo.containing_mount(node_mounts, host_path))
        cls = {v.party: "host" if v.party == NODE else classes.get((v.party, host_path), "private") for v in seen_by}
        can_mount = {v.party: v.party == NODE or bool((parties[v.party].capabilities or 0) >> CAP_SYS_ADMIN & 1)
                     for v in seen_by}
        seers: dict[str, set[str]] = {}
        where: dict[str, list[tuple[str, str]]] = {}
        for view in seen_by:
            mounts = cache.setdefault(view.pid, mountinfo.read(view.pid))
            for m in mountinfo.submounts(mounts, view.path):
                if (view.party, m.mountpoint, m.device) in built:
                    continue
                rel = m.mountpoint[len(view.path.rstrip("/")) + 1:]
                seers.setdefault(rel, set()).add(view.party)
                where.setdefault(rel, []).append((view.party, m.mountpoint))
        for rel, who in seers.items():
            makers = {p for p in who if can_mount[p]} or set(cls)
            pairs = {(prop, cls[viewer], cls[maker]) for prop in props for viewer in cls for maker in makers
                     if viewer != maker}
            if pairs & wanted:
                entry = found.setdefault(host_path, {"columns": set(), "mounts": set()})
                entry["columns"].add(rel)
                entry["mounts"] |= set(where[rel])
    return found


def e2e_groups(node) -> set[int]:
    """The peer group numbers in the propagation fields peer-groups asks about: the node's mount
    holding the e2e host path and the e2e Pods' volume mounts (a mount in one of these groups,
    whoever holds it, shows the same fields)."""
    from labkit.mounts import mountinfo
    from labkit.mounts.node import NODE

    numbers = set()
    for party in node.parties():
        if party.name != NODE and party.pod not in E2E_PODS:
            continue
        mounts = mountinfo.read(party.pid)
        for path in e2e_paths(party):
            m = mountinfo.containing_mount(mounts, path) if party.name == NODE else mountinfo.visible_at(mounts, path)
            if m is not None:
                numbers |= {n for n in (m.shared, m.master) if n is not None}
    return numbers


_GROUP = re.compile(r"(?:shared|master):(\d+)")


def _in_groups(tags: str, numbers: set[int]) -> bool:
    return any(int(n) in numbers for n in _GROUP.findall(tags or ""))


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


def live_withheld(env, say, tool: str = "labkit mounts matrix", node=None) -> dict:
    """What `matrix` and `graph` must not show on the lab `env` now: {"seen": the mounts of the e2e
    Pods' volume, "tags": their volume mount's fields, "revealing": live_revealing (with `node`;
    what must not show while the prediction is not written), "groups": the peer groups of the
    fields peer-groups asks about (while it has not passed)}."""
    if env.lab.id != LAB:
        return {"seen": False, "tags": False, "revealing": {}, "groups": set(), "private": set()}
    kept = []          # release's "kept" note is passed on; its refusal is said below, in these words
    seen = recorded_prediction(LAB) is None and not release(kept.append, tool)
    for note in kept if not seen else []:
        say(note)
    tags = not _reading_passed(env)
    revealing = live_revealing(env, node) if seen and node is not None else {}
    groups = e2e_groups(node) if tags and node is not None else set()
    private = private_volumes(node) if tags and node is not None else set()
    if seen:
        elsewhere = sorted(set(revealing) - {E2E_HOST_PATH})
        say(f"the e2e Pods' mounts are withheld until your prediction for {EXERCISE} is written (its outcome is what "
            "these Pods would show)" + (f"; so are the mounts below {', '.join(elsewhere)}: the propagation modes of the "
                                       "parties there show part of that outcome too" if elsewhere else ""))
    if tags:
        say(f"the propagation fields of the e2e Pods' volume mounts are withheld until {READING} passes: read them "
            "from each one's /proc/<pid>/mountinfo" + (
                "; so are those of every volume mount with mountPropagation None or unset, wherever it is: it shows "
                "what two of them show" if private else ""))
    return {"seen": seen, "tags": tags, "revealing": revealing, "groups": groups, "private": private}


def after_command(env, started: float, tool: str):
    """after_shell of the lab: while no prediction is kept, a command (or shell) run in the node or
    a container may itself do the e2e experiment and show its outcome (mount in each party, then
    read every party's mountinfo, in one go): the look, run once it has ended, returns None when
    a prediction is kept already. The look: when mounts are now made below the e2e host path (or
    below a host path parties of its modes share: live_revealing), a prediction written by then is
    kept as it is (release); else the command is kept as a try of the experiment by hand
    (labkit.predictions.keep_trial, at its start), and a prediction written after it earns no
    points (trial_before)."""
    import sys
    import time

    if env.lab.id != LAB or recorded_prediction(LAB) is not None:
        return None

    def look() -> None:
        from labkit import predictions
        from labkit.mounts.node import Node

        from labkit.errors import LabkitError

        node = Node(env)
        try:
            if not (experiment_live(node.parties()) or live_revealing(env, node)):
                return
        except LabkitError:
            return          # the node is gone (a cleanup meanwhile): nothing of the experiment is left
        notes: list[str] = []
        if release(notes.append, tool):
            for note in notes:
                print(f"labkit: {note}", file=sys.stderr)
            return
        kept = predictions.keep_trial(LAB, EXERCISE, {
            "at": started, "time": time.strftime("%H:%M:%S", time.gmtime(started)),
            "what": f"a command run by `{tool}` made mounts below {E2E_HOST_PATH} or a host path the e2e Pods' modes share"})
        print(f"labkit: {kept['what']} at {kept['time']} UTC, before a prediction of {EXERCISE} was written: that "
              f"runs its experiment by hand. labkit keeps when: a prediction written after it earns no points, after "
              f"a reset too (only `labkit reset {LAB} {EXERCISE} --forget-prediction` forgets it, and the grade "
              "report shows that)", file=sys.stderr)
    return look


def trial_before(lab_id: str, answer_path: Path) -> dict | None:
    """The try of the e2e experiment by hand that labkit kept (after_command), when the prediction
    graded was written after it: the kept prediction's file time (or when it was kept), else the
    answer file's; None when there is no such try or the prediction came first."""
    from labkit import predictions

    tried = predictions.kept_trial(lab_id, EXERCISE)
    if tried is None:
        return None
    found = predictions.kept(lab_id, EXERCISE)
    if found is not None:
        written = found.written if found.written is not None else found.at
    else:
        try:
            written = answer_path.stat().st_mtime
        except OSError:
            return None
    return tried if written >= float(tried["at"]) else None


def gate_command(env, node, tool: str) -> None:
    """before_shell for a command about to run in the node or a container through `tool`: raises
    LabkitError saying why it must not run; the notes of a prediction kept go to stderr."""
    import sys

    from labkit.errors import LabkitError

    said: list[str] = []
    if not before_shell(env, node.parties(), said.append, node, tool):
        raise LabkitError("\n".join(said))
    for note in said:
        print(f"labkit: {note}", file=sys.stderr)


def redact_play(loaded: Scenario, result: dict, say) -> dict:
    """What `labkit mounts play` shows while peer-groups has not passed: the volume mount fields of
    the scenario's containers with mountPropagation None or unset withheld (such a mount is
    private, whatever the host path: what peer-groups asks of two e2e Pods), and why, through
    `say`. Reads the lab's recorded passes; a lab never run has none."""
    from labkit.state import LabState

    if READING in LabState(LAB).credit:
        return result
    tags = dict(result.get("tags") or {})
    private = [pod.name for pod in loaded.pods
               if pod.name in tags and pod.containers and _class(pod.containers[0]) == "private"]
    if not private:
        return result
    for name in private:
        tags[name] = WITHHELD
    say(f"the volume mount fields of {', '.join(private)} (mountPropagation None or unset) are withheld until "
        f"{READING} passes: it shows what two of the e2e Pods show")
    return {**result, "tags": tags}


def _below_e2e(host_path: str, relative: str) -> bool:
    from labkit.mounts import mountinfo

    return mountinfo.is_under(f"{host_path.rstrip('/')}/{relative}", E2E_HOST_PATH)


def redact_matrix(table: dict, withheld: dict) -> dict:
    """`table` (observe.matrix) without what `withheld` says must not show: the volume mount
    fields of the e2e Pods, of every party on the e2e host path or a directory above it, of
    every mount in the peer groups peer-groups asks about and of every None or unset volume
    mount (private_volumes); every party's cells of mounts below
    the e2e host path (the watcher sees them too), and of the mounts that show part of the
    prediction's outcome elsewhere (live_revealing)."""
    from labkit.mounts import mountinfo

    for host_path, entry in table.items():
        # the node's answer is the mount holding the e2e host path: any entry at or above it shows it
        related = mountinfo.is_under(E2E_HOST_PATH, host_path) or mountinfo.is_under(host_path, E2E_HOST_PATH)
        hidden = (withheld.get("revealing") or {}).get(host_path, {}).get("columns", set())

        def shown(rel: str) -> bool:
            return not (_below_e2e(host_path, rel) or rel in hidden)
        for party, row in entry["rows"].items():
            if withheld["tags"] and (party in E2E_PODS or related or _in_groups(row["tags"], withheld.get("groups") or set())
                                     or (party, host_path) in (withheld.get("private") or set())):
                row["tags"] = WITHHELD
            if withheld["seen"]:
                row["sees"] = {rel: src for rel, src in row["sees"].items() if shown(rel)}
        if withheld["seen"]:
            kept = [rel for rel in entry["columns"] if shown(rel)]
            if len(kept) != len(entry["columns"]):
                entry["withheld"] = len(entry["columns"]) - len(kept)
            entry["columns"] = kept
    return table


def redact_graph(g: dict, withheld: dict) -> dict:
    """`g` (observe.graph) without the e2e Pods' mounts (when anything of them is withheld), while
    peer-groups has not passed without every mount in the peer groups it asks about and the private
    mounts of parties with a None or unset volume mount (private_volumes), and while the
    prediction is not written without any party's mounts below the e2e host path or revealing
    part of its outcome elsewhere (live_revealing)."""
    from labkit.mounts import mountinfo

    hidden = {m for entry in (withheld.get("revealing") or {}).values() for m in entry["mounts"]}
    e2e_groups = withheld.get("groups") or set()
    private_parties = {party for party, _ in withheld.get("private") or set()}

    def keep(v):
        if (withheld["seen"] or withheld["tags"]) and v.party in E2E_PODS:
            return False
        if withheld["tags"] and _in_groups(v.mount.tags, e2e_groups):
            return False
        if withheld["tags"] and v.party in private_parties and v.mount.shared is None and v.mount.master is None:
            return False
        if withheld["seen"] and (v.party, v.mount.mountpoint) in hidden:
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


def _experiment_mounts(parties) -> list[tuple[str, str, str]]:
    """(party, mount point, the same place in the node's terms) of every mount made in the live lab
    below the e2e host path."""
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
        for m in mounts:
            for p in paths:
                if mountinfo.is_under(m.mountpoint, p) and m.mountpoint != p:
                    found.append((party.name, m.mountpoint, E2E_HOST_PATH + m.mountpoint[len(p.rstrip("/")):]))
                    break
    return found


def experiment_live(parties) -> list[str]:
    """The mounts made in the live lab below the e2e host path, party by party ("party:path"): once
    there is one, what any party sees there is the e2e experiment's outcome, done by hand."""
    return [f"{party}:{mountpoint}" for party, mountpoint, _ in _experiment_mounts(parties)]


def revealing_places(env, node) -> tuple[list[str], list[str]]:
    """The mounts made by hand that a reset of the prediction exercise unmounts, named by where they
    are below their host path in the node's terms, not by who holds them (which parties see a mount
    is the experiment's outcome): (those below the e2e host path, those below the other host paths
    live_revealing finds)."""
    made = sorted({place for _, _, place in _experiment_mounts(node.parties())})
    elsewhere = sorted({f"{host_path.rstrip('/')}/{rel}" for host_path, entry in live_revealing(env, node).items()
                        for rel in entry["columns"]} - set(made))
    return made, elsewhere


def before_shell(env, parties, say, node=None, tool: str = "labkit shell") -> bool:
    """`labkit mounts exec` / `labkit shell` into any party of the live lab: once mounts were made
    below the e2e host path and the prediction is not kept yet, whatever the command prints can be
    the e2e experiment's outcome (the e2e Pods run exactly that experiment): like matrix and graph,
    it runs only once the prediction is written, which is then kept. False (and why, through
    `say`) when it must not run. `tool`: the command that runs it, as the kept prediction names it."""
    if env.lab.id != LAB or recorded_prediction(LAB) is not None:
        return True
    if experiment_live(parties):
        where = f"{E2E_HOST_PATH} (the e2e Pods' volume)"
        undo = f" (`labkit reset {LAB} {EXERCISE}` unmounts what was mounted there.)"
    else:
        from labkit.mounts.node import Node
        revealing = live_revealing(env, node if node is not None else Node(env))
        if not revealing:
            return True
        where = (f"{', '.join(sorted(revealing))}, where Pods of the e2e experiment's propagation modes view them "
                 "(whatever their names, namespaces or host path)")
        undo = f" (`labkit reset {LAB} {EXERCISE}` unmounts what was mounted there.)"
    kept = []
    if release(kept.append, tool):
        for note in kept:
            say(note)
        return True
    say(f"mounts were made below {where}: what any container or the node shows there now is part of the outcome "
        f"exercise {EXERCISE} asks you to predict. Write your prediction to its answer file first "
        f"(`labkit show {LAB} {EXERCISE}`); then this runs, and the check grades the prediction as it was at that "
        f"moment.{undo}")
    return False
