"""HostToContainer: the volume becomes an rslave bind, so the node's later mounts reach the Pod and
nothing goes back. The running Pod cannot be changed: delete it, then apply the fixed file."""

import yaml

from labkit.mounts.node import Node
from labkit.mounts.pods import load_pods


def solve(env):
    path = env.dir / "pods" / "reader.yaml"
    pod = yaml.safe_load(path.read_text())
    for container in pod["spec"]["containers"]:
        for mount in container["volumeMounts"]:
            mount["mountPropagation"] = "HostToContainer"
    path.write_text(yaml.safe_dump(pod, sort_keys=False))
    node = Node(env)
    node.delete("reader")
    node.apply_all(load_pods(path))
