"""labkit's reconstruction of mount propagation, without making a mount: which propagation a
container's volume mount gets, which mount events reach whom, and what mount(8) commands run on
the node do to its mount table. The checks of the mount-propagation lab judge what they observe
live; this module predicts the same observations for near-misses of a solution (labkit.mutants),
and tests compare both on the live lab.

The rules, each from the code that makes them so:

  volume_tags     a volume's bind inside the container (runc libcontainer/rootfs_linux.go
                  mountToRootfs: rbind, then mountPropagate with the OCI option containerd chose
                  in internal/cri/opts/spec_linux_opts.go WithMounts from the CRI propagation
                  kubelet asked for, pkg/kubelet/kuberuntime/helpers_linux.go):
                    rprivate  private: no field
                    rslave    a slave of the peer group the host mount belongs to (master:G)
                    rshared   a member of that same peer group (shared:G)
                  A bind of a mount in peer group G joins G (fs/namespace.c clone_mnt with
                  CL_SHARED_TO_SLAVE unset: a bind of a shared mount is its peer); a mount made a
                  slave of a group it is the only member of becomes private (fs/pnode.c
                  do_make_slave).
  reaches         a mount made below a mount of peer group G is repeated in every member of G and
                  in every slave of G (fs/pnode.c propagate_mnt); a slave's own mounts go nowhere.
  NodeTable       `mount --bind`, `mount --make-[r]{shared,slave,private}` and `umount` run on the
                  node, on a table of (mount point, propagation): fs/namespace.c do_loopback (a
                  bind of a mount of group G is shared in G; of a slave, a slave of the same
                  master; of a private mount, private), do_change_type (the target must be a mount
                  point: EINVAL otherwise; MS_SHARED gives a mount that is not shared a new group;
                  recursive changes every mount below as well), do_umount (EINVAL on a directory
                  that is not a mount point, EBUSY on a mount with mounts below it unless lazy).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, replace

from labkit.mounts import mountinfo
from labkit.mounts.pods import Container, Pod, runtime_plan


def parse_tags(tags: str) -> tuple[int | None, int | None]:
    """(shared group, master group) of mountinfo's optional fields ("shared:3 master:1")."""
    shared = master = None
    for item in (tags or "").split():
        name, _, value = item.partition(":")
        if name == "shared" and value.isdigit():
            shared = int(value)
        elif name == "master" and value.isdigit():
            master = int(value)
    return shared, master


def format_tags(shared: int | None, master: int | None) -> str:
    return " ".join(f for f in (f"shared:{shared}" if shared is not None else "",
                                f"master:{master}" if master is not None else "") if f)


def volume_tags(pod: Pod, container: Container, node_mounts: list[mountinfo.Mount]) -> dict[str, str]:
    """mountPath -> the optional fields of the container's volume mount there, as its mountinfo
    will show them. Raises pods.Refused when the runtime refuses the container."""
    plan = runtime_plan(pod, container, node_mounts)
    out = {}
    for m in plan.mounts:
        holder = mountinfo.containing_mount(node_mounts, m.source)
        shared, master = (holder.shared, holder.master) if holder else (None, None)
        option = m.options[1]
        if option == "rprivate":
            out[m.destination] = ""
        elif option == "rslave":
            # a slave of the group the bind joined; a bind of a mere slave stays a slave of its master
            out[m.destination] = format_tags(None, shared if shared is not None else master)
        else:
            out[m.destination] = format_tags(shared, master)
    return out


def reaches(maker_tags: str, observer_tags: str) -> bool:
    """Whether a mount made below a mount with `maker_tags` appears below a mount with
    `observer_tags` (the same directory seen through both)."""
    group, _ = parse_tags(maker_tags)
    if group is None:
        return False
    shared, master = parse_tags(observer_tags)
    return group in (shared, master)


# -- the node's table --------------------------------------------------------------------------

GROUPS_FROM = 100000      # peer group numbers the model hands out start here (far above the kernel's)


@dataclass(frozen=True)
class Entry:
    mountpoint: str
    source: str
    shared: int | None = None
    master: int | None = None
    root: str = "/"
    device: str = ""       # major:minor of the filesystem: a bind keeps it, a new mount has its own

    @property
    def propagation(self) -> str:
        if self.shared is not None and self.master is not None:
            return "slave+shared"
        if self.shared is not None:
            return "shared"
        return "slave" if self.master is not None else "private"

    @property
    def tags(self) -> str:
        return format_tags(self.shared, self.master)


class NodeTable:
    """The node's mounts, in mountinfo's order (later ones on top of earlier ones)."""

    def __init__(self, mounts: list[mountinfo.Mount]):
        self.entries = [Entry(m.mountpoint, m.source, m.shared, m.master, m.root, m.device) for m in mounts]

    @classmethod
    def from_rows(cls, rows) -> "NodeTable":
        """From rows [mount point, source, propagation, tags, root, device] (what the lab's checks
        observe; rows without the device, as older labs recorded them, have none)."""
        table = cls([])
        table.entries = [Entry(row[0], row[1], *parse_tags(row[3]), row[4], row[5] if len(row) > 5 else "")
                         for row in rows]
        return table

    def rows(self) -> list[list]:
        return [[e.mountpoint, e.source, e.propagation, e.tags, e.root, e.device] for e in self.entries]

    def holding(self, path: str) -> Entry | None:
        """The topmost mount a process on the node reaches `path` through."""
        best = None
        for e in self.entries:
            if mountinfo.is_under(path, e.mountpoint) and (best is None or len(e.mountpoint) >= len(best.mountpoint)):
                best = e
        return best

    def _at(self, path: str) -> int | None:
        found = None
        for i, e in enumerate(self.entries):
            if e.mountpoint == path:
                found = i
        return found

    def bind(self, source: str, target: str) -> None:
        held = self.holding(source)
        if held is None:
            raise OSError(errno.ENOENT, "No such file or directory", source)
        relative = source if held.mountpoint == "/" else source[len(held.mountpoint.rstrip("/")):]
        root = (held.root.rstrip("/") + relative) or "/"
        self.entries.append(Entry(target, held.source, held.shared, held.master, root.rstrip("/") or "/", held.device))

    def change(self, target: str, kind: str, recursive: bool = False) -> None:
        index = self._at(target)
        if index is None:
            raise OSError(errno.EINVAL, "Invalid argument", target)
        changed = [i for i, e in enumerate(self.entries)
                   if i == index or (recursive and e.mountpoint != target and mountinfo.is_under(e.mountpoint, target))]
        if kind not in ("shared", "slave", "private", "unbindable"):
            raise OSError(errno.EINVAL, "Invalid argument", target)
        for i in changed:
            e = self.entries[i]
            if kind == "shared":
                e = replace(e, shared=e.shared if e.shared is not None else self._new_group())
            elif kind == "slave":
                peers = [o for o in self.entries if o is not e and e.shared is not None and o.shared == e.shared]
                e = replace(e, shared=None, master=e.shared if peers else e.master)
            else:       # private, and unbindable (no propagation either)
                e = replace(e, shared=None, master=None)
            self.entries[i] = e

    def _new_group(self) -> int:
        """A peer group number no mount of the table has (the kernel's are a counter: which number
        does not matter, that it is new does)."""
        used = [g for e in self.entries for g in (e.shared, e.master) if g is not None]
        return max([GROUPS_FROM - 1, *used]) + 1

    def umount(self, target: str, lazy: bool = False) -> None:
        index = self._at(target)
        if index is None:
            raise OSError(errno.EINVAL, "Invalid argument", target)
        below = [e for e in self.entries if e.mountpoint != target and mountinfo.is_under(e.mountpoint, target)]
        if below and not lazy:
            raise OSError(errno.EBUSY, "Device or resource busy", target)
        gone = set(id(e) for e in below) | {id(self.entries[index])}
        self.entries = [e for e in self.entries if id(e) not in gone]

    def mounts(self) -> list[mountinfo.Mount]:
        """The table as mountinfo.Mount objects (what runtime_plan and the checks read)."""
        return [mountinfo.Mount(i + 1, 0, e.device or "0:0", e.root, e.mountpoint, "rw", "tmpfs", e.source, "rw",
                                shared=e.shared, master=e.master, optional=tuple(e.tags.split()))
                for i, e in enumerate(self.entries)]
