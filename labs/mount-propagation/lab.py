"""The mount-propagation lab: a node whose /var/lib/kubelet is rshared, as kubelet keeps it, and Pods.

Built from labkit.mounts only: the node and every container are processes holding mount
namespaces of their own (nothing is mounted in the host's namespace). The Pod files are copied
to <lab dir>/pods/, where students edit them.

  master, slave, private, default   the e2e test's four Pods on /var/lib/kubelet/e2e
  reader                            mountPropagation None on /var/lib/kubelet/shared (exercise b)
  watcher                           HostToContainer on all of /var/lib/kubelet (sees what others publish)
  csi-node                          not created: Bidirectional without privileged (exercise c)
  logger                            HostToContainer on /srv/data, a private directory: refused (exercise d)
  publisher                         Bidirectional; mounts a staging tmpfs, then dies (exercise e)
"""

import shutil
from pathlib import Path

from labkit.mounts import kernel
from labkit.mounts.node import NODE, Node
from labkit.mounts.pods import load_pods
from labkit.shell import Host

HERE = Path(__file__).resolve().parent
KUBELET_DIR = "/var/lib/kubelet"
PRIVATE_DIR = "/srv/data"
STARTED = ("e2e", "reader", "watcher", "logger", "publisher")
# What the publisher mounts before it dies (exercise e): inside its container, and its source.
LEAK_PATH = "/plugin/staging"
LEAK_SOURCE = "publisher-staging"


def pods_dir(env) -> Path:
    return Path(env.dir) / "pods"


def up(env):
    node = Node(env)
    node.start([{"path": KUBELET_DIR, "propagation": "shared"}], dirs=(PRIVATE_DIR,))
    env.ledger.record("path", path=str(pods_dir(env)))
    shutil.copytree(HERE / "pods", pods_dir(env))
    node.apply_all([pod for name in STARTED for pod in load_pods(pods_dir(env) / f"{name}.yaml")])
    publisher = node.container_state("publisher", "publisher")
    node.mount_tmpfs(publisher["pid"], LEAK_PATH, LEAK_SOURCE, "staged")
    node.stop("publisher", "publisher", reason="Error")
    env.log("node and Pods are up; the publisher died after publishing its staging mount")


def is_up(env):
    return Node(env).pid is not None


def hosts(env):
    node = Node(env)
    if node.pid is None:
        return {}
    found = {}
    for party in node.parties():
        if party.name == NODE:
            found[party.name] = Host("the node (kubelet's mount namespace)", pid=party.pid)
        else:     # as kubectl exec: a process of the container, with the container's capabilities
            found[party.name] = Host(f"container {party.container} of Pod {party.pod}", pid=party.pid,
                                     wrapper=kernel.exec_wrapper(party.capabilities or 0))
    return found


def access(env):
    return f"""## Your node and Pods

- Pod files (edit these): `{pods_dir(env)}/`
- `labkit mounts get` — Pods, their volume mounts and container states
- `labkit mounts exec node -- findmnt -o TARGET,PROPAGATION,OPT-FIELDS` — a command on the node
- `labkit mounts exec slave -- cat /proc/self/mountinfo` — a command in a container (also `labkit shell {env.lab.id} slave`)
- `labkit mounts apply -f FILE`, `labkit mounts delete POD`
- `labkit mounts matrix` and `labkit mounts graph` — who sees what, live
- `labkit mounts play -f {HERE}/scenarios/e2e.yaml` — replay an experiment on a fresh node
"""
