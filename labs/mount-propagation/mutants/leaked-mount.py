"""Near-misses of the clean-up: the reference's one step (umount the leaked mount on the node)
with another target (a directory above it, /var/lib/kubelet), in another namespace (the watcher,
with its own capabilities), lazily, or left out; a Pod deleted instead or as well; one mount too
many unmounted. Each is judged on the mount tables labkit.mounts.model predicts from the lab as
built (an unmount on the node reaches the copies in the peers and slaves of the mount it was made
on, fs/pnode.c propagate_umount), and applied live the same way."""

import copy

from labkit.errors import LabkitError
from labkit.mounts import model, mountinfo
from labkit.mounts.node import NODE, Node
from labkit.mutants import Mutant, tree_edits

KUBELET = "/var/lib/kubelet"


def mutants(ctx):
    lab = ctx.lab.environment_module()
    checks = ctx.lab._load("checks.py")
    solved = checks.observe_leak_cleaned(ctx)
    leak_path = f"{ctx.params['host_path']}/staging"
    before = copy.deepcopy(solved)
    for party, rows in lab.built(ctx.env)["leak"].items():
        if party in before["parties"]:
            before["parties"][party] += [[*row[:3], row[4] if len(row) > 4 else None] for row in rows]
    views = {p.name: p for p in Node(ctx.env).parties()}
    reference_ops = [{"do": "umount", "in": NODE, "target": leak_path, "lazy": False}]
    reference = predict(before, reference_ops, views)
    alternatives = {"[0].target": [ctx.params["host_path"], f"{KUBELET}/plugins", KUBELET], "[0].in": ["watcher"]}
    for edit in tree_edits(reference_ops, alternatives=alternatives, skip=lambda path: path.endswith(".do"), drop_keys=False):
        yield _mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""), f"steps: {edit.describe()}",
                      edit.value, before, views, reference, ("still there",))
    lazy_kubelet = [{"do": "umount", "in": NODE, "target": KUBELET, "lazy": True}]
    yield _mutant("lazy-umount-kubelet", "all of /var/lib/kubelet unmounted lazily on the node", lazy_kubelet, before,
                  views, reference, ("still there",), live=False)
    yield _mutant("delete-publisher", "the dead publisher's Pod deleted instead", [{"do": "delete", "pod": "publisher"}],
                  before, views, reference, ("still there",))
    yield _mutant("delete-watcher", "the Pod that has a copy (watcher) deleted instead", [{"do": "delete", "pod": "watcher"}],
                  before, views, reference, ("still there",))
    yield _mutant("and-delete-watcher", "the leak unmounted, and the watcher deleted as well",
                  reference_ops + [{"do": "delete", "pod": "watcher"}], before, views, reference, ("watcher", "no longer runs"))
    yield _mutant("and-umount-run", "the leak unmounted, and the node's /run as well",
                  reference_ops + [{"do": "umount", "in": NODE, "target": "/run", "lazy": True}], before, views, reference,
                  ("/run",), live=False)
    # the leak unmounted, then /var/lib/kubelet's own propagation changed on the node: it leaves
    # the peer group the Pods' volume mounts are peers and slaves of, even when it ends up shared
    for kinds in (["private", "shared"], ["private"], ["slave", "shared"], ["slave"]):
        reshape = [{"do": "make", "in": NODE, "target": KUBELET, "propagation": k} for k in kinds]
        yield _mutant("reshape-kubelet:" + "+".join(kinds), f"the leak unmounted, then {KUBELET} made "
                      + " then ".join(kinds), reference_ops + reshape, before, views, reference,
                      ("peer group",) if kinds[-1] == "shared" else (KUBELET,), live=False)
    yield _mutant("umount-in-watcher-privileged", "unmounted inside the watcher only, as if it could",
                  [{"do": "umount", "in": "watcher", "target": leak_path, "lazy": False, "all-capabilities": True}],
                  before, views, reference, ("still there",))


def _mutant(name, change, ops, before, views, reference, names, live=True):
    observation = predict(before, ops, views)
    same = observation == reference
    return Mutant(name, change, names=() if same else names, observation=observation,
                  equivalent="labkit.mounts.model gives every party the same mount table" if same else None,
                  apply=steps(ops) if live else None)


def predict(before, ops, views):
    """The parties' mount tables after `ops` (labkit.mounts.model's rules for unmounts)."""
    parties = copy.deepcopy(before["parties"])
    for op in ops:
        if op["do"] == "delete":
            for name in [n for n, p in views.items() if p.pod == op["pod"]]:
                parties.pop(name, None)
            continue
        if op["do"] == "make":              # a propagation change of the node's own mount: no event sent
            parties[NODE] = [[mp, src, _made(tags, op["propagation"], parties) if mp == op["target"] else tags, *rest]
                             for mp, src, tags, *rest in parties[NODE]]
            continue
        where = op["in"]
        party = views.get(where)
        if where not in parties or party is None:
            continue
        if where != NODE and not op.get("all-capabilities") and not (party.capabilities or 0) >> 21 & 1:
            continue                                   # EPERM: no CAP_SYS_ADMIN in the container
        rows = parties[where]
        table = model.NodeTable.from_rows([[mp, src, "", tags, "/"] for mp, src, tags, *_ in rows])
        parent = next((e for e in reversed(table.entries) if e.mountpoint != op["target"]
                       and mountinfo.is_under(op["target"], e.mountpoint)), None)
        try:
            table.umount(op["target"], lazy=op["lazy"])
        except OSError:
            continue
        parties[where] = [row for row in rows if [row[0], row[1]] in [[e.mountpoint, e.source] for e in table.entries]]
        group = model.parse_tags(parent.tags)[0] if parent else None
        if group is None:
            continue
        for other, other_rows in parties.items():       # the copies in the peers and slaves of the parent
            if other == where:
                continue
            view = _where(views[other], op["target"])
            holder = mountinfo.containing_mount(_mounts(other_rows), view.rsplit("/", 1)[0] or "/") if view else None
            if view is None or holder is None or group not in model.parse_tags(holder.tags):
                continue
            parties[other] = [row for row in other_rows if not mountinfo.is_under(row[0], view)]
    return {"parties": parties, "pids": before.get("pids", {})}


def _made(tags, kind, parties):
    """The tags of a mount after mount --make-<kind> (labkit.mounts.model.NodeTable.change's rules:
    shared keeps its group or gets a new one; slave becomes a slave of its group when it had peers;
    private leaves both)."""
    shared, master = model.parse_tags(tags)
    used = [g for rows in parties.values() for _mp, _src, t, *_ in rows for g in model.parse_tags(t) if g is not None]
    if kind == "shared":
        return model.format_tags(shared if shared is not None else max([model.GROUPS_FROM - 1, *used]) + 1, master)
    if kind == "slave":
        peers = shared is not None and sum(f"shared:{shared}" in t.split() for rows in parties.values()
                                           for _mp, _src, t, *_ in rows) > 1
        return model.format_tags(None, shared if peers else master)
    return ""


def _mounts(rows):
    return [mountinfo.Mount(i, 0, "", "/", mp, "", "", src, "", optional=tuple(tags.split()),
                            shared=model.parse_tags(tags)[0], master=model.parse_tags(tags)[1])
            for i, (mp, src, tags, *_) in enumerate(rows)]


def _where(party, host_path):
    """Where `party` sees the node's `host_path`, or None."""
    if party.name == NODE:
        return host_path
    for v in party.volumes:
        if mountinfo.is_under(host_path, v.host_path):
            return v.path + host_path[len(v.host_path.rstrip("/")):]
    return None


def steps(ops):
    def apply(env):        # on the solved lab: this exercise's part afresh, then the steps
        env.lab.environment_module().reset_exercise(env, "leaked-mount")
        node = Node(env)
        for op in ops:
            try:
                if op["do"] == "delete":
                    node.delete(op["pod"])
                    continue
                party = node.party(op["in"])
                caps = None if op["in"] == NODE or op.get("all-capabilities") else party.capabilities
                node.umount(party.pid, op["target"], lazy=op["lazy"], capabilities=caps)
            except (OSError, RuntimeError, LabkitError):
                pass
    return apply
