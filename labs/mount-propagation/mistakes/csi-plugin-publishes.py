"""Common wrong fixes for csi-plugin-publishes."""

import yaml

from labkit.errors import LabkitError
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


@mistake("no Pod", 'unknown field "spec.privileged"')
def privileged_on_the_pod(env):
    """Writes `privileged: true` under the Pod's spec instead of the container's securityContext: kubectl
    v1.34 refuses the unknown field (an older client dropped it, and the API server then refused Bidirectional)."""
    path = env.dir / "pods" / "csi-node.yaml"
    pod = yaml.safe_load(path.read_text())
    pod["spec"]["privileged"] = True
    path.write_text(yaml.safe_dump(pod, sort_keys=False))
    try:
        Node(env).apply_all(load_pods(path, strict=True))
    except (Refused, LabkitError):
        pass


@mistake("watcher", "not running")
def watcher_deleted(env):
    """Makes the plugin privileged and runs it, but deleted the watcher Pod on the way (it is one of the Pods
    that must see the plugin's mounts)."""
    _edit_and_apply(env, lambda c: c.setdefault("securityContext", {}).update(privileged=True))
    Node(env).delete("watcher")


@mistake("hostPID", "not as shipped")
def more_than_the_refusal_asks(env):
    """Makes the container privileged, as the refusal asks, and on the way gives the Pod the host's PID and
    IPC namespaces and a label: the plugin runs and publishes, but it is no longer the Pod its author wrote."""
    path = env.dir / "pods" / "csi-node.yaml"
    pod = yaml.safe_load(path.read_text())
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    pod["spec"].update(hostPID=True, hostIPC=True)
    pod["metadata"]["labels"] = {"app": "csi-node"}
    path.write_text(yaml.safe_dump(pod, sort_keys=False))
    Node(env).apply_all(load_pods(path, strict=True))


@mistake("securityContext.runAsUser", "not as shipped")
def privileged_and_root_on_top(env):
    """Makes the plugin privileged, as the refusal asks, and sets runAsUser: 0 on top of it, which the
    refusal did not ask for."""
    _edit_and_apply(env, lambda c: c.setdefault("securityContext", {}).update(privileged=True, runAsUser=0))


@mistake("no Pod", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true")
def privileged_without_escalation(env):
    """Makes the plugin privileged, as the refusal asks, and "hardens" it with allowPrivilegeEscalation:
    false: the API server refuses that pair (a privileged container can always escalate), so no Pod runs.
    The lab's API server once took it, and the check passed."""
    _edit_and_apply(env, lambda c: c.setdefault("securityContext", {}).update(privileged=True,
                                                                            allowPrivilegeEscalation=False))
