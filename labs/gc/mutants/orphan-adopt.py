"""Near-misses of orphan-adopt, on the observation of the solved lab: worker-v2's replicas and
selector edited one step at a time (tree_edits: dropped, changed, widened by a label, narrowed;
an `In` expression with the one value is equivalent), worker still there, deleted with another
policy or not by the student, no worker-v2, and each adopted Pod in turn not controlled, re-created,
deleted or gone. Two are also made live: worker-v2 scaled to 3 and to 1."""

import copy

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant, tree_edits


def _scale(replicas):
    def apply(env):
        for_env(env).client().patch("apps/v1", "replicasets", "worker-v2", {"spec": {"replicas": replicas}}, "merge",
                                    "shop")
    return apply


def _with(obs, **changes):
    out = copy.deepcopy(obs)
    out.update(changes)
    return out


def mutants(ctx):
    obs = ctx.lab._load("checks.py").observe_orphan_adopt(ctx)
    old, new = ctx.params["replicaset"], ctx.params["new_replicaset"]
    spec = {"replicas": obs["new"]["replicas"], "selector": obs["new"]["selector"]}
    live = {3: _scale(3), 1: _scale(1)}
    for edit in tree_edits(spec, alternatives={"selector.matchLabels.app": [old[:-1], "", new, "web"]}):
        # an unset replicas is 1 (the apps/v1 default)
        changed = _with(obs, new={**obs["new"], "replicas": edit.value.get("replicas", 1),
                                  "selector": edit.value.get("selector")})
        words = ("replicas",) if edit.path == "replicas" else ("selector",)
        after = edit.after if edit.path == "replicas" else None
        yield Mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"worker-v2: {edit.describe()}", names=words, observation=changed,
                     apply=live.get(after) if edit.op == "set" else None)
    labels = obs["new"]["selector"].get("matchLabels") or {}
    yield Mutant("selector+label", "the selector asks for one more label", names=("selector",),
                 observation=_with(obs, new={**obs["new"], "selector": {"matchLabels": {**labels, "tier": "batch"}}}))
    yield Mutant("selector-as-expression", "the selector as a matchExpressions In with the one value",
                 observation=_with(obs, new={**obs["new"], "selector": {"matchExpressions": [
                     {"key": "app", "operator": "In", "values": [old]}]}}),
                 equivalent="matchLabels app=worker and `app In (worker)` select the same objects "
                            "(labels.Selector requirements)")
    yield Mutant("selector-widened", "the selector lets in another value", names=("selector",),
                 observation=_with(obs, new={**obs["new"], "selector": {"matchExpressions": [
                     {"key": "app", "operator": "In", "values": [old, "web"]}]}}))
    yield Mutant("old-present", f"{old} is still there", names=("still there",), observation=_with(obs, old="present"))
    yield Mutant("old-deleting", f"{old} is being deleted", names=("still there",), observation=_with(obs, old="deleting"))
    for policy in ("Background", "Foreground", "default"):
        yield Mutant(f"policy={policy}", f"{old} deleted with propagationPolicy {policy}",
                     names=(f"propagationPolicy {policy}",), observation=_with(obs, delete=policy))
    yield Mutant("no-delete", f"nobody deleted {old} as the student", names=("no DELETE",),
                 observation=_with(obs, delete=None))
    yield Mutant("pods-created-on-the-way", f"{new} created two Pods of its own, deleted again once it adopted",
                 names=("created on the way",), observation=_with(obs, created_pods=2))
    yield Mutant("no-new", f"no {new}", names=(f"no ReplicaSet {new}",), observation=_with(obs, new=None))
    extra = {**obs["pods"][0], "name": f"{old}-zz9zz", "uid": "00000000-0000-0000-0000-000000000003"}
    yield Mutant("pod-added", "one more Pod, new, controlled by the new ReplicaSet", names=("new, not adopted",),
                 observation=_with(obs, pods=[*obs["pods"], extra]))
    for i, pod in enumerate(obs["pods"]):
        pods = copy.deepcopy(obs["pods"])
        pods[i]["controller"] = None
        yield Mutant(f"pod{i}:orphan", f"Pod {i} not controlled", names=(f"not controlled by {new}",),
                     observation=_with(obs, pods=pods))
        pods = copy.deepcopy(obs["pods"])
        pods[i]["controller"] = "00000000-0000-0000-0000-000000000001"
        yield Mutant(f"pod{i}:other-controller", f"Pod {i} controlled by another owner",
                     names=(f"not controlled by {new}",), observation=_with(obs, pods=pods))
        pods = copy.deepcopy(obs["pods"])
        pods[i]["uid"] = "00000000-0000-0000-0000-000000000002"
        yield Mutant(f"pod{i}:re-created", f"Pod {i} re-created (another UID)", names=("were deleted",),
                     observation=_with(obs, pods=pods))
        pods = copy.deepcopy(obs["pods"])
        pods[i]["deleting"] = True
        yield Mutant(f"pod{i}:deleting", f"Pod {i} being deleted", names=("were deleted",),
                     observation=_with(obs, pods=pods))
        yield Mutant(f"pod{i}:gone", f"Pod {i} gone", names=("were deleted",),
                     observation=_with(obs, pods=obs["pods"][:i] + obs["pods"][i + 1:]))
        yield Mutant(f"pod{i}:deleted-by-request", f"a DELETE of Pod {i} in the audit log", names=("were deleted",),
                     observation=_with(obs, deleted_pods=[pod["name"]]))
