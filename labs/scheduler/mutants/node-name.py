"""Near-misses of node-name, on the observation of the solved lab: the Pod's requests edited one
field at a time (tree_edits), the Pod bound by nobody's binding (spec.nodeName at creation) or by
a binding sent by hand, the Pod Failed although the scheduler bound it, the Pod not bound, the Pod
on node-c or node-f (the Filter plugins reject each for 2 CPUs), a Node changed, another Pod
deleted, the Pod gone; the answer edited one field at a time (tree_edits: dropped, or another
reason or figure; an edit that writes the same figure another way, "2000" for 2000, is proven
equivalent by the check's own reading of whole numbers). Two are also made live: the Pod made again on node-b by spec.nodeName, and
made again asking for 1 CPU."""

import copy

from labkit.mutants import Mutant, tree_edits


def _with(obs, **changes):
    out = copy.deepcopy(obs)
    out.update(changes)
    return out


def _with_pod(obs, **changes):
    out = copy.deepcopy(obs)
    out["pod"].update(changes)
    return out


def _again(node=None, cpu=None):
    def apply(env):
        env.lab.environment_module().remake_nightly(env, node=node, cpu=cpu, force=True)
    return apply


def mutants(ctx):
    lab = ctx.lab.environment_module()
    obs = ctx.lab._load("checks.py").observe_node_name(ctx)
    pod = obs["pod"]
    for edit in tree_edits({"requests": pod["requests"]}, alternatives={"requests[0].cpu": ["1", "1500m", "3"],
                                                                         "requests[0].memory": ["256Mi", "1Gi"]}):
        yield Mutant(f"requests:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"the Pod's {edit.describe()}", names=("requests", "changed"),
                     observation=_with_pod(obs, requests=edit.value.get("requests", [])),
                     apply=_again(cpu="1") if edit.path == "requests[0].cpu" and edit.after == "1" else None)
    yield Mutant("node-name-at-creation", "the Pod made with spec.nodeName (no binding)", names=("by hand",),
                 observation=_with(obs, bound_by=[]), apply=_again(node="node-b"))
    yield Mutant("bound-by-hand", "the Pod bound by a binding sent by a person", names=("by hand", "binding"),
                 observation=_with(obs, bound_by=["student"]))
    yield Mutant("failed", "the Pod bound by the scheduler, then Failed",
                 names=("Failed",), observation=_with_pod(obs, phase="Failed", reason="OutOfcpu",
                                                          message="Pod was rejected: ..."))
    yield Mutant("unbound", "the Pod not bound", names=("not bound",),
                 observation=_with(_with_pod(obs, nodeName=None), bound_by=[], placement=None))
    for node in (lab.PINNED_NODE, lab.RETIRING_NODE["metadata"]["name"]):
        others = [] if node == lab.PINNED_NODE else [checks_view(lab.LEGACY)]
        full = lab.PENDING_NODES[node] if node == lab.PINNED_NODE else lab.RETIRING_NODE
        yield Mutant(f"on:{node}", f"the Pod bound to {node}", names=("Filter", node),
                     observation=_with(_with_pod(obs, nodeName=node), placement={
                         "node": {"metadata": {"name": node, "labels": full["metadata"]["labels"]},
                                  "spec": {}, "status": {"allocatable": full["status"]["allocatable"]}},
                         "others": others}))
    yield Mutant("node-changed", "a Node changed by the student", names=("node-e", "changed"),
                 observation=_with(obs, nodes_changed=["node-e"]))
    yield Mutant("pod-deleted", "another Pod of the namespace deleted", names=("legacy", "deleted"),
                 observation=_with(obs, deleted=["legacy"]))
    checks = ctx.lab._load("checks.py")
    truth = checks.rejection_truth(lab)
    for edit in tree_edits(obs["answer"], alternatives={"reason": ["OutOfmemory", "OutOfpods", "Unschedulable"],
                                                        "requested": [2, 1000, 1500], "used": [500, 2000],
                                                        "capacity": [1, 2000, 4000]}):
        same = edit.op == "set" and edit.path in truth and (
            str(edit.after).strip() == truth[edit.path] if edit.path == "reason"
            else checks._int(edit.after) == truth[edit.path])
        yield Mutant(f"answer:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"the answer's {edit.describe()}",
                     names=() if same else (edit.path,) if edit.op == "drop" else ("not right",),
                     observation=_with(obs, answer=edit.value),
                     equivalent="the same figure, written another way" if same else None)
    yield Mutant("gone", "the Pod gone", names=("no Pod",), observation=_with(obs, pod=None, placement=None))


def checks_view(pod: dict) -> dict:
    """A Pod of the lab as the check's placement lists it (checks._bound_view's fields)."""
    spec = pod["spec"]
    return {"name": pod["metadata"]["name"], "namespace": "sched", "nodeName": spec.get("nodeName"),
            "schedulerName": None, "nodeSelector": {}, "tolerations": [],
            "requests": [c["resources"]["requests"] for c in spec["containers"]]}
