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


def _keep_then_unmount(path):
    import os

    from labkit.mounts import kernel

    os.makedirs("/tmp/keep", exist_ok=True)
    kernel.bind(path, "/tmp/keep")
    kernel.umount(path)


@mistake("still there", "node:/tmp/keep")
def keeps_a_copy_then_unmounts_it(env):
    """Binds the staging mount to /tmp/keep on the node "to look at it later", then unmounts it
    where it leaked: the leak's place below /var/lib/kubelet is empty, but the node still has the
    filesystem the publisher published."""
    node = Node(env)
    node.run(node.require_pid(), _keep_then_unmount, "/var/lib/kubelet/plugins/publisher/staging")


def _keep_in_kubelet_dir(path):
    import os

    from labkit.mounts import kernel

    os.makedirs("/var/lib/kubelet/keep", exist_ok=True)
    kernel.bind(path, "/var/lib/kubelet/keep")


@mistake("still there", "node:/var/lib/kubelet/keep", "watcher:/var/lib/kubelet/keep")
def keeps_a_copy_resets_then_unmounts(env):
    """Binds the staging mount to /var/lib/kubelet/keep on the node "to keep its data", resets the
    exercise halfway (`labkit reset mount-propagation leaked-mount`: the dead publisher leaks a new
    staging mount), then unmounts that one where it leaked: the filesystem the publisher published
    first is still on the node, and in watcher, which receives what is mounted below /var/lib/kubelet."""
    node = Node(env)
    node.run(node.require_pid(), _keep_in_kubelet_dir, "/var/lib/kubelet/plugins/publisher/staging")
    env.lab.environment_module().reset_exercise(env, "leaked-mount")
    node = Node(env)
    node.umount(node.require_pid(), "/var/lib/kubelet/plugins/publisher/staging")


def _private_unmount_shared(path):
    from labkit.mounts import kernel

    kernel.change_propagation("/var/lib/kubelet", "private")
    kernel.umount(path)
    kernel.change_propagation("/var/lib/kubelet", "shared")


@mistake("still there", "watcher:/var/lib/kubelet/plugins/publisher/staging")
def unmounts_under_a_private_kubelet_dir_then_resets_peer_groups(env):
    """Makes /var/lib/kubelet private, unmounts the leak on the node (the unmount reaches no one:
    watcher keeps its copy), makes /var/lib/kubelet shared again, then resets peer-groups, whose
    check says /var/lib/kubelet is not as kubelet left it: the reset binds /var/lib/kubelet again
    and restarts watcher. The leak went with the old mount, but it was never cleaned up; the reset
    publishes it again (it passed before: the reset had taken the leak away)."""
    node = Node(env)
    node.run(node.require_pid(), _private_unmount_shared, "/var/lib/kubelet/plugins/publisher/staging")
    env.lab.environment_module().reset_exercise(env, "peer-groups")


def _cover(path):
    from labkit.mounts import kernel

    kernel.mount("cover", path, "tmpfs")


@mistake("still there", "node:/var/lib/kubelet/plugins/publisher/staging")
def covers_the_leak_with_a_tmpfs(env):
    """Mounts an empty tmpfs over /var/lib/kubelet/plugins/publisher on the node: the staging mount
    is out of sight, but the node and watcher still hold it (and a reset of the exercise must take
    the cover away before it can unmount the leak below it)."""
    node = Node(env)
    node.run(node.require_pid(), _cover, "/var/lib/kubelet/plugins/publisher")
