"""Parsing /proc/<pid>/mountinfo, including the propagation fields, as proc(5) describes it.

A line is: mount ID, parent ID, major:minor, root, mount point, mount options, zero or more
optional fields, a "-" separator, filesystem type, mount source, super options. The optional
fields carry propagation: `shared:N` (member of peer group N), `master:N` (slave of peer group
N), `propagate_from:N` (a slave whose immediate master is not reachable from the reading
process's root; N is the nearest dominating peer group it can see) and `unbindable`. No field
means private. Paths are relative to the root of the process the file belongs to, with space,
tab, newline and backslash written as octal escapes.

`findmnt` output is not parsed anywhere: its PROPAGATION column says "private,slave" for a pure
slave, which is easy to misread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from labkit.hostmounts import unescape  # octal escapes of mountinfo fields


@dataclass(frozen=True)
class Mount:
    mount_id: int
    parent_id: int
    device: str
    root: str
    mountpoint: str
    options: str
    fstype: str
    source: str
    super_options: str
    shared: int | None = None          # peer group id
    master: int | None = None          # peer group this mount is a slave of
    propagate_from: int | None = None
    unbindable: bool = False
    optional: tuple[str, ...] = field(default=())

    @property
    def propagation(self) -> str:
        """shared / slave / slave+shared / unbindable / private."""
        if self.shared is not None and self.master is not None:
            return "slave+shared"
        if self.shared is not None:
            return "shared"
        if self.master is not None:
            return "slave"
        return "unbindable" if self.unbindable else "private"

    @property
    def tags(self) -> str:
        """The propagation fields as mountinfo prints them ("shared:3 master:1"), "" when private."""
        return " ".join(self.optional)


def parse_line(line: str) -> Mount:
    fields = line.split(" ")
    try:
        sep = fields.index("-", 6)
    except ValueError:
        raise ValueError(f"mountinfo line without separator: {line!r}")
    optional = tuple(f for f in fields[6:sep] if f)
    shared = master = propagate_from = None
    unbindable = False
    for opt in optional:
        name, _, value = opt.partition(":")
        if name == "shared":
            shared = int(value)
        elif name == "master":
            master = int(value)
        elif name == "propagate_from":
            propagate_from = int(value)
        elif name == "unbindable":
            unbindable = True
    rest = fields[sep + 1:]
    return Mount(
        mount_id=int(fields[0]), parent_id=int(fields[1]), device=fields[2],
        root=unescape(fields[3]), mountpoint=unescape(fields[4]), options=fields[5],
        fstype=rest[0] if rest else "", source=unescape(rest[1]) if len(rest) > 1 else "",
        super_options=rest[2] if len(rest) > 2 else "",
        shared=shared, master=master, propagate_from=propagate_from, unbindable=unbindable,
        optional=optional,
    )


def parse(text: str) -> list[Mount]:
    return [parse_line(line) for line in text.splitlines() if line.strip()]


def read(pid: int | str = "self") -> list[Mount]:
    return parse(Path(f"/proc/{pid}/mountinfo").read_text())


def is_under(path: str, directory: str) -> bool:
    """`path` is `directory` or below it (whole path components only)."""
    if directory == "/":
        return path.startswith("/")
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def containing_mount(mounts: list[Mount], path: str) -> Mount | None:
    """The mount a path lives on, found the way containerd's mount.Lookup finds it (core/mount,
    containerd v2: moby/sys/mountinfo ParentsFilter, then the longest mount point).

    Faithful to it in two details: ParentsFilter is a plain string-prefix test (a mount on
    /srv/data is taken to hold /srv/data2), and of several mounts stacked on the longest mount
    point the first listed wins, which is the lowest of them, not the one a process sees.
    """
    best = None
    for m in mounts:
        if path.startswith(m.mountpoint) and (best is None or len(m.mountpoint) > len(best.mountpoint)):
            best = m
    return best


def visible_at(mounts: list[Mount], mountpoint: str) -> Mount | None:
    """The mount a process reaches at `mountpoint`: the last (topmost) one mounted there."""
    found = None
    for m in mounts:
        if m.mountpoint == mountpoint:
            found = m
    return found


def covered(mounts: list[Mount], mount: Mount) -> bool:
    """Whether a path lookup of `mount`'s mount point no longer reaches it: a mount listed after it
    (mounted later: a namespace's mountinfo lists its mounts in the order they joined it) sits at its
    mount point or at a directory above it, and is not one of the mounts `mount` is mounted on (its
    parents, which were there before it). A lookup crosses into that later mount first, so an
    unmount by path names the later one's directory, where `mount` is not."""
    ids = {m.mount_id: m for m in mounts}
    chain, parent = set(), ids.get(mount.parent_id)
    while parent is not None and parent.mount_id not in chain:
        chain.add(parent.mount_id)
        parent = ids.get(parent.parent_id)
    later = mounts[next(i for i, m in enumerate(mounts) if m is mount) + 1:]
    return any(is_under(mount.mountpoint, m.mountpoint) and m.mount_id not in chain for m in later)


def submounts(mounts: list[Mount], directory: str) -> list[Mount]:
    """Mounts strictly below `directory`."""
    return [m for m in mounts if m.mountpoint != directory and is_under(m.mountpoint, directory)]
