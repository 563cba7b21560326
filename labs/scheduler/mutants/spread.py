"""Near-misses of spread, on the observation of the solved lab: the template's constraint edited
one field at a time (tree_edits: each field dropped or changed, the selector's labels too), kept
consistent in shop's Pods (as the rollout would make them); one whose labkit reconstruction
behaves as the reference's over the whole space the exercise covers (the same zone counts and
Pending replicas when the six replicas are scheduled one after another on the pool as the lab
builds it, with cart, and the same verdict of the selector on every label set of
checks.selector_space) is proven equivalent, every other must be killed. Besides: the
replicas, requests, nodeSelector and tolerations edited, the pool's Nodes edited one step at a
time, cart gone or relabelled, a replica bound by hand, a bound replica moved to zone-c-1, the
Pending one bound in zone-a, the answer edited one field at a time (an edit that writes the
same count or reason another way is proven equivalent by the check's own reading). Two are also
made live: maxSkew 2, and five replicas."""

import copy
import json
import random

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant, tree_edits
from labkit.scheduler import framework as fw
from labkit.scheduler.objects import Node, NodeInfo, Pod, label_selector_matches
from labkit.scheduler.plugins import _selector_of
from labkit.scheduler.profiles import make_profile


def _with(obs, **changes):
    out = copy.deepcopy(obs)
    out.update(changes)
    return out


def _with_constraints(obs, constraints):
    """The observation with the template's constraints changed, and shop's Pods made of it."""
    out = copy.deepcopy(obs)
    out["deployment"]["constraints"] = constraints
    for pod in out["pods"] + [p for p in out["cluster"]["pods"] if p["metadata"]["uid"] in
                              {x["metadata"]["uid"] for x in out["pods"]}]:
        pod["spec"]["topologySpreadConstraints"] = copy.deepcopy(constraints)
    return out


def simulate(lab, constraints) -> tuple[dict, int]:
    """The zones' counts of shop's Pods and how many stay Pending, when labkit's reconstruction
    of the default profile schedules the six replicas one after another on the pool as the lab
    builds it (cart on zone-a-1), ties broken with seed 0."""
    required = ("maxSkew", "topologyKey", "whenUnsatisfiable")
    if any(not all(c.get(k) for k in required) or isinstance(c.get("maxSkew"), str) for c in constraints or []):
        return {"invalid": 1}, -1       # the API server refuses it (validation.go validateTopologySpreadConstraints)
    nodes = [NodeInfo(Node(n)) for n in lab.ZONE_NODES.values()]
    by_name = {n.name: n for n in nodes}
    cart = copy.deepcopy(lab.CART)
    cart["metadata"]["namespace"] = "sched"
    by_name["zone-a-1"].add(Pod(cart))
    rng, pending, counts = random.Random(0), 0, {}
    for i in range(lab.SHOP_REPLICAS):
        template = copy.deepcopy(lab.SHOP["spec"]["template"])
        obj = {"metadata": {"name": f"shop-{i}", "namespace": "sched", "uid": f"shop-{i}",
                            "labels": {**template["metadata"]["labels"], "pod-template-hash": "h"}},
               "spec": {**template["spec"], "topologySpreadConstraints": copy.deepcopy(constraints)}}
        cycle = fw.schedule(make_profile("default"), nodes, Pod(obj), rng=rng)
        if cycle.chosen is None:
            pending += 1
            continue
        obj["spec"]["nodeName"] = cycle.chosen
        by_name[cycle.chosen].add(Pod(obj))
        zone = by_name[cycle.chosen].node.labels[lab.ZONE_KEY]
        counts[zone] = counts.get(zone, 0) + 1
    return counts, pending


def _selector_verdicts(checks, lab, obs, constraints) -> list:
    must, must_not = checks.selector_space(lab, obs["deployment"]["labels"],
                                           [x["metadata"]["labels"] for x in obs["pods"]], obs["other_labels"])
    out = []
    for c in constraints or []:
        for labels in must + must_not:
            out.append(label_selector_matches(_selector_of(Pod({"metadata": {"labels": labels}, "spec": {}}), c), labels))
    return out


def _patch_constraint(constraint):
    def apply(env):
        for_env(env).kubectl("patch", "deployment", "shop", "-n", "sched", "--type=json", "-p", json.dumps(
            [{"op": "replace", "path": "/spec/template/spec/topologySpreadConstraints", "value": [constraint]}]))
    return apply


def _scale(replicas):
    def apply(env):
        for_env(env).kubectl("scale", "deployment", "shop", "-n", "sched", f"--replicas={replicas}")
    return apply


FIELD_NAMES = {"maxSkew": "maxSkew", "topologyKey": "topologyKey", "whenUnsatisfiable": "whenUnsatisfiable",
               "labelSelector": "labelSelector"}


def mutants(ctx):
    lab = ctx.lab.environment_module()
    checks = ctx.lab._load("checks.py")
    obs = checks.observe_spread(ctx)
    constraints = obs["deployment"]["constraints"]
    reference = (simulate(lab, constraints), _selector_verdicts(checks, lab, obs, constraints))
    alternatives = {"[0].maxSkew": [2, 0], "[0].topologyKey": ["kubernetes.io/hostname", "zone", "pool"],
                    "[0].whenUnsatisfiable": ["ScheduleAnyway", ""],
                    "[0].labelSelector.matchLabels.app": ["cart", "frontend", ""]}
    for edit in tree_edits(constraints, alternatives=alternatives):
        if not edit.value:
            continue            # no constraint at all: below
        same = (simulate(lab, edit.value), _selector_verdicts(checks, lab, obs, edit.value)) == reference
        field = edit.path.split(".")[1] if "." in edit.path else ""
        field = field.split("[")[0]
        name = f"constraint:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else "")
        yield Mutant(name, f"the constraint: {edit.describe()}",
                     names=() if same else (FIELD_NAMES.get(field, "constraint"),),
                     observation=_with_constraints(obs, edit.value),
                     apply=_patch_constraint(edit.value[0]) if edit.path == "[0].maxSkew" and edit.after == 2 else None,
                     equivalent="labkit's reconstruction places the six replicas as with the reference constraint "
                                "and the selector matches the same label sets" if same else None)
    yield Mutant("constraint:none", "no topologySpreadConstraints", names=("no topologySpreadConstraints",),
                 observation=_with_constraints(obs, None))
    hostname = {**constraints[0], "topologyKey": "kubernetes.io/hostname"}
    yield Mutant("constraint:two", "a second constraint, over the hostname", names=("2 constraints",),
                 observation=_with_constraints(obs, [*constraints, hostname]))
    for selector, what in (({"matchLabels": {"tier": "frontend"}}, "tier=frontend (cart too)"),
                           ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["shop", "cart"]}]},
                            "app in (shop, cart)"),
                           ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "every Pod with an app")):
        yield Mutant(f"selector:{json.dumps(selector, sort_keys=True)}", f"the selector: {what}",
                     names=("labelSelector", "not shop's"),
                     observation=_with_constraints(obs, [{**constraints[0], "labelSelector": selector}]))
    yield Mutant("minDomains:4", "minDomains 4, more than the zones", names=("minDomains",),
                 observation=_with_constraints(obs, [{**constraints[0], "minDomains": 4}]))
    for replicas in (5, 7):
        yield Mutant(f"replicas={replicas}", f"{replicas} replicas", names=("replicas",),
                     observation=_with(obs, deployment={**obs["deployment"], "replicas": replicas}),
                     apply=_scale(5) if replicas == 5 else None)
    for key, value in (("requests", [{"cpu": "500m", "memory": "256Mi"}]), ("nodeSelector", {}),
                       ("tolerations", [])):
        yield Mutant(f"template:{key}", f"the template's {key} changed", names=(key,),
                     observation=_with(obs, deployment={**obs["deployment"], key: value}))
    yield from ctx.lab._load("mutants/_nodes.py").node_mutants(
        obs, alternatives={"allocatable.cpu": ["4", "8"], f"labels.{lab.ZONE_KEY}": ["zone-a", "zone-b", "zone-c"],
                           "unschedulable": [True]})
    yield Mutant("cart:gone", "cart deleted", names=("cart",), observation=_with(obs, cart=None))
    yield Mutant("cart:relabelled", "cart's tier label removed", names=("cart",),
                 observation=_with(obs, cart={**obs["cart"], "labels": {"app": "cart"}}))
    yield Mutant("deployment:gone", "shop deleted", names=("no Deployment",), observation=_with(obs, deployment=None))
    yield Mutant("bound-by-hand", "a replica bound by a binding sent by hand", names=("by hand",),
                 observation=_with(obs, bound_by_hand=["labkit-admin"]))
    bound = [x for x in obs["pods"] if x["spec"].get("nodeName")]
    pending = [x for x in obs["pods"] if not x["spec"].get("nodeName")]
    moved = next(x for x in bound if x["spec"]["nodeName"] != "zone-c-1")
    for pod, node, what, words in ((moved, "zone-c-1", "a bound replica moved to zone-c-1", ("Filter", "zone-c-1")),
                                   (pending[0], "zone-a-1", "the Pending replica bound to zone-a-1",
                                    ("Filter", "PodTopologySpread"))):
        out = copy.deepcopy(obs)
        for x in out["pods"]:
            if x["metadata"]["uid"] == pod["metadata"]["uid"]:
                x["spec"]["nodeName"] = node
        out["cluster"]["pods"] = [x for x in out["cluster"]["pods"] if x["metadata"]["uid"] != pod["metadata"]["uid"]] \
            + [next(x for x in out["pods"] if x["metadata"]["uid"] == pod["metadata"]["uid"])]
        # zone-a then holds three: the first of its Pods the check judges fails PodTopologySpread
        yield Mutant(f"placed:{pod['metadata']['name']}:{node}", what, names=words, observation=out)
    truth, _placeable = checks.spread_truth(ctx, obs)
    for edit in tree_edits(obs["answer"], alternatives={
            "zones.zone-a": [1, 3, "2"], "zones.zone-b": [1, 3], "zones.zone-c": [0, 2],
            "nodes.zone-c-1": [checks_spread_reason(), "Insufficient memory", "1 Insufficient cpu.", "insufficient CPU"],
            "nodes.zone-a-1": ["Insufficient cpu", "node(s) didn't match Pod's node affinity/selector"]}):
        parts = edit.path.split(".")
        same = edit.op == "set" and len(parts) == 2 and (
            checks._int(edit.after) == truth["zones"].get(parts[1]) if parts[0] == "zones"
            else checks._reason_text(edit.after) == checks._reason_text(truth["nodes"].get(parts[1], "")))
        names = () if same else (parts[0],) if edit.op == "drop" and len(parts) == 1 else \
            ("missing",) if edit.op == "drop" else ("not right",)
        yield Mutant(f"answer:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"the answer's {edit.describe()}", names=names, observation=_with(obs, answer=edit.value),
                     equivalent="the same count or reason, written another way" if same else None)
    yield Mutant("answer:none", "no answer written", names=("no answer",),
                 observation=_with(obs, answer=None, unanswered="no answer yet: write it to ..."))


def checks_spread_reason() -> str:
    from labkit.scheduler.plugins import SPREAD_REASON
    return SPREAD_REASON
