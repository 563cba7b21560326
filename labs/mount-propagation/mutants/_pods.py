"""Near-misses of a Pod file, shared by the mutants of the exercises that fix one (loaded with
ctx.lab._load): every one-step edit of the reference solution's Pod (labkit.mutants.tree_edits;
apiVersion, kind and metadata, which only name the object, are left alone), and what labkit's
reconstruction says the check would observe if the student had applied it (`predict`), made
with the same functions the live lab uses: strict decoding and labkit.mounts.pods for the API
server and the runtime, labkit.mounts.model for propagation. `apply_file` makes the same change
live: the file written, the Pod deleted and applied again.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from labkit.errors import LabkitError
from labkit.mounts import kernel, model
from labkit.mounts.node import NODE, Node
from labkit.mounts.pods import Refused, capabilities, load_pods, parse_pod, validate
from labkit.mutants import tree_edits
from labkit.strict import check_object

MODES = ["None", "HostToContainer", "Bidirectional"]
CAP_SYS_ADMIN = 21


def edits(reference: dict, alternatives: dict | None = None):
    """Every one-step edit of the Pod, but of what names it."""
    modes = {"spec.containers[].volumeMounts[].mountPropagation": MODES + ["HostToContaine", ""]}
    return tree_edits(reference, alternatives={**modes, **(alternatives or {})},
                      skip=lambda path: path.split(".")[0].split("[")[0] in ("apiVersion", "kind", "metadata"))


# Fields a Pod file may gain beside what an exercise asks for: the pod-level privileges (the
# host's PID, IPC and network namespaces) and what only labels the object. Each is a change the
# exercises' `unchanged:` forbids ("change only ..."), whatever the kernel then does.
EXTRA_FIELDS = (
    ("hostPID", lambda pod: pod["spec"].update(hostPID=True)),
    ("hostIPC", lambda pod: pod["spec"].update(hostIPC=True)),
    ("hostNetwork", lambda pod: pod["spec"].update(hostNetwork=True)),
    ("labels", lambda pod: pod["metadata"].setdefault("labels", {}).update(app="extra")),
    ("annotations", lambda pod: pod["metadata"].setdefault("annotations", {}).update(note="extra")),
    ("serviceAccountName", lambda pod: pod["spec"].update(serviceAccountName="node-agent")),
)


def extra_fields(reference: dict):
    """(field, the reference Pod with that field added) for each of EXTRA_FIELDS."""
    for key, add in EXTRA_FIELDS:
        source = copy.deepcopy(reference)
        add(source)
        yield key, source


def names_for(edit) -> tuple[str, ...]:
    """The words the check's failure must hold for an edit of this field."""
    key = edit.key
    if key == "name" and edit.path.endswith("].name") and ".volumeMounts[" not in edit.path and ".volumes[" not in edit.path:
        return ("containers",)
    if key in ("securityContext", "privileged"):
        return ("privileged",)
    if key == "volumes" or (key == "name" and ".volumes[" in edit.path and edit.op == "set"):
        return ("Not found",)
    if key in ("hostPath", "path") and ".volumes[" in edit.path:
        return ("hostPath",)
    if key == "volumeMounts":
        return ("volumeMounts",)
    return (key,)


def predict(ctx, solved: dict, source: dict, host_path: str, probe: str) -> dict:
    """The observation the check would make had the student applied `source` (a Pod object) as
    the Pod's file: `probe` "reader" (down from the node, up from the Pod with all capabilities)
    or "csi" (made by the container's own process, with its capabilities)."""
    obs = copy.deepcopy(solved)
    path = solved["file"]["path"]
    gone = {"pod": None, "states": {}}
    if probe == "reader":
        gone.update(down=None, up=None)
    else:
        gone.update(publish=None, can_mount=None)
    try:
        check_object(source, path)
        pod = parse_pod(source, path)
    except LabkitError as exc:
        obs.update(file={"path": path, "pods": None, "error": str(exc)}, **gone)
        return obs
    try:
        validate(pod)
    except Refused as exc:
        obs.update(file={"path": path, "pods": [source], "error": f"applying it is refused: {exc.message}"}, **gone)
        return obs
    obs["file"] = {"path": path, "pods": [source], "error": None}
    obs["pod"] = source
    node = Node(ctx.env)
    node_mounts = node.mounts()
    obs["states"] = {}
    tags = {}
    for c in pod.containers:
        try:
            for vm in c.volume_mounts:
                volume = pod.volumes[vm.name]
                if volume.type == "Directory" and not Path(f"/proc/{node.require_pid()}/root{volume.path}").is_dir():
                    raise Refused("hostPath type check failed", by="kubelet")
            tags.update(model.volume_tags(pod, c, node_mounts) if c is pod.containers[0] else {})
            obs["states"][c.name] = {"state": "running"}
        except Refused as exc:
            obs["states"][c.name] = {"state": "waiting", "reason": "CreateContainerError", "message": exc.message}
    first = pod.containers[0]
    view = next((vm.mount_path for vm in first.volume_mounts if _covers(pod.volumes[vm.name].path, host_path)), None)
    if obs["states"][first.name]["state"] != "running" or view is None:
        obs.update({k: v for k, v in gone.items() if k not in ("pod", "states")})
        return obs
    mine = tags[view]
    obs["tags"]["pod"] = mine
    others = [name for name in obs["tags"] if name != "pod"]
    if probe == "reader":
        obs["down"] = [model.reaches(obs["tags"][NODE], mine)] * 2
        obs["up"] = [{o: model.reaches(mine, obs["tags"][o]) for o in others}] * 2
    else:
        caps = capabilities(first, kernel.status_mask("self"))
        obs["can_mount"] = bool(caps >> CAP_SYS_ADMIN & 1)
        obs["publish"] = [{o: model.reaches(mine, obs["tags"][o]) for o in others}] * 2 if obs["can_mount"] else None
    return obs


def _covers(directory: str, path: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def apply_file(file_name: str, pod_name: str, source: dict, reapply: bool = True):
    """apply(env): the Pod file rewritten as `source`; with `reapply`, the Pod deleted and applied
    from it again (a refusal leaves no Pod, as `labkit mounts apply` leaves none)."""
    def apply(env):
        path = Path(env.dir) / "pods" / f"{file_name}.yaml"
        path.write_text(yaml.safe_dump(source, sort_keys=False))
        if not reapply:
            return
        node = Node(env)
        node.delete(pod_name)
        try:
            node.apply_all(load_pods(path, strict=True))
        except (Refused, LabkitError):
            pass
    return apply


def with_change(source: dict, change) -> dict:
    out = copy.deepcopy(source)
    change(out["spec"]["containers"][0])
    return out
