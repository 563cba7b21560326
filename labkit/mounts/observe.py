"""What each party of a live node sees, read from /proc/<pid>/mountinfo: the visibility matrix and
the peer-group graph (`labkit mounts matrix`, `labkit mounts graph`).

A party's *view* of a host path is where it sees that directory: the node at the path itself,
a container at the mountPath of a volume of that host path. The matrix compares the mounts
below each view (by path relative to the view); the graph links mounts by their propagation
fields: members of one peer group (the same shared:N), and the slaves of a group (master:N).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from labkit import graphviz
from labkit.mounts import kernel, mountinfo
from labkit.mounts.node import NODE, Node


@dataclass(frozen=True)
class View:
    party: str
    pid: int
    host_path: str
    path: str          # where the party sees the host path


def views(node: Node) -> list[View]:
    """The views of every host path a running container uses: the node's first, then the containers'."""
    parties = node.parties()
    host_paths: list[str] = []
    for p in parties:
        for v in p.volumes:
            if v.host_path not in host_paths:
                host_paths.append(v.host_path)
    node_party = parties[0]
    found = [View(NODE, node_party.pid, hp, hp) for hp in host_paths]
    found += [View(p.name, p.pid, v.host_path, v.path) for p in parties[1:] for v in p.volumes]
    return found


def _relative(path: str, base: str) -> str:
    return path[len(base.rstrip("/")) + 1:]


def volume_mount(view: View, mounts: list[mountinfo.Mount]) -> mountinfo.Mount | None:
    """The mount a view stands on: for the node the mount holding the host path, for a container
    the mount at its mountPath."""
    if view.party == NODE:
        return mountinfo.containing_mount(mounts, view.path)
    return mountinfo.visible_at(mounts, view.path)


def matrix(node: Node) -> dict:
    """{host path: {"columns": [relative paths], "rows": {party: {"path", "tags", "sees": {rel: source}}}}}."""
    table: dict[str, dict] = {}
    cache: dict[int, list[mountinfo.Mount]] = {}
    for view in views(node):
        mounts = cache.setdefault(view.pid, mountinfo.read(view.pid))
        below = mountinfo.submounts(mounts, view.path)
        sees = {}
        for m in below:          # later entries are mounted on top of earlier ones
            sees[_relative(m.mountpoint, view.path)] = m.source
        holder = volume_mount(view, mounts)
        entry = table.setdefault(view.host_path, {"columns": [], "rows": {}})
        entry["rows"][view.party] = {"path": view.path, "tags": holder.tags if holder else "", "sees": sees}
        for rel in sees:
            if rel not in entry["columns"]:
                entry["columns"].append(rel)
    for entry in table.values():
        entry["columns"].sort()
    return table


def render_matrix(table: dict) -> str:
    if not table:
        return "no running container uses a hostPath volume\n"
    out = []
    for host_path, entry in table.items():
        cols = entry["columns"]
        header = ["party", "sees hostPath at", "propagation", *cols]
        rows = [header]
        for party, row in entry["rows"].items():
            rows.append([party, row["path"], row["tags"] or "private",
                         *("yes" if c in row["sees"] else "-" for c in cols)])
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        hidden = entry.get("withheld")      # mounts a prediction exercise withholds (labkit.mounts.withhold)
        note = f" ({hidden} mount(s) below it withheld)" if hidden else "" if cols else " (nothing mounted below it)"
        out.append(f"hostPath {host_path}{note}")
        for i, r in enumerate(rows):
            out.append("  " + "  ".join(cell.ljust(widths[j]) for j, cell in enumerate(r)).rstrip())
            if i == 0:
                out.append("  " + "  ".join("-" * w for w in widths))
        out.append("")
    return "\n".join(out)


# -- the peer-group graph ----------------------------------------------------------------------


@dataclass(frozen=True)
class Vertex:
    party: str
    mount: mountinfo.Mount

    @property
    def key(self) -> str:
        return f"m_{self.party.replace('/', '_').replace('-', '_')}_{self.mount.mount_id}"

    def label(self) -> str:
        return f"{self.party}:{self.mount.mountpoint}"


def graph(node: Node) -> dict:
    """{"vertices": [...], "groups": {N: {"members": [...], "slaves": [...]}}, "private": [...]}."""
    seen: dict[tuple[str, int], Vertex] = {}
    cache: dict[int, list[mountinfo.Mount]] = {}
    for view in views(node):
        mounts = cache.setdefault(view.pid, mountinfo.read(view.pid))
        holder = volume_mount(view, mounts)
        for m in ([holder] if holder else []) + mountinfo.submounts(mounts, view.path):
            seen.setdefault((view.party, m.mount_id), Vertex(view.party, m))
    vertices = list(seen.values())
    groups: dict[int, dict] = {}
    for v in vertices:
        if v.mount.shared is not None:
            groups.setdefault(v.mount.shared, {"members": [], "slaves": []})["members"].append(v)
        if v.mount.master is not None:
            groups.setdefault(v.mount.master, {"members": [], "slaves": []})["slaves"].append(v)
    private = [v for v in vertices if v.mount.shared is None and v.mount.master is None]
    return {"vertices": vertices, "groups": dict(sorted(groups.items())), "private": private}


def render_graph_text(g: dict) -> str:
    lines = []
    for number, group in g["groups"].items():
        lines.append(f"peer group {number}")
        members = ", ".join(v.label() for v in group["members"]) or "(no member in view)"
        lines.append(f"  shared:{number}  members: {members}")
        if group["slaves"]:
            lines.append(f"  master:{number}  slaves:  " + ", ".join(v.label() for v in group["slaves"]))
    if g["private"]:
        lines.append("private (no peer group, no master)")
        lines.append("  " + ", ".join(v.label() for v in g["private"]))
    return "\n".join(lines) + "\n"


def render_graph_dot(g: dict) -> str:
    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph mount_propagation {", "  rankdir=LR;", '  node [shape=box, fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10];']
    by_party: dict[str, list[Vertex]] = {}
    for v in g["vertices"]:
        by_party.setdefault(v.party, []).append(v)
    for i, (party, vertices) in enumerate(by_party.items()):
        lines.append(f"  subgraph cluster_{i} {{ label={q(party)}; style=rounded;")
        for v in vertices:
            lines.append(f"    {v.key} [label={q(v.mount.mountpoint + chr(10) + (v.mount.tags or 'private'))}];")
        lines.append("  }")
    for number, group in g["groups"].items():
        lines.append(f'  g{number} [shape=ellipse, style=filled, fillcolor="#dde8f7", label={q(f"peer group {number}")}];')
        for v in group["members"]:
            lines.append(f'  {v.key} -> g{number} [dir=none, label={q(f"shared:{number}")}];')
        for v in group["slaves"]:
            lines.append(f'  g{number} -> {v.key} [style=dashed, label={q(f"master:{number}")}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_graph_image(g: dict, fmt: str) -> bytes:
    return graphviz.render(render_graph_dot(g), fmt)


# -- probing -----------------------------------------------------------------------------------


def _remove_probe_dir(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def _remove_probe(path: str) -> None:
    kernel.umount(path, lazy=True)
    try:
        os.rmdir(path)
    except OSError:
        pass    # still a mount point somewhere else, or not empty: the directory stays


def probe(node: Node, maker: tuple[int, str], observers: dict[str, tuple[int, str]],
          capabilities: int | None = None) -> dict[str, bool] | None:
    """Mount a fresh tmpfs at <maker path>/<probe> inside the maker's namespace and report, for
    each observer (pid, path), whether it sees that tmpfs at <its path>/<probe>; then remove it.

    The probe is mounted with all of labkit's capabilities (an observer from the node's side),
    or, given `capabilities`, by a process holding only those (a container's own process); when
    that process may not mount (EPERM), the answer is None.

    Mount events propagate synchronously (mount(2) returns after the copies exist), so one
    reading of each observer's mountinfo is the answer.
    """
    name = f"labkit-probe-{secrets.token_hex(4)}"
    pid, path = maker
    try:
        node.mount_tmpfs(pid, f"{path}/{name}", name, capabilities=capabilities)
    except PermissionError:
        node.run(pid, _remove_probe_dir, f"{path}/{name}")
        return None
    try:
        seen = {}
        for observer, (opid, opath) in observers.items():
            found = mountinfo.visible_at(mountinfo.read(opid), f"{opath}/{name}")
            seen[observer] = found is not None and found.source == name
        return seen
    finally:
        node.run(pid, _remove_probe, f"{path}/{name}")


PROBE_PLACES = ("one level below", "two levels below")


def _make_dirs(path: str) -> None:
    os.makedirs(path, exist_ok=True)


def _remove_dirs(paths: list[str]) -> None:
    for path in paths:
        try:
            os.rmdir(path)
        except OSError:
            pass


def probe_below(node: Node, maker: tuple[int, str], observers: dict[str, tuple[int, str]],
                capabilities: int | None = None, prepare: tuple[int, str] | None = None) -> list[dict[str, bool]] | None:
    """probe() at each of PROBE_PLACES: a tmpfs mounted one directory below the maker's path,
    then one mounted two directories below it; for each, which observers see it there.

    The directories are made first in `prepare` (pid, the same directory in its view; default:
    the maker), so that a read-only volume, on which mkdir fails but mount(2) does not, is probed
    too. None when the maker may not mount (EPERM)."""
    token = secrets.token_hex(4)
    places = [f"labkit-probe-{token}", f"labkit-probe-{token}-d/deeper"]
    where_pid, where_path = prepare or maker
    node.run(where_pid, _make_dirs, f"{where_path}/{places[0]}")
    node.run(where_pid, _make_dirs, f"{where_path}/{places[1]}")
    pid, path = maker
    results = []
    try:
        for number, place in enumerate(places):
            source = f"labkit-probe-{token}-{number}"
            try:
                node.mount_tmpfs(pid, f"{path}/{place}", source, capabilities=capabilities)
            except PermissionError:
                return None
            try:
                seen = {}
                for observer, (opid, opath) in observers.items():
                    found = mountinfo.visible_at(mountinfo.read(opid), f"{opath}/{place}")
                    seen[observer] = found is not None and found.source == source
                results.append(seen)
            finally:
                node.run(pid, kernel.umount, f"{path}/{place}", True)
        return results
    finally:
        node.run(where_pid, _remove_dirs, [f"{where_path}/{places[1]}", f"{where_path}/{places[1].split('/')[0]}",
                                           f"{where_path}/{places[0]}"])
