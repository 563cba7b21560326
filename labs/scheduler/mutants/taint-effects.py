"""Near-misses of taint-effects, on the observation of the solved lab: node-f's taint edited one
field at a time (tree_edits: key, value or effect dropped or changed; a mutant whose taints are
all PreferNoSchedule is proven equivalent, the key and value being free), a second taint of
each effect added, node-f cordoned, its labels or allocatable changed, every other Node's taints,
labels, allocatable and spec.unschedulable edited one step at a time, node-f's annotations, other
spec fields, capacity or conditions changed, legacy gone or deleted and made again. Two are also
made live: the effect NoSchedule, and node-f cordoned."""

import copy

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant, tree_edits


def _node(obs, name, view):
    out = copy.deepcopy(obs)
    out["nodes"][name] = view
    return out


def _retaint(effect):
    def apply(env):
        for_env(env).kubectl("taint", "node", "node-f", "retiring-")
        for_env(env).kubectl("taint", "node", "node-f", f"retiring=true:{effect}")
    return apply


def _cordon(env):
    for_env(env).kubectl("cordon", "node-f")


def mutants(ctx):
    name = ctx.params["node"]
    obs = ctx.lab._load("checks.py").observe_taint_effects(ctx)
    view = obs["nodes"][name]
    alternatives = {"taints[0].effect": ["NoSchedule", "NoExecute"], "taints[0].key": ["drain", "retirin"],
                    "taints[0].value": ["false", ""], "unschedulable": [True], "allocatable.cpu": ["4", "1"],
                    "labels.disk": ["ssd", ""]}
    for edit in tree_edits(view, alternatives=alternatives):
        taints = edit.value.get("taints")
        free = edit.path.startswith("taints[0].") and edit.path != "taints[0].effect" or \
            edit.path == "taints[0].effect" and edit.after == "PreferNoSchedule"
        if edit.op == "drop" and edit.path in ("taints[0].effect", "taints[0].key", "unschedulable"):
            # a taint without a key or effect is refused by the API server's validation; the observation
            # always says whether the node is unschedulable
            continue
        names = () if free else \
            ("no taint",) if not taints else \
            ("NoExecute",) if any(t.get("effect") == "NoExecute" for t in taints) else \
            ("NoSchedule",) if any(t.get("effect") == "NoSchedule" for t in taints) else \
            ("cordoned",) if edit.path == "unschedulable" else (edit.path.split(".")[0], "changed")
        live = _retaint(edit.after) if edit.path == "taints[0].effect" and edit.after == "NoSchedule" else \
            _cordon if edit.path == "unschedulable" else None
        yield Mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""), f"{name}: {edit.describe()}",
                     names=names, observation=_node(obs, name, edit.value), apply=live,
                     equivalent="the taint's key and value are the student's to choose: every PreferNoSchedule "
                                "taint passes TaintToleration's Filter and lowers its Score alike" if free else None)
    for effect, words in (("NoSchedule", ("NoSchedule",)), ("NoExecute", ("NoExecute",)), ("PreferNoSchedule", ())):
        more = {**view, "taints": [*view["taints"], {"key": "old", "value": "yes", "effect": effect}]}
        yield Mutant(f"second-taint={effect}", f"{name}: a second taint, {effect}", names=words,
                     observation=_node(obs, name, more),
                     equivalent="two PreferNoSchedule taints: Filter passes, Score counts them (still the lowest)"
                     if not words else None)
    misspelt = {**view, "taints": [{**view["taints"][0], "effect": "PreferNoSchedul"}, *view["taints"][1:]]}
    yield Mutant("effect-misspelt", f"{name}: the taint's effect misspelt (stored by a server that validated no taint)",
                 names=("none of", "spelling"), observation=_node(obs, name, misspelt))
    yield Mutant("legacy-gone", "the Pod legacy is gone", names=("legacy", "gone"), observation={**obs, "pod": False})
    yield Mutant("legacy-made-again", "the Pod legacy deleted and made again", names=("legacy", "deleted"),
                 observation={**obs, "pod_deleted": True})
    yield Mutant("node-made-again", f"{name} deleted and registered again with the taint",
                 names=("deleted the Node", name), observation={**obs, "node_deleted": True})
    rest = obs["rest"]
    for key, value in (("annotations", {**rest["annotations"], "retired": "yes"}),
                       ("spec", {**rest["spec"], "podCIDR": "10.9.0.0/24"}),
                       ("capacity", {**rest["capacity"], "cpu": "64"}),
                       ("conditions", ["Ready=False"])):
        yield Mutant(f"rest:{key}", f"{name}'s {key} changed", names=(key, "changed"),
                     observation={**obs, "rest": {**rest, key: value}})
    yield Mutant("node-gone", f"{name} deleted", names=(name, "gone"), observation=_node(obs, name, None))
    for other, other_view in obs["nodes"].items():
        if other == name:
            continue
        for edit in tree_edits(other_view, alternatives={"unschedulable": [True], "allocatable.cpu": ["16"],
                                                         "labels.disk": ["nvme"]}):
            if edit.op == "drop" and edit.path == "unschedulable":
                continue
            yield Mutant(f"node:{other}:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                         f"{other}: {edit.describe()}", names=(other, "changed"),
                         observation=_node(obs, other, edit.value))
        tainted = {**other_view, "taints": [*other_view["taints"], {"key": "retiring", "value": "true",
                                                                    "effect": "PreferNoSchedule"}]}
        yield Mutant(f"node:{other}:tainted", f"{other} tainted too", names=(other, "changed"),
                     observation=_node(obs, other, tainted))
