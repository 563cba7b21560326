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
