"""Bidirectional is for privileged containers only (API validation): mark the plugin privileged."""

import yaml

from labkit.mounts.node import Node
from labkit.mounts.pods import load_pods


def solve(env):
    path = env.dir / "pods" / "csi-node.yaml"
    pod = yaml.safe_load(path.read_text())
    for container in pod["spec"]["containers"]:
        container.setdefault("securityContext", {})["privileged"] = True
    path.write_text(yaml.safe_dump(pod, sort_keys=False))
    Node(env).apply_all(load_pods(path))
