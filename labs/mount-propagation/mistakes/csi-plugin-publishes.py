"""Common wrong fixes for csi-plugin-publishes."""

import yaml

from labkit.exercises import mistake
from labkit.mounts.node import Node
from labkit.mounts.pods import Refused, load_pods


def _edit_and_apply(env, change):
    path = env.dir / "pods" / "csi-node.yaml"
    pod = yaml.safe_load(path.read_text())
    change(pod["spec"]["containers"][0])
    path.write_text(yaml.safe_dump(pod, sort_keys=False))
    try:
        Node(env).apply_all(load_pods(path))
    except Refused:
        pass      # `labkit mounts apply` says so; the Pod is not created


@mistake("did not reach")
def host_to_container_instead(env):
    """Gets the Pod accepted by switching to HostToContainer instead of making it privileged: the plugin's
    mounts no longer leave its container."""
    def change(container):
        container["volumeMounts"][0]["mountPropagation"] = "HostToContainer"
        container["securityContext"] = {"privileged": True}
    _edit_and_apply(env, change)


@mistake("no Pod", "only to privileged containers")
def capability_instead_of_privileged(env):
    """Adds CAP_SYS_ADMIN to the container instead of making it privileged: the API server still refuses
    Bidirectional."""
    _edit_and_apply(env, lambda c: c.setdefault("securityContext", {}).update(capabilities={"add": ["SYS_ADMIN"]}))
