"""Read each party's optional fields from its live mountinfo."""

import yaml

from labkit.exercises import answer_path
from labkit.mounts import mountinfo
from labkit.mounts.node import Node


def solve(env):
    node = Node(env)
    holder = mountinfo.containing_mount(node.mounts(), "/var/lib/kubelet/e2e")
    answer = {"node": holder.tags or "private"}
    for name in ("master", "slave", "private", "default"):
        mount = mountinfo.visible_at(mountinfo.read(node.party(name).pid), "/mnt/test")
        answer[name] = mount.tags or "private"
    path = answer_path(env.lab.id, "peer-groups")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(answer))
