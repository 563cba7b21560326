"""Common wrong fixes for private-host-path."""

import yaml

from labkit.exercises import mistake
from labkit.mounts import kernel
from labkit.mounts.node import Node
from labkit.mounts.pods import load_pods


@mistake("fix the node, not the Pod")
def change_the_pod(env):
    """Makes the Pod start by switching it to None, instead of fixing the node."""
    path = env.dir / "pods" / "logger.yaml"
    pod = yaml.safe_load(path.read_text())
    pod["spec"]["containers"][0]["volumeMounts"][0]["mountPropagation"] = "None"
    path.write_text(yaml.safe_dump(pod, sort_keys=False))
    node = Node(env)
    node.delete("logger")
    node.apply_all(load_pods(path))


def _bind(path):
    kernel.bind(path, path)


@mistake("shared or slave mount")
def bind_without_make_shared(env):
    """Binds /srv/data onto itself on the node but forgets to make it shared: a mount of its own, still
    private."""
    node = Node(env)
    node.run(node.require_pid(), _bind, "/srv/data")
    node.apply_all(load_pods(env.dir / "pods" / "logger.yaml"))


def _make_rshared(path):
    kernel.bind(path, path)
    kernel.change_propagation(path, "shared", recursive=True)


@mistake("not running")
def not_applied_again(env):
    """Makes /srv/data shared on the node but does not apply the Pod again, so its container stays refused."""
    node = Node(env)
    node.run(node.require_pid(), _make_rshared, "/srv/data")


def _make_root_rshared(_path):
    kernel.change_propagation("/", "shared", recursive=True)


@mistake("change the node only at")
def whole_node_rshared(env):
    """Makes the node's whole tree rshared (`mount --make-rshared /`, what systemd does) instead of /srv/data:
    the Pod starts, but every mount of the node now propagates."""
    node = Node(env)
    node.run(node.require_pid(), _make_root_rshared, "/")
    node.apply_all(load_pods(env.dir / "pods" / "logger.yaml"))


def _bind_parent(_path):
    kernel.bind("/srv", "/srv")
    kernel.change_propagation("/srv", "shared", recursive=True)


@mistake("change the node only at", "/srv")
def parent_rshared(env):
    """Binds /srv (the parent) onto itself and makes it rshared: the Pod works, but the node changed beyond
    the directory the Pod needs."""
    node = Node(env)
    node.run(node.require_pid(), _bind_parent, "/srv")
    node.apply_all(load_pods(env.dir / "pods" / "logger.yaml"))


def _fix_and_expose(_path):
    import os

    _make_rshared("/srv/data")
    os.makedirs("/var/lib/kubelet/exposed-srv", exist_ok=True)
    kernel.bind("/srv/data", "/var/lib/kubelet/exposed-srv")


@mistake("also mounted at", "/var/lib/kubelet/exposed-srv")
def exposed_below_kubelet(env):
    """Fixes /srv/data as kubelet would, and also binds it below /var/lib/kubelet: the logger works, but the
    node's /srv/data (node-secret included) is now in every Pod that sees /var/lib/kubelet, the watcher first."""
    node = Node(env)
    node.run(node.require_pid(), _fix_and_expose, "/srv/data")
    node.delete("logger")
    node.apply_all(load_pods(env.dir / "pods" / "logger.yaml"))


def _root_propagation(propagation):
    kernel.change_propagation("/", propagation, recursive=False)


@mistake("before", "apply the Pod again")
def started_before_the_fix(env):
    """First makes the node's / shared (`mount --make-shared /`), so the logger starts; sees that the scope
    is wrong, makes / private again and fixes /srv/data as kubelet would, but leaves the logger running:
    its volume mount was copied from / when it started, and nothing mounted on the node reaches it now."""
    node = Node(env)
    node.run(node.require_pid(), _root_propagation, "shared")
    node.apply_all(load_pods(env.dir / "pods" / "logger.yaml"))
    node.run(node.require_pid(), _root_propagation, "private")
    node.run(node.require_pid(), _make_rshared, "/srv/data")
