"""Find what is mounted below the dead plugin's host path on the node and unmount it there; the
unmount propagates to every peer and slave (the watcher's copy goes too)."""

from labkit.mounts import mountinfo
from labkit.mounts.node import Node

HOST_PATH = "/var/lib/kubelet/plugins/publisher"


def solve(env):
    node = Node(env)
    pid = node.require_pid()
    for mount in sorted(mountinfo.submounts(node.mounts(pid), HOST_PATH), key=lambda m: -len(m.mountpoint)):
        node.umount(pid, mount.mountpoint)
