"""Common wrong clean-ups for leaked-mount."""

from labkit.exercises import mistake
from labkit.mounts.node import Node


@mistake("still there")
def delete_the_pod(env):
    """Deletes the dead publisher Pod, expecting its mount to go with it."""
    Node(env).delete("publisher")


@mistake("/var/lib/kubelet's own shared mount")
def unmount_kubelet_dir(env):
    """Lazily unmounts all of /var/lib/kubelet on the node: the leak goes, and kubelet's shared mount with it."""
    node = Node(env)
    node.umount(node.require_pid(), "/var/lib/kubelet", lazy=True)


@mistake("watcher", "no longer runs")
def unmount_and_delete_the_watcher(env):
    """Unmounts the leak on the node, and deletes the watcher Pod as well, which had a copy of it."""
    node = Node(env)
    node.umount(node.require_pid(), "/var/lib/kubelet/plugins/publisher/staging")
    node.delete("watcher")


def _reshape_kubelet(_path):
    from labkit.mounts import kernel

    kernel.change_propagation("/var/lib/kubelet", "private")
    kernel.change_propagation("/var/lib/kubelet", "shared")


@mistake("peer group", "no longer reach")
def kubelet_made_private_and_shared_again(env):
    """Unmounts the leak on the node, then makes /var/lib/kubelet private and shared again: it is still shared,
    but in a new peer group, which the Pods' volume mounts are neither peers nor slaves of."""
    node = Node(env)
    pid = node.require_pid()
    node.umount(pid, "/var/lib/kubelet/plugins/publisher/staging")
    node.run(pid, _reshape_kubelet, "/var/lib/kubelet")
