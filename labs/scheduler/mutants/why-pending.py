"""Near-misses of why-pending, on the observation of the solved lab: the Pod's tolerations (its
own and the two DefaultTolerationSeconds added) edited one field at a time (tree_edits: each field dropped or changed); a mutant that tolerates exactly
the same taints as the reference (labkit's TaintToleration reconstruction, objects.tolerates,
over every taint of node-a to node-e and checks.tolerated_taints' whole space: every key and
value named, one more of each, every effect) is proven equivalent, every other must be killed.
Besides: tolerations wider than the team's taint (another value, or every effect), web bound by
hand, web bound to node-b, node-c or node-d (the Filter plugins reject each), the wildcard toleration, a second toleration of node-d's taint, each Node's
taints, labels and allocatable edited one step at a time, the Pod's requests and nodeSelector
edited, the Pod gone. Two are also made live: the toleration's value changed, node-a's taint
removed."""

import copy
import json

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant, tree_edits
from labkit.scheduler.objects import tolerates


def _with_pod(obs, **changes):
    out = copy.deepcopy(obs)
    out["pod"].update(changes)
    return out


def _tolerated(lab, tolerations) -> list[bool]:
    taints = [t for node in [*lab.PENDING_NODES.values(), lab.DRAIN_NODE] for t in node["spec"].get("taints") or []]
    return [any(tolerates(tol, t) for tol in tolerations) for t in taints]


def _patch_toleration(tolerations):
    def apply(env):
        for_env(env).kubectl("delete", "pod", "web", "-n", "sched", "--force", "--grace-period=0")
        pod = json.loads(json.dumps(env.lab.environment_module().WEB))
        pod["spec"]["tolerations"] = tolerations
        for_env(env).kubectl("create", "-n", "sched", "-f", "-", input=json.dumps(pod))
    return apply


def _untaint(env):
    for_env(env).kubectl("taint", "node", "node-a", "dedicated-")


def _bind_by_hand(env):
    """web bound to node-a (where the scheduler puts it) by a binding POSTed with kubectl."""
    target = for_env(env)
    target.kubectl("delete", "pod", "web", "-n", "sched", "--force", "--grace-period=0")
    pod = json.loads(json.dumps(env.lab.environment_module().WEB))
    pod["spec"]["schedulerName"] = "nobody"         # no scheduler binds it first
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
    target.kubectl("create", "-n", "sched", "-f", "-", input=json.dumps(pod))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web", "namespace": "sched"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}
    target.kubectl("create", "--raw", "/api/v1/namespaces/sched/pods/web/binding", "-f", "-",
                   input=json.dumps(binding))


def mutants(ctx):
    lab = ctx.lab.environment_module()
    checks = ctx.lab._load("checks.py")
    obs = checks.observe_why_pending(ctx)
    tolerations = obs["pod"]["tolerations"]
    known = [t for node in [*lab.PENDING_NODES.values(), lab.DRAIN_NODE] for t in node["spec"].get("taints") or []]

    def wide(tols):
        # every taint they tolerate, over the whole space that tells tolerations apart (not only
        # the taints on the lab's Nodes today), the DefaultTolerationSeconds ones aside
        return checks.tolerated_taints(checks.own_tolerations(tols), known)
    reference = (_tolerated(lab, tolerations), wide(tolerations))
    team = next(i for i, t in enumerate(tolerations) if t.get("key") == "dedicated")
    alternatives = {"[].key": ["maintenance", "dedicate", ""], "[].value": ["gpu", "true", "batc", ""],
                    "[].operator": ["Exists", "In", ""], "[].effect": ["NoExecute", "PreferNoSchedule", ""]}
    for edit in tree_edits(tolerations, alternatives={k.replace("[]", f"[{team}]"): v for k, v in alternatives.items()}):
        same = (_tolerated(lab, edit.value), wide(edit.value)) == reference
        name = f"toleration:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else "")
        yield Mutant(name, f"web's tolerations: {edit.describe()}",
                     names=() if same else ("tolerate",),
                     observation=_with_pod(obs, tolerations=edit.value),
                     apply=_patch_toleration(edit.value) if edit.path == f"[{team}].value" and edit.after == "gpu"
                     else None,
                     equivalent="it tolerates the same taints as the reference toleration (labkit's "
                                "TaintToleration reconstruction, every taint of node-a to node-e and every key, "
                                "value and effect that tells tolerations apart)"
                     if same else None)
    for wider, what in (({"key": "dedicated", "operator": "Exists"}, "any value and effect of the key dedicated"),
                        ({"key": "dedicated", "operator": "Equal", "value": "batch"}, "dedicated=batch, every effect"),
                        ({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
                         "dedicated with any value, NoSchedule")):
        yield Mutant(f"wider:{json.dumps(wider, sort_keys=True)}", f"web tolerates {what}",
                     names=("more than the team's taint",),
                     observation=_with_pod(obs, tolerations=[t for i, t in enumerate(tolerations) if i != team]
                                           + [wider]))
    yield Mutant("bound-by-hand", "web bound to its node by a binding sent by hand", names=("by hand",),
                 observation={**obs, "bound_by_hand": ["labkit-admin"]}, apply=_bind_by_hand)
    for node in ("node-b", "node-c", "node-d"):
        view = lab.PENDING_NODES[node]
        placed = {"node": checks._filter_node(view), "others": []}
        yield Mutant(f"placed-on:{node}", f"web bound to {node}", names=(node, "Filter"),
                     observation={**_with_pod(obs, nodeName=node), "placement": placed})
    yield Mutant("wildcard", "web tolerates every taint (operator Exists, no key)", names=("more than the team's taint",),
                 observation=_with_pod(obs, tolerations=[{"operator": "Exists"}]))
    yield Mutant("also-maintenance", "web also tolerates node-d's taint", names=("more than the team's taint", "node-d"),
                 observation=_with_pod(obs, tolerations=[*tolerations, {"key": "maintenance", "operator": "Exists"}]))
    yield Mutant("pod-gone", "the Pod web is gone", names=("no Pod",), observation={**obs, "pod": None})
    yield Mutant("requests", "web's CPU request lowered to 1", names=("requests",),
                 observation=_with_pod(obs, requests=[{"cpu": "1", "memory": "1Gi"}]))
    yield Mutant("no-requests", "web's requests removed", names=("requests",), observation=_with_pod(obs, requests=[{}]))
    for selector in ({}, {"disk": "hdd"}, {"disk": "ssd", "zone": "a"}):
        yield Mutant(f"selector={json.dumps(selector, sort_keys=True)}", f"web's nodeSelector: {selector}",
                     names=("nodeSelector",), observation=_with_pod(obs, nodeSelector=selector))
    for node, view in obs["nodes"].items():
        for edit in tree_edits(view, alternatives={"allocatable.cpu": ["8", "2"], "labels.disk": ["hdd", "ssd"],
                                                   "unschedulable": [True]}):
            if edit.value == view or (edit.op == "drop" and edit.path == "unschedulable"):
                continue        # (the observation always says whether a node is unschedulable)
            name = f"node:{node}:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else "")
            yield Mutant(name, f"{node}: {edit.describe()}", names=(node, "changed"),
                         observation={**obs, "nodes": {**obs["nodes"], node: edit.value}},
                         apply=_untaint if (node, edit.op, edit.path) == ("node-a", "drop-item", "taints[0]") else None)
        yield Mutant(f"node:{node}:gone", f"{node} deleted", names=(node, "gone"),
                     observation={**obs, "nodes": {**obs["nodes"], node: None}})
