"""Common wrong answers to peer-groups."""

import yaml

from labkit.exercises import answer_path, mistake
from labkit.mounts import kernel, mountinfo
from labkit.mounts.node import Node


def _live(env):
    node = Node(env)
    found = {"node": mountinfo.containing_mount(node.mounts(), "/var/lib/kubelet/e2e").tags}
    for name in ("master", "slave", "private", "default"):
        found[name] = mountinfo.visible_at(mountinfo.read(node.party(name).pid), "/mnt/test").tags
    return {name: tags or "private" for name, tags in found.items()}


def _write(env, answer):
    path = answer_path(env.lab.id, "peer-groups")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(answer))


@mistake("empty")
def empty_for_private(env):
    """Reads the fields right but leaves the private mounts empty instead of writing `private`."""
    answer = _live(env)
    answer.update(private="", default="")
    _write(env, answer)


@mistake("findings are not right", "mountinfo")
def slave_as_peer(env):
    """Takes the HostToContainer container for a member of the node's peer group (shared:N) instead of its slave."""
    answer = _live(env)
    answer["slave"] = answer["node"]
    _write(env, answer)


@mistake("findings are not right")
def numbers_from_elsewhere(env):
    """Copies peer group numbers from notes of another machine instead of reading this lab's mountinfo."""
    answer = _live(env)
    group = int(answer["node"].split(":")[1]) + 1000
    answer.update(node=f"shared:{group}", master=f"shared:{group}", slave=f"master:{group}")
    _write(env, answer)


@mistake("/var/lib/kubelet", "reset")
def node_made_private_then_read(env):
    """Experiments on the node first (makes its /var/lib/kubelet private), then writes what mountinfo
    shows now: the node's mount without fields, which is not the lab the exercise asks about."""
    node = Node(env)
    pid = node.require_pid()
    node.run(pid, _make_private, "/var/lib/kubelet")
    _write(env, _live(env))


def _make_private(path):
    kernel.change_propagation(path, "private", recursive=False)


@mistake("covers the e2e volume", "reset")
def volume_covered_then_read(env):
    """Mounts a tmpfs on the node's /var/lib/kubelet/e2e (an experiment), then writes the fields mountinfo
    shows now: those of the covering tmpfs and its copies, not of the e2e volume the lab built."""
    node = Node(env)
    node.mount_tmpfs(node.require_pid(), "/var/lib/kubelet/e2e", "cover")
    _write(env, _live(env))
