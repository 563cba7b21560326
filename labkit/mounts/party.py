"""A party of the mount lab: the node, or one container, as a process holding a mount namespace.

Started as `python -I -S <labkit>/mounts/party.py SPEC` (without site-packages, for a faster
start). It builds its namespace, reports on the file descriptor `ready_fd` (one JSON object:
{"ok": true} or {"error": ..., "errno": ...}) and then holds the namespace until it is killed
(or, for a container with a command, until that command, run as its child, exits). labkit
starts parties with labkit.procs.spawn, so each carries its owner token and cleanup finds it;
nothing is ever mounted in the namespace labkit itself runs in.

The node ("the host" of a Pod) is a namespace of its own, cut off from the real host:
  unshare(CLONE_NEWNS); mount --make-rprivate /           no event goes to or comes from the host
  a tmpfs on a directory under the lab's state dir stands in for the node's disk: mountinfo
  inside then shows node paths (/var/lib/kubelet/...) as a real node's does, and the tmpfs goes
  with the namespace; the host's /usr and /etc read-only, a fresh /proc, /dev, and tmpfs on
  /tmp and /run; then pivot_root into it
  then the node's own mounts, e.g. kubelet's MakeRShared("/var/lib/kubelet")
  (pkg/volume/util/hostutil/hostutil_linux.go DoMakeRShared: nothing when the directory is
  already on a shared mount, as on a systemd host; otherwise bind it onto itself, make it rshared)

A container is made from the node's namespace the way containerd's CRI plugin and runc do it
(runc libcontainer/rootfs_linux.go prepareRoot / mountToRootfs / mountPropagate / pivotRoot,
containerd internal/cri/opts/spec_linux_opts.go WithMounts):
  setns(node); mkdir -p each host path (containerd creates missing ones)
  unshare(CLONE_NEWNS)
  mount --make-r<rootPropagation> /       rshared for Bidirectional, otherwise rslave (runc's default)
  the mount holding the rootfs made private if it is shared (rootfsParentMountPrivate)
  a tmpfs on the rootfs directory (it stands in for the image's overlay mount)
  /proc, /dev, /tmp and the image stand-ins (/usr, /etc from the node, read-only)
  for each volume: mkdir -p; mount --rbind <hostPath> <rootfs><mountPath>; [remount ro];
                   mount --make-r<private|slave|shared> <rootfs><mountPath>   (a separate mount(2) call)
  pivot_root; old root made rslave (so unmounting it sends nothing to the node), then detached
  the process's capabilities limited to the container's set (runc's capabilities.ApplyCaps), so
  the container's command, and everything it starts, has only those
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

if __name__ == "__main__" and not __package__:   # run as a file: make the labkit package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from labkit.mounts import kernel, mountinfo  # noqa: E402

# Directories of the host that stand in for a container image / the node's operating system.
# bin, sbin, lib* are symlinks into /usr on merged-/usr systems; elsewhere they are bound too.
SYSTEM_DIRS = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")


def populate_rootfs(rootfs: str) -> None:
    """The system mounts of a root filesystem, from the directories this process sees at /."""
    for name in SYSTEM_DIRS:
        source, target = f"/{name}", f"{rootfs}/{name}"
        if os.path.islink(source):
            if not os.path.lexists(target):
                os.symlink(os.readlink(source), target)
        elif os.path.isdir(source):
            os.makedirs(target, exist_ok=True)
            kernel.bind(source, target, recursive=False, readonly=True)
    for name, mode in (("proc", 0o555), ("dev", 0o755), ("tmp", 0o1777), ("run", 0o755)):
        os.makedirs(f"{rootfs}/{name}", exist_ok=True)
        os.chmod(f"{rootfs}/{name}", mode)
    kernel.mount("proc", f"{rootfs}/proc", "proc", kernel.MS_NOSUID | kernel.MS_NODEV | kernel.MS_NOEXEC)
    kernel.bind("/dev", f"{rootfs}/dev")
    kernel.mount("tmpfs", f"{rootfs}/tmp", "tmpfs", kernel.MS_NOSUID | kernel.MS_NODEV, "mode=1777")
    kernel.mount("tmpfs", f"{rootfs}/run", "tmpfs", kernel.MS_NOSUID | kernel.MS_NODEV, "mode=755")


def enter_rootfs(rootfs: str) -> None:
    """runc's pivotRoot: pivot_root(".", "."), then make the old root rslave and detach it.

    As runc does, the old root is reached through a descriptor opened before the pivot: after
    pivot_root(".", ".") the working directory is the new root, with the old one stacked on it.
    """
    old_root = os.open("/", os.O_DIRECTORY | os.O_RDONLY)
    try:
        os.chdir(rootfs)
        kernel.pivot_root(".", ".")
        os.fchdir(old_root)
        kernel.change_propagation(".", "slave", recursive=True)
        kernel.umount(".", lazy=True)
    finally:
        os.close(old_root)
    os.chdir("/")


def _mount_point_holding(path: str) -> tuple[str, str]:
    """(mount point, optional fields) of the mount `path` lives on, in this process's namespace."""
    found = mountinfo.containing_mount(mountinfo.read("self"), path)
    return (found.mountpoint, found.tags) if found else ("/", "")


NODE_DISK = "labkit-node-disk"        # mount source of the node's root filesystem
CONTAINER_ROOTFS = "rootfs"            # mount source of a container's root filesystem


def setup_node(spec: dict) -> None:
    rootfs = spec["rootfs"]
    kernel.unshare_mount_namespace()
    kernel.change_propagation("/", "private", recursive=True)
    os.makedirs(rootfs, exist_ok=True)
    kernel.mount(NODE_DISK, rootfs, "tmpfs", 0, "mode=755")
    populate_rootfs(rootfs)
    for directory in spec.get("dirs", []):
        os.makedirs(rootfs + directory, exist_ok=True)
    enter_rootfs(rootfs)
    for item in spec.get("host_paths", []):
        prepare_host_path(item["path"], item["propagation"], item.get("upstream"))


def make_rshared(path: str) -> None:
    """kubelet's DoMakeRShared (pkg/volume/util/hostutil/hostutil_linux.go): if the mount that
    holds `path` (the last mountinfo entry whose mount point contains it) is shared, nothing;
    otherwise `mount --bind path path; mount --make-rshared path`."""
    holder = None
    for m in mountinfo.read("self"):
        if mountinfo.is_under(path, m.mountpoint):
            holder = m
    if holder is not None and holder.shared is not None:
        return
    kernel.bind(path, path)
    kernel.change_propagation(path, "shared", recursive=True)


def prepare_host_path(path: str, propagation: str, upstream: str | None = None) -> None:
    """Make `path` a mount with the given propagation, inside the node.

    shared:  kubelet's MakeRShared (the node's / is private, so it binds the directory onto
             itself and makes it rshared).
    private: bind it onto itself and leave it private (what a host without shared mounts has).
    slave:   a slave of `upstream`, a shared bind of the same directory: what a node whose
             directory is an rslave bind of another namespace's shared mount sees (kubelet in a
             container). A slave needs a master: make-slave of a mount alone in its peer group
             would give a private mount.
    """
    os.makedirs(path, exist_ok=True)
    if propagation == "slave":
        os.makedirs(upstream, exist_ok=True)
        kernel.bind(path, upstream)
        kernel.change_propagation(upstream, "shared")
        kernel.bind(upstream, path)
        kernel.change_propagation(path, "slave")
        return
    if propagation == "shared":
        make_rshared(path)
    else:
        kernel.bind(path, path)


def setup_container(spec: dict) -> None:
    rootfs = spec["rootfs"]
    kernel.enter_mount_namespace(spec["node_pid"])
    for m in spec["mounts"]:
        os.makedirs(m["source"], mode=0o755, exist_ok=True)
    os.makedirs(rootfs, exist_ok=True)
    kernel.unshare_mount_namespace()
    # runc prepareRoot
    kernel.change_propagation("/", spec["root_propagation"], recursive=True)
    parent, tags = _mount_point_holding(rootfs)
    if any(t.startswith("shared:") for t in tags.split()):
        kernel.change_propagation(parent, "private")
    kernel.mount(CONTAINER_ROOTFS, rootfs, "tmpfs", 0, "mode=755")
    populate_rootfs(rootfs)
    # runc mountToRootfs + mountPropagate, in the order containerd sorted the mounts
    for m in spec["mounts"]:
        target = rootfs + m["destination"]
        os.makedirs(target, exist_ok=True)
        kernel.bind(m["source"], target, recursive=True, readonly=m.get("readonly", False))
        kernel.change_propagation(target, m["propagation"], recursive=True)
    enter_rootfs(rootfs)
    os.chdir(spec.get("workdir") or "/")
    kernel.limit_capabilities(spec["capabilities"])


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    ready_fd = spec["ready_fd"]
    try:
        if spec["role"] == "node":
            setup_node(spec)
        else:
            setup_container(spec)
    except OSError as exc:
        os.write(ready_fd, json.dumps({"error": exc.strerror or str(exc), "errno": exc.errno}).encode())
        return 1
    except Exception as exc:
        os.write(ready_fd, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        return 1
    os.write(ready_fd, json.dumps({"ok": True, "pid": os.getpid()}).encode())
    os.close(ready_fd)
    sys.stdout.flush()
    return hold(spec.get("command"))


def hold(command: list[str] | None) -> int:
    """Keep the namespace: sleep until killed, or run the container's command and exit with it.

    The party itself never execs, so its environment (with the owner token cleanup looks for)
    stays readable in /proc the whole time; a command runs as its child, in the same namespaces.
    """
    if not command:
        while True:
            signal.pause()
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"cannot run {command[0]}: {exc.strerror}", flush=True)
        return 127
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    status = child.wait()
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
