"""Near-misses of the node-side fix: the reference's mount(8) steps (bind /srv/data onto itself,
make it rshared, apply the Pod again) with one step left out, the two mount steps in the other
order, another path, another propagation, not recursive; and the Pod changed instead. Each is
judged on the observation labkit.mounts.model predicts (the node's table after the steps, then
containerd's decision and the probes), and applied live the same way."""

import copy
import os

import yaml

from labkit.errors import LabkitError
from labkit.mounts import kernel, model
from labkit.mounts.node import Node
from labkit.mounts.pods import Refused, load_pods, parse_pod
from labkit.mutants import Mutant, tree_edits

DIR = "/srv/data"
REFERENCE = [{"do": "bind", "source": DIR, "target": DIR},
             {"do": "make", "target": DIR, "propagation": "shared", "recursive": True},
             {"do": "apply"}]
PATHS = ["/srv", "/", "/var/lib/kubelet"]


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    solved = checks.observe_private_host_path(ctx)
    before = [row for row in solved["node"] if not _at_or_below(row[0], DIR)]
    shipped = ctx.lab.environment_module().shipped_pods()["logger"].source
    reference = predict(ctx, solved, before, REFERENCE, shipped)
    alternatives = {"[0].source": PATHS, "[0].target": [p for p in PATHS if p != "/"], "[1].target": PATHS,
                    "[1].propagation": ["slave", "private", "unbindable"]}
    for edit in tree_edits(REFERENCE, alternatives=alternatives, skip=lambda path: path.endswith(".do"), drop_keys=False):
        observation = predict(ctx, solved, before, edit.value, shipped)
        same = observation == reference
        yield Mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""), f"steps: {edit.describe()}",
                     names=() if same else _names(edit, observation, ctx), observation=observation,
                     equivalent="labkit.mounts.model gives the same node table, Pod state and probes" if same else None,
                     apply=None if _unsafe(edit.value) else steps(edit.value))
    # the fix, plus the node's files bound somewhere new: below /var/lib/kubelet they reach every
    # Pod that sees that directory (the watcher sees all of it), elsewhere they change the node
    for source, target in ((DIR, "/var/lib/kubelet/plugins"), ("/srv", "/var/lib/kubelet/e2e"), (DIR, "/srv"),
                           ("/etc", "/var/lib/kubelet/pods")):
        ops = REFERENCE[:2] + [{"do": "bind", "source": source, "target": target}] + REFERENCE[2:]
        yield Mutant(f"expose:{source}->{target}", f"the fix, and {source} also bound at {target}",
                     names=("also mounted at", target), observation=predict(ctx, solved, before, ops, shipped))
    for mode in ("None", "HostToContainer+privileged"):
        pod = copy.deepcopy(shipped)
        c = pod["spec"]["containers"][0]
        if mode == "None":
            c["volumeMounts"][0]["mountPropagation"] = "None"
        else:
            c["securityContext"] = {"privileged": True}
        observation = predict(ctx, solved, before, REFERENCE, pod)
        yield Mutant(f"pod:{mode}", f"the node fixed, and the Pod changed too ({mode})", names=("fix the node, not the Pod",),
                     observation=observation, apply=steps(REFERENCE[:2] + [{"do": "pod", "source": pod}]))
        observation = predict(ctx, solved, before, [], pod)
        yield Mutant(f"pod-only:{mode}", f"the Pod changed ({mode}) instead of the node", names=("fix the node, not the Pod",),
                     observation=observation, apply=steps([{"do": "pod", "source": pod}]))


def _at_or_below(path, directory):
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _unsafe(ops):
    """Steps that reach beyond what a reset of this exercise restores (a bind on /var/lib/kubelet)."""
    return any(op.get("target") == "/var/lib/kubelet" and op["do"] == "bind" for op in ops)


def _names(edit, observation, ctx):
    """What the failure must name: the Pod not applied again; a step that reaches beyond /srv/data
    (a mount added or changed elsewhere); a bind of another directory (not /srv/data's own files);
    or /srv/data left without a shared mount."""
    if edit.op == "drop-item" and edit.path == "[2]":
        return ("not running",)
    if edit.op == "set" and (edit.path, edit.after) in (("[0].target", "/srv"), ("[0].target", "/var/lib/kubelet"),
                                                        ("[1].target", "/")):
        return ("change the node only at",)
    if edit.op == "set" and edit.path == "[0].source" and edit.after in PATHS:
        return ("own directory",)
    return ("shared or slave",)


def predict(ctx, solved, before, ops, pod_source):
    """The check's observation after `ops` on the node as it was before the fix, with the Pod
    `pod_source` (applied when the steps say so; else as the lab left it: refused)."""
    table = model.NodeTable.from_rows(before)
    node_pid = Node(ctx.env).require_pid()
    exists = lambda path: bool(path) and os.path.isdir(f"/proc/{node_pid}/root{path}")
    applied = False
    for op in ops:
        try:
            if op["do"] == "bind":
                if not (exists(op["source"]) and exists(op["target"])):
                    raise OSError(2, "No such file or directory")
                table.bind(op["source"], op["target"])
            elif op["do"] == "make":
                table.change(op["target"], op["propagation"], op["recursive"])
            elif op["do"] == "apply":
                applied = True
        except OSError:
            pass
    obs = copy.deepcopy(solved)
    obs["node"] = table.rows()
    obs["pod"] = pod_source
    obs["file"]["pods"] = [pod_source]
    pod = parse_pod(pod_source, "logger")
    c = pod.containers[0]
    obs["tags"], obs["down"] = {}, None
    try:
        tags = model.volume_tags(pod, c, table.mounts())
    except Refused as exc:
        obs["states"] = {c.name: {"state": "waiting", "reason": "CreateContainerError", "message": exc.message}}
        return obs
    if not applied and pod_source == ctx.lab.environment_module().shipped_pods()["logger"].source:
        obs["states"] = {c.name: {"state": "waiting", "reason": "CreateContainerError", "message": "refused when it was applied"}}
        return obs
    obs["states"] = {c.name: {"state": "running"}}
    mine = tags[c.volume_mounts[0].mount_path]
    holder = table.holding(DIR)
    obs["tags"]["pod"] = mine
    obs["down"] = [model.reaches(holder.tags if holder else "", mine)] * 2
    return obs


def steps(ops):
    def apply(env):        # on the solved lab: this exercise's part afresh, then the steps
        env.lab.environment_module().reset_exercise(env, "private-host-path")
        node = Node(env)
        pid = node.require_pid()
        for op in ops:
            try:
                if op["do"] == "bind":
                    node.run(pid, kernel.bind, op["source"], op["target"])
                elif op["do"] == "make":
                    node.run(pid, kernel.change_propagation, op["target"], op["propagation"], op["recursive"])
                elif op["do"] == "pod":           # the Pod file changed, the Pod deleted and applied again
                    path = env.dir / "pods" / "logger.yaml"
                    path.write_text(yaml.safe_dump(op["source"], sort_keys=False))
                    node.delete("logger")
                    node.apply_all(load_pods(path))
                else:
                    node.apply_all(load_pods(env.dir / "pods" / "logger.yaml"))
            except (OSError, RuntimeError, LabkitError, Refused):
                pass
    return apply
