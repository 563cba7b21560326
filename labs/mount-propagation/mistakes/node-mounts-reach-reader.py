"""Common wrong fixes for node-mounts-reach-reader."""

import yaml

from labkit.errors import LabkitError
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


def _write_and_apply(env, text):
    path = env.dir / "pods" / "reader.yaml"
    path.write_text(text)
    node = Node(env)
    node.delete("reader")
    try:
        node.apply_all(load_pods(path, strict=True))
    except LabkitError:
        pass          # `labkit mounts apply` refuses it, in kubectl's words; no Pod is created


@mistake("no Pod", 'unknown field "spec.containers[0].volumeMounts[0].mountPropagaton"')
def misspelt_field(env):
    """Writes `mountPropagaton: HostToContainer` (a letter missing): kubectl v1.34 refuses the unknown field
    (strict decoding), where an older client dropped it without a word and the Pod stayed private."""
    text = (env.dir / "pods" / "reader.yaml").read_text().replace("mountPropagation: None", "mountPropagaton: HostToContainer")
    _write_and_apply(env, text)


@mistake("privileged")
def host_to_container_and_privileged(env):
    """HostToContainer, and the container made privileged "to be sure": the node's mounts arrive and the Pod's
    stay inside, but the reader now holds every capability (least privilege)."""
    path = _edit(env, "HostToContainer", privileged=True)
    node = Node(env)
    node.delete("reader")
    node.apply_all(load_pods(path))


@mistake("hostNetwork", "not as shipped")
def host_namespaces_too(env):
    """Uses HostToContainer, and gives the Pod the host's PID and network namespaces as well: the mounts
    propagate as asked, but the Pod got privileges it did not have."""
    path = _edit(env, "HostToContainer")
    pod = yaml.safe_load(path.read_text())
    pod["spec"].update(hostPID=True, hostNetwork=True)
    path.write_text(yaml.safe_dump(pod, sort_keys=False))
    node = Node(env)
    node.delete("reader")
    node.apply_all(load_pods(path, strict=True))
