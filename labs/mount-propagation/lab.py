"""The mount-propagation lab: a node whose /var/lib/kubelet is rshared, as kubelet keeps it, and Pods.

Built from labkit.mounts only: the node and every container are processes holding mount
namespaces of their own (nothing is mounted in the host's namespace). The Pods are created from
the shipped files in this directory; copies go to <lab dir>/pods/, where students edit them.

  master, slave, private, default   the e2e test's four Pods on /var/lib/kubelet/e2e
  reader                            mountPropagation None on /var/lib/kubelet/shared (exercise b)
  watcher                           HostToContainer on all of /var/lib/kubelet (sees what others publish)
  csi-node                          not created: Bidirectional without privileged (exercise c)
  logger                            HostToContainer on /srv/data, a private directory: refused (exercise d)
  publisher                         Bidirectional; mounts a staging tmpfs, then dies (exercise e)

The students' Pod files are their work: <lab dir>/pods/ is not in the ledger, so no teardown
(`labkit reset`, `labkit cleanup`) deletes it. A reset that puts a shipped file back first copies
the student's edited version beside it (pods/<name>.yaml.yours, .yours.1, ...), and says so.

What the node looked like right after the build (its mounts and their propagation, which
parties hold the leaked mount) is kept in <lab dir>/mounts/built.json: the checks judge "what must
not change" against it.
"""

import json
import sys
from pathlib import Path

from labkit.errors import LabkitError
from labkit.mounts import kernel, mountinfo
from labkit.mounts.node import NODE, Node
from labkit.mounts.pods import load_pods
from labkit.shell import Host
from labkit.state import write_json_atomic

HERE = Path(__file__).resolve().parent
KUBELET_DIR = "/var/lib/kubelet"
PRIVATE_DIR = "/srv/data"
STARTED = ("e2e", "reader", "watcher", "logger", "publisher")
# What the publisher mounts before it dies (exercise e): inside its container, and its source.
LEAK_PATH = "/plugin/staging"
LEAK_SOURCE = "publisher-staging"
LEAK_HOST_PATH = f"{KUBELET_DIR}/plugins/publisher/staging"      # where the node receives it (Bidirectional)
E2E_PODS = ("master", "slave", "private", "default")
# Each exercise's part of the lab: the shipped Pod files (and the Pods made from them) and the
# host paths below which the node's mounts belong to it.
# host paths the lab built no mount on: a reset of their exercise also unmounts what covers them
# (a tmpfs on the e2e host path, made on the node or by master and propagated, hides the e2e volume
# whose peer groups peer-groups asks about)
COVERED_TOO = (f"{KUBELET_DIR}/e2e",)
PARTS = {
    "predict-e2e-matrix": {"files": (), "pods": (), "paths": ()},
    "peer-groups": {"files": ("e2e",), "pods": E2E_PODS, "paths": (f"{KUBELET_DIR}/e2e",)},
    "node-mounts-reach-reader": {"files": ("reader",), "pods": ("reader",), "paths": (f"{KUBELET_DIR}/shared",)},
    "csi-plugin-publishes": {"files": ("csi-node",), "pods": ("csi-node",), "paths": (f"{KUBELET_DIR}/pods",)},
    "private-host-path": {"files": ("logger",), "pods": ("logger",), "paths": (PRIVATE_DIR,)},
    "leaked-mount": {"files": ("publisher",), "pods": ("publisher",), "paths": (f"{KUBELET_DIR}/plugins/publisher",)},
}
SHIPPED_FILES = ("csi-node", "e2e", "logger", "publisher", "reader", "watcher")


def pods_dir(env) -> Path:
    return Path(env.dir) / "pods"


def shipped(name: str) -> Path:
    """The shipped Pod file `name` (the lab is built from these, never from the students' copies)."""
    return HERE / "pods" / f"{name}.yaml"


def shipped_pods() -> dict:
    """Pod name -> the Pod as shipped, for every Pod of the lab."""
    return {pod.name: pod for name in SHIPPED_FILES for pod in load_pods(shipped(name))}


def built_path(env) -> Path:
    return Path(env.dir) / "mounts" / "built.json"


def built(env) -> dict:
    """What the node looked like right after the build (see the module docstring)."""
    try:
        return json.loads(built_path(env).read_text())
    except (OSError, ValueError):
        return {"node": [], "leak_holders": []}


# -- the students' Pod files -----------------------------------------------------------------


def _aside(path: Path) -> Path:
    """Where the student's version of `path` is kept: the first free pods/<name>.yaml.yours[.N]."""
    candidate = path.with_name(path.name + ".yours")
    number = 0
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}.yours.{number}")
    return candidate


def _kept_copy(path: Path) -> Path | None:
    """A copy kept aside before that holds what `path` holds now, if there is one."""
    data = path.read_bytes()
    for candidate in sorted(path.parent.glob(path.name + ".yours*")):
        try:
            if candidate.read_bytes() == data:
                return candidate
        except OSError:
            continue
    return None


def edited_files(env, names) -> list[Path]:
    """The students' copies among `names` that differ from the shipped files."""
    out = []
    for name in names:
        path = pods_dir(env) / f"{name}.yaml"
        try:
            if path.read_text() != shipped(name).read_text():
                out.append(path)
        except FileNotFoundError:
            pass           # gone: putting it back loses nothing
        except (OSError, UnicodeDecodeError):
            out.append(path)
    return out


def restore_files(env, names) -> list[str]:
    """Put the shipped versions of `names` into pods/ (the directory itself stays, so a shell
    inside it keeps seeing it); an edited copy is first kept beside it. Returns what was kept."""
    directory = pods_dir(env)
    directory.mkdir(parents=True, exist_ok=True)
    kept = []
    for path in edited_files(env, names):
        same = _kept_copy(path)
        if same is None:
            same = _aside(path)
            same.write_bytes(path.read_bytes())
        kept.append(f"your {path} is kept as {same}")
    for name in names:
        path = directory / f"{name}.yaml"
        original = shipped(name).read_text()
        if not path.exists() or path.read_text(errors="replace") != original:
            path.write_text(original)
    for line in kept:
        sys.stderr.write(f"{line}; {directory}/ has the shipped version again\n")
        env.log(line)
    return kept


# -- building ----------------------------------------------------------------------------------


def up(env):
    node = Node(env)
    node.start([{"path": KUBELET_DIR, "propagation": "shared"}], dirs=(PRIVATE_DIR,))
    restore_files(env, SHIPPED_FILES)
    node.apply_all([pod for name in STARTED for pod in load_pods(shipped(name))])
    _leak(env, node)
    _record_built(env, node)
    env.log("node and Pods are up; the publisher died after publishing its staging mount")


def _leak(env, node: Node) -> None:
    publisher = node.container_state("publisher", "publisher")
    node.mount_tmpfs(publisher["pid"], LEAK_PATH, LEAK_SOURCE, "staged")
    node.stop("publisher", "publisher", reason="Error")


def _record_built(env, node: Node) -> None:
    write_json_atomic(built_path(env), {
        "node": [[m.mountpoint, m.source, m.propagation, m.tags, m.root, m.device] for m in node.mounts()
                 if m.source != LEAK_SOURCE],
        **leaked_copies(node), **kubelet_relations(node)})


def leaked_copies(node: Node) -> dict:
    """Every copy of the mount the publisher just leaked: {"leak_holders": [party], "leak": {party:
    [[mount point, source, tags, root, device]]}}. The leak is the mount the node received at
    LEAK_HOST_PATH; its device (major:minor of the tmpfs's superblock, the same in every copy: a
    bind or a propagated copy shares it) with its source is what leaked-mount judges by, as a
    tmpfs a student mounts has a device of its own, whatever its source says."""
    devices = {m.device for m in node.mounts() if m.mountpoint == LEAK_HOST_PATH and m.source == LEAK_SOURCE}
    leak = {}
    for party in node.parties():
        rows = [[m.mountpoint, m.source, m.tags, m.root, m.device] for m in mountinfo.read(party.pid)
                if m.device in devices and m.source == LEAK_SOURCE]
        if rows:
            leak[party.name] = rows
    return {"leak_holders": sorted(leak), "leak": leak}


def leak_identity(built_state: dict) -> set[tuple[str, str]]:
    """(device, source) of the leaked filesystem as built; empty for a lab built before devices
    were recorded (then its source alone names it)."""
    return {(row[4], row[1]) for rows in (built_state.get("leak") or {}).values() for row in rows if len(row) > 4}


def every_leak(built_state: dict) -> set[tuple[str, str]]:
    """(device, source) of every filesystem the publisher leaked since the lab was built: the one
    leaked now (leak_identity) and those leaked before a reset of leaked-mount made a new one. A
    reset unmounts the leak where it leaked, but not a copy of it the student bound elsewhere
    (/var/lib/kubelet/keep, say): that copy still holds what the dead publisher published."""
    return leak_identity(built_state) | {tuple(row) for row in built_state.get("leaked_before") or [] if len(row) == 2}


def kubelet_relations(node: Node) -> dict:
    """Which mounts of the running Pods are peers ("peer": shared:N) or slaves ("slave": master:N)
    of the node's /var/lib/kubelet peer group N, and the pid of each Pod's process then (a Pod
    started again since is another container, in whatever group it was started in):
    {"relations": {party: [[mount point, "peer" | "slave"]]}, "pids": {party: pid}}."""
    mounts = node.mounts()
    kubelet = mountinfo.visible_at(mounts, KUBELET_DIR)
    group = kubelet.shared if kubelet is not None and kubelet.mountpoint == KUBELET_DIR else None
    relations, pids = {}, {}
    for party in node.parties():
        if party.name == NODE:
            continue
        pids[party.name] = party.pid
        rows = [[m.mountpoint, "peer" if m.shared == group else "slave"] for m in mountinfo.read(party.pid)
                if group is not None and m.source != LEAK_SOURCE and group in (m.shared, m.master)]
        if rows:
            relations[party.name] = rows
    return {"relations": relations, "pids": pids}


def relation_losses(built_state: dict, parties: dict, pids: dict, fields: bool = True) -> list[str]:
    """The Pods whose mounts were peers or slaves of the node's /var/lib/kubelet when the lab was
    built and no longer are of the peer group the node's /var/lib/kubelet is in now, as
    "party mount-point (tags now)" (without `fields`: "party mount-point", for a message shown
    before peer-groups has passed, which asks to read those fields); `parties`: name -> rows
    [mount point, source, tags] of every running party; `pids`: name -> pid. Pods started again
    since the build are not counted.
    Propagation relations are the kernel's peer groups and master links (fs/pnode.c)."""
    node_rows = parties.get(NODE, [])
    kubelet = [tags for mp, _source, tags, *_ in node_rows if mp == KUBELET_DIR]
    group = _shared_of(kubelet[-1]) if kubelet else None
    lost = []
    for name, rows in sorted((built_state.get("relations") or {}).items()):
        if name not in parties or pids.get(name) != (built_state.get("pids") or {}).get(name):
            continue
        for mountpoint, kind in rows:
            here = [tags for mp, _source, tags, *_ in parties[name] if mp == mountpoint]
            wanted = f"shared:{group}" if kind == "peer" else f"master:{group}"
            if group is None or not any(wanted in tags.split() for tags in here):
                now = f" ({' / '.join(t or 'private' for t in here) or 'gone'})" if fields or not here else ""
                lost.append(f"{name} {mountpoint}{now}")
    return lost


def _shared_of(tags: str) -> int | None:
    for item in tags.split():
        if item.startswith("shared:") and item[7:].isdigit():
            return int(item[7:])
    return None


def is_up(env):
    return Node(env).pid is not None


# -- resetting one exercise, and what a reset reverts ------------------------------------------------


def _unmount_below(node: Node, path: str, including: bool = False) -> None:
    """Unmount, on the node, every mount below `path` (and on it, with `including`), deepest first;
    lazily, as a busy one would otherwise stay. The unmounts propagate to every peer and slave. A
    mount the node made on `path` itself afterwards (a student's tmpfs over the directory) hides
    those below it from an unmount by path: it goes first (mountinfo.covered)."""
    pid = node.require_pid()
    for _ in range(32):
        table = node.mounts(pid)
        mounts = [m for m in table if mountinfo.is_under(m.mountpoint, path) and (including or m.mountpoint != path)]
        if not mounts:
            return
        reachable = [m for m in mounts if not mountinfo.covered(table, m)]
        cover = mountinfo.visible_at(table, path)
        if reachable:
            target = max(reachable, key=lambda m: (m.mountpoint.count("/"), m.mount_id))
        elif cover is not None:
            target = cover
        else:
            break           # hidden by a mount above `path`
        node.umount(pid, target.mountpoint, lazy=True)
    raise LabkitError(f"the node keeps mounts below {path}")


def _outside_kubelet(mountpoint: str) -> bool:
    return not mountinfo.is_under(mountpoint, KUBELET_DIR)


def _restore_node_outside_kubelet(env, node: Node) -> None:
    """The node's mounts outside /var/lib/kubelet as built: the ones added since unmounted, the
    ones whose propagation changed made private again (every one of them was built private);
    and below /var/lib/kubelet, binds of the node's own files it was not built with (a new
    filesystem there is a Pod's or another exercise's)."""
    pid = node.require_pid()
    table = built(env)["node"]
    known = {(entry[0], entry[1], entry[4]) for entry in table}
    node_files = {entry[5] for entry in table if len(entry) > 5}
    for _ in range(64):    # the newest first: a mount stacked on another, or on its parent, goes before it
        extra = [m for m in node.mounts(pid) if (_outside_kubelet(m.mountpoint) or m.device in node_files)
                 and (m.mountpoint, m.source, m.root) not in known]
        if not extra:
            break
        node.umount(pid, max(extra, key=lambda m: m.mount_id).mountpoint, lazy=True)
    else:
        raise LabkitError("the node keeps mounts it was not built with (outside /var/lib/kubelet, or binds of its files)")
    wanted = {(entry[0], entry[1]): entry[2] for entry in table}
    for m in node.mounts(pid):
        if _outside_kubelet(m.mountpoint) and wanted.get((m.mountpoint, m.source)) == "private" \
                and m.propagation != "private":
            node.run(pid, kernel.change_propagation, m.mountpoint, "private")


def kubelet_is_shared(node: Node) -> bool:
    """Whether the node's /var/lib/kubelet is still one shared mount of its own, as kubelet keeps it:
    both the mount a process reaches there and the one containerd's lookup finds (the first
    listed of the longest mount point, mountinfo.containing_mount) are shared."""
    mounts = node.mounts()
    on_it = mountinfo.visible_at(mounts, KUBELET_DIR)
    looked_up = mountinfo.containing_mount(mounts, KUBELET_DIR)
    return on_it is not None and on_it.shared is not None and looked_up is not None \
        and looked_up.mountpoint == KUBELET_DIR and looked_up.shared is not None


def _make_rshared(path: str) -> None:
    kernel.bind(path, path)
    kernel.change_propagation(path, "shared", recursive=True)


def _repair_kubelet(env, node: Node, keep_leak: bool = True) -> None:
    """When the node lost /var/lib/kubelet's shared mount (unmounted, made private, covered), take
    every mount off /var/lib/kubelet and do what kubelet does when it starts (MakeRShared: bind
    the directory onto itself, make it rshared); then restart every Pod with a hostPath below it
    that is not dead, with the spec it has: their volume mounts belong to a peer group that no
    longer reaches the node. The dead publisher's leak, when some party still held it, is made
    again (with `keep_leak`): repairing /var/lib/kubelet is not cleaning it up."""
    if kubelet_is_shared(node) and not _relations_lost(env, node):
        return
    leaked = leak_held(env, node)
    pid = node.require_pid()
    while mountinfo.visible_at(node.mounts(pid), KUBELET_DIR) is not None:
        node.umount(pid, KUBELET_DIR, lazy=True)
    node.run(pid, _make_rshared, KUBELET_DIR)
    for name in node.pod_names():
        pod = node.pod(name)
        uses = any(mountinfo.is_under(v.path, KUBELET_DIR) for v in pod.volumes.values())
        dead = all(node.container_state(name, c.name)["state"] == "terminated" for c in pod.containers)
        if uses and not dead:
            node.delete(name)
            node.apply_all([pod])
    if leaked and keep_leak:
        # the leak went with the old mount (and with the restarted Pods' copies), but nobody cleaned
        # it up: the dead publisher's mount is made again, or leaked-mount would pass for a reset
        _leak_again(env, node)
    _record_relations(env, node)       # the restarted Pods, in the new peer group
    env.log(f"{KUBELET_DIR} was no longer kubelet's shared mount, or no longer the peer group its Pods were started "
            "in: bound onto itself and made rshared again, its Pods restarted")


def leak_held(env, node: Node) -> bool:
    """Whether the node or a running Pod still holds a filesystem the publisher leaked (every_leak;
    for a lab built before devices were recorded, its source names it), as leaked-mount judges."""
    leak = every_leak(built(env))
    for party in node.parties():
        for m in mountinfo.read(party.pid):
            if ((m.device, m.source) in leak) if leak else m.source == LEAK_SOURCE:
                return True
    return False


def _leak_again(env, node: Node) -> None:
    """The publisher started again as shipped, its staging mount published, and the publisher dead
    again: a new filesystem, recorded as the leak; the ones leaked before stay leaks (every_leak)."""
    _recreate(env, node, ("publisher",))
    _leak(env, node)
    state = built(env)          # a new tmpfs: a device of its own
    earlier = leak_identity(state) | {tuple(row) for row in state.get("leaked_before") or []}
    state.update(leaked_copies(node))
    # the filesystem leaked before is the publisher's too: a copy of it that outlived a reset (a
    # bind the student made of it) is still a leak (every_leak)
    state["leaked_before"] = sorted([list(row) for row in earlier - leak_identity(state)])
    write_json_atomic(built_path(env), state)


def _relations_lost(env, node: Node) -> list[str]:
    parties = {p.name: [[m.mountpoint, m.source, m.tags] for m in mountinfo.read(p.pid)] for p in node.parties()}
    return relation_losses(built(env), parties, {p.name: p.pid for p in node.parties()})


def _recreate(env, node: Node, pod_names) -> None:
    """Delete these Pods and create them again as shipped (the ones the lab starts)."""
    originals = shipped_pods()
    for name in pod_names:
        node.delete(name)
    started = {pod.name for name in STARTED for pod in load_pods(shipped(name))}
    node.apply_all([originals[name] for name in pod_names if name in started])


def reset_exercise(env, exercise_id):
    """That exercise's part afresh: its Pods deleted and created as shipped, the node's mounts below
    its host paths unmounted, its Pod file put back (the student's edited copy kept beside it).
    Answer files and the other exercises' parts stay as they are."""
    part = PARTS[exercise_id]
    node = Node(env)
    _repair_kubelet(env, node, keep_leak=exercise_id != "leaked-mount")     # that one leaks anew below
    for name in part["pods"]:
        node.delete(name)
    if exercise_id == "private-host-path":
        _restore_node_outside_kubelet(env, node)
    for path in part["paths"]:
        _unmount_below(node, path, including=path in COVERED_TOO)
    restore_files(env, part["files"])
    if exercise_id in ("leaked-mount", "csi-plugin-publishes"):     # the observer both checks need
        watcher = node.container_state("watcher", "watcher")
        if watcher["state"] != "running" or node.pod("watcher") != shipped_pods()["watcher"]:
            _recreate(env, node, ("watcher",))
    if exercise_id == "leaked-mount":
        _leak_again(env, node)
    else:
        _recreate(env, node, part["pods"])
    if exercise_id == "predict-e2e-matrix":
        _unmount_e2e_experiment(node)
        _unmount_revealing(env, node)
    _record_relations(env, node)


def _unmount_e2e_experiment(node: Node) -> None:
    """The e2e experiment done by hand in the live lab undone: every mount below the e2e host path
    unmounted, on the node first (which reaches its peers and slaves), then in each container that
    kept one of its own (None and HostToContainer send nothing back); the Pods keep running, so
    their peer groups stay what peer-groups asks about."""
    from labkit.mounts import withhold

    for party in node.parties():
        for path in withhold.e2e_paths(party):
            for _ in range(32):
                mounts = [m for m in node.mounts(party.pid) if mountinfo.is_under(m.mountpoint, path)
                          and m.mountpoint != path]
                if not mounts:
                    break
                deepest = max(mounts, key=lambda m: (m.mountpoint.count("/"), m.mount_id))
                node.umount(party.pid, deepest.mountpoint, lazy=True)


def _unmount_revealing(env, node: Node) -> None:
    """The same experiment done elsewhere undone: every mount made since the lab was built below a
    host path where parties of the e2e experiment's propagation modes view it (copies of the e2e
    Pods, the node and a HostToContainer Pod: withhold.live_revealing, which is what mounts exec,
    shell, matrix and graph withhold) unmounted in each party that holds it, deepest first, lazily."""
    from labkit.mounts import withhold

    for _ in range(8):
        revealing = withhold.live_revealing(env, node)
        held = sorted({m for entry in revealing.values() for m in entry["mounts"]},
                      key=lambda m: (-m[1].count("/"), m))
        if not held:
            return
        pids = {p.name: p.pid for p in node.parties()}
        for party, mountpoint in held:
            try:
                node.umount(pids[party], mountpoint, lazy=True)
            except (OSError, KeyError):
                pass        # gone already: an unmount on a shared mount reaches its peers and slaves
    raise LabkitError("mounts made below host paths the e2e Pods' modes share stay mounted")


def _revealing_mounts(env, node: Node) -> list[str]:
    from labkit.mounts import withhold

    return sorted({f"{party}:{mountpoint}" for entry in withhold.live_revealing(env, node).values()
                   for party, mountpoint in entry["mounts"]})


def _record_relations(env, node: Node) -> None:
    """The Pods' relations with the node's /var/lib/kubelet as the lab is now (after a reset, which
    repaired /var/lib/kubelet first and may have started Pods again): what leaked-mount keeps."""
    state = built(env)
    state.update(kubelet_relations(node))
    write_json_atomic(built_path(env), state)


def student_work(env, exercise_id):
    """What a reset of `exercise_id` (None: the whole lab) would revert of the student's work."""
    from labkit.mounts import withhold

    node = Node(env)
    if node.pid is None:
        return []
    ids = [exercise_id] if exercise_id else list(PARTS)
    out = []
    files = [name for i in ids for name in PARTS[i]["files"]] if exercise_id else list(SHIPPED_FILES)
    for path in edited_files(env, files):
        out.append(f"your edits to {path} (the shipped version comes back; yours is kept as "
                   f"{_kept_copy(path) or _aside(path)})")
    originals = shipped_pods()
    node_mounts = node.mounts()
    # Which parties hold a mount made where parties of the e2e experiment's propagation modes view
    # it is the outcome predict-e2e-matrix asks to predict: while no prediction is kept, such a
    # mount is named by its place in the node's terms, never by who holds it (the node included).
    kept = withhold.recorded_prediction(env.lab.id) is not None
    made_at, elsewhere_at = ([], []) if kept else withhold.revealing_places(env, node)
    hidden = {*made_at, *elsewhere_at}
    for i in ids:
        part = PARTS[i]
        for name in part["pods"]:
            pod = node.pod(name)
            if name == "csi-node":
                if pod is not None:
                    out.append("the Pod csi-node you created (it is deleted)")
            elif pod is None:
                out.append(f"your deletion of the Pod {name} (it is created again)")
            elif pod != originals[name]:
                out.append(f"the Pod {name} you changed (it is created again as shipped)")
            elif name == "logger" and node.container_state(name, "logger")["state"] == "running":
                out.append("the running logger container (the Pod is created again as shipped; the runtime refuses "
                           "its container again until the node is fixed)")
        for path in part["paths"]:
            below = [m.mountpoint for m in node_mounts if mountinfo.is_under(m.mountpoint, path)
                     and (m.mountpoint != path or path in (PRIVATE_DIR, *COVERED_TOO)) and m.source != LEAK_SOURCE]
            shown = [mountpoint for mountpoint in below if mountpoint not in hidden]
            if shown:
                out.append(f"the mounts on the node at or below {path}: {', '.join(shown)} (unmounted)")
            withheld = sorted(place for place in hidden if mountinfo.is_under(place, path))
            if withheld and "predict-e2e-matrix" not in ids:
                out.append(f"the mounts made at or below {path} where Pods of the e2e experiment's propagation modes "
                           f"view them: {', '.join(withheld)} (those the node holds are unmounted; which parties hold "
                           "them is the outcome predict-e2e-matrix asks you to predict)")
        if i == "predict-e2e-matrix" and not kept:
            if made_at:
                out.append(f"the mounts made below the e2e Pods' volume: {', '.join(made_at)} (unmounted wherever "
                           "they are; which parties hold them is the outcome predict-e2e-matrix asks you to predict)")
            if elsewhere_at:
                out.append("the mounts made where Pods of the e2e experiment's propagation modes view them: "
                           f"{', '.join(elsewhere_at)} (unmounted wherever they are; which parties hold them is the "
                           "outcome predict-e2e-matrix asks you to predict)")
        elif i == "predict-e2e-matrix":
            made = withhold.experiment_live(node.parties())
            if made:
                out.append(f"the mounts made below the e2e Pods' volume: {', '.join(made)} (unmounted)")
            elsewhere = [m for m in _revealing_mounts(env, node) if m not in made]
            if elsewhere:
                out.append("the mounts made where Pods of the e2e experiment's propagation modes view them: "
                           f"{', '.join(elsewhere)} (unmounted)")
        if i == "private-host-path":
            table = built(env)["node"]
            known = {(entry[0], entry[1], entry[4]) for entry in table}
            node_files = {entry[5] for entry in table if len(entry) > 5}
            extra = [m.mountpoint for m in node_mounts if not mountinfo.is_under(m.mountpoint, PRIVATE_DIR)
                     and (_outside_kubelet(m.mountpoint) or m.device in node_files)
                     and (m.mountpoint, m.source, m.root) not in known]
            if extra:
                out.append(f"the mounts you added on the node: {', '.join(extra)} (unmounted)")
            # what _restore_node_outside_kubelet makes private again
            wanted = {(entry[0], entry[1]): entry[2] for entry in table}
            changed = [f"{m.mountpoint} ({m.propagation})" for m in node_mounts if _outside_kubelet(m.mountpoint)
                       and wanted.get((m.mountpoint, m.source)) == "private" and m.propagation != "private"]
            if changed:
                out.append(f"the propagation you gave the node's mounts: {', '.join(changed)} (made private again, "
                           "as the node was built)")
        if (not kubelet_is_shared(node) or _relations_lost(env, node)) and f"the node's {KUBELET_DIR}" not in " ".join(out):
            again = ("; the dead publisher's mount, which is still there, is published in it again"
                     if i != "leaked-mount" and leak_held(env, node) else "")
            # a new mount in a new peer group: the kernel numbers it anew (the lowest free id), so the
            # shared:N and master:N that mountinfo showed before need not be the ones after
            out.append(f"the node's {KUBELET_DIR} as you left it (it is made a shared mount again, as kubelet makes it, "
                       "and the running Pods that use it are restarted, so that they are its peers and slaves again, in a "
                       f"new peer group whose shared:N and master:N in mountinfo may not be the ones read before{again})")
        if i == "leaked-mount" and not any(m.source == LEAK_SOURCE for m in node_mounts):
            out.append("your clean-up of the leaked staging mount (the dead publisher's mount is made again)")
    if exercise_id is None:
        known = set(originals)
        extra = [name for name in node.pod_names() if name not in known]
        if extra:
            out.append(f"the Pods you created: {', '.join(extra)} (the rebuilt node has none of them)")
    return out


def hosts(env):
    node = Node(env)
    if node.pid is None:
        return {}
    found = {}
    for party in node.parties():
        if party.name == NODE:
            found[party.name] = Host("the node (kubelet's mount namespace)", pid=party.pid)
        else:     # as kubectl exec: a process of the container, with the container's capabilities
            found[party.name] = Host(f"container {party.container} of Pod {party.pod}", pid=party.pid,
                                     wrapper=kernel.exec_wrapper(party.capabilities or 0))
    return found


def before_shell(env, host_name):
    """A command in the node or a container shows the e2e experiment's outcome once mounts were made
    below its host path, or below any host path viewed by parties of its propagation modes: only
    after the prediction is written (labkit.mounts.withhold.before_shell)."""
    from labkit.mounts import withhold

    withhold.gate_command(env, Node(env), "labkit shell")


def after_shell(env, host_name, started):
    """Once a command or shell in the node or a container has ended: a try of the e2e experiment by
    hand before any prediction is kept (labkit.mounts.withhold.after_command)."""
    from labkit.mounts import withhold

    return withhold.after_command(env, started, f"labkit mounts exec / labkit shell into {host_name}")


def access(env):
    return f"""## Your node and Pods

- Pod files (edit these): `{pods_dir(env)}/` (a reset puts the shipped ones back and keeps your edited copies beside them, as `NAME.yaml.yours`)
- `labkit mounts get` — Pods, their volume mounts and container states
- `labkit mounts exec node -- findmnt -o TARGET,PROPAGATION,OPT-FIELDS` — a command on the node
- `labkit mounts exec slave -- cat /proc/self/mountinfo` — a command in a container (also `labkit shell {env.lab.id} slave`)
- `labkit mounts apply -f FILE`, `labkit mounts delete POD`
- `labkit mounts matrix` and `labkit mounts graph` — who sees what, live
- `labkit mounts play -f SCENARIO.yaml` — an experiment on a fresh node (scenarios: `{HERE}/scenarios/`)
"""
