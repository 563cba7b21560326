"""Common wrong fixes for node-mounts-reach-reader."""

import yaml

from labkit.exercises import mistake
from labkit.mounts.node import Node
from labkit.mounts.pods import load_pods


def _edit(env, propagation, privileged=False):
    path = env.dir / "pods" / "reader.yaml"
    pod = yaml.safe_load(path.read_text())
    container = pod["spec"]["containers"][0]
    container["volumeMounts"][0]["mountPropagation"] = propagation
    if privileged:
        container["securityContext"] = {"privileged": True}
    path.write_text(yaml.safe_dump(pod, sort_keys=False))
    return path


@mistake("reached the node")
def bidirectional(env):
    """Uses Bidirectional (made privileged so the API server takes it): the node's mounts arrive, but the
    Pod's own mounts now reach the node too."""
    path = _edit(env, "Bidirectional", privileged=True)
    node = Node(env)
    node.delete("reader")
    node.apply_all(load_pods(path))


@mistake("did not appear", "differs from the running Pod")
def edited_but_not_applied_again(env):
    """Writes HostToContainer into pods/reader.yaml but leaves the running Pod as it was (a running Pod's
    volumeMounts cannot be changed; it has to be deleted and applied again)."""
    _edit(env, "HostToContainer")
