"""Do for /srv/data what kubelet's MakeRShared does for /var/lib/kubelet, inside the node:
`mount --bind /srv/data /srv/data; mount --make-rshared /srv/data`. Then retry the Pod."""

from labkit.mounts import kernel
from labkit.mounts.node import Node
from labkit.mounts.pods import load_pods


def _make_rshared(path):
    kernel.bind(path, path)
    kernel.change_propagation(path, "shared", recursive=True)


def solve(env):
    node = Node(env)
    node.run(node.require_pid(), _make_rshared, "/srv/data")
    node.apply_all(load_pods(env.dir / "pods" / "logger.yaml"))
