"""Near-misses of stuck-finalizer: the answer edited (the Pod cut, swapped for the ReplicaSet's
name or another Pod's; the finalizer swapped for the GC's own or cut), and the observation of the
solved lab changed — the ReplicaSet patched or updated by hand, the ReplicaSet or a Pod left
(one made live: a Pod of the ReplicaSet that stays)."""

import copy

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant, answer_mutants


def _leftover_pod(env):
    lab = env.lab.environment_module()
    template = lab.replicaset("reports", 1)["spec"]["template"]
    for_env(env).client().create("v1", "pods", {"metadata": {"name": "reports-zz9zz", **template["metadata"]},
                                               "spec": template["spec"]}, "shop")


def _with(obs, **changes):
    out = copy.deepcopy(obs)
    out.update(changes)
    return out


def _names(edit):
    """A dropped key is named; a GC finalizer is named as the GC's; any other wrong value gets the
    diagnosis's verdict without its part (CheckContext.grid_feedback)."""
    if edit.op == "drop":
        return (edit.key,)
    if edit.key == "finalizer" and edit.after in ("foregroundDeletion", "orphan"):
        return ("diagnosis is wrong", "finalizer of the garbage collector's own")
    return ("diagnosis is not right", "does not say how many")


def mutants(ctx):
    answer = ctx.answer()
    name = ctx.params["replicaset"]
    pod = answer["pod"]
    other = f"{name}-{''.join('x' if c != 'x' else 'y' for c in pod.rsplit('-', 1)[-1])}"
    yield from answer_mutants(answer, alternatives={"pod": [name, other, pod[:-1], ""],
                                                    "finalizer": ["foregroundDeletion", "orphan",
                                                                  answer["finalizer"][:-1], ""]},
                              names=_names)
    obs = ctx.lab._load("checks.py").observe_stuck_finalizer(ctx)
    for verb in ("patch", "update"):
        yield Mutant(f"by-hand:{verb}", f"the ReplicaSet changed by hand ({verb})", names=("by hand",),
                     observation=_with(obs, writes=[{"verb": verb, "kind": "ReplicaSet", "name": name, "finalizers": True}]))
    rs = {"kind": "ReplicaSet", "name": name, "deleting": True, "finalizers": ["foregroundDeletion"]}
    held = {"kind": "Pod", "name": pod, "deleting": True, "finalizers": [answer["finalizer"]]}
    yield Mutant("still-terminating", "the ReplicaSet still waits for the held Pod", names=("still Terminating",),
                 observation=_with(obs, left=[rs, held]))
    yield Mutant("pod-left", "the ReplicaSet went (its finalizer removed by someone) but the held Pod stays",
                 names=("still there",), observation=_with(obs, left=[held]))
    yield Mutant("pod-not-deleted", "a Pod of the ReplicaSet stays, not being deleted", names=("still there",),
                 observation=_with(obs, left=[{"kind": "Pod", "name": "reports-zz9zz", "deleting": False,
                                               "finalizers": []}]), apply=_leftover_pod)
    # the dependents changed beyond the release of the holding finalizer
    for what, touched in (("ownerReferences", ["metadata.ownerReferences"]), ("labels", ["metadata.labels"]),
                          ("spec", ["spec"]), ("delete", ["the Pod (DELETE)"])):
        verb = "delete" if what == "delete" else "patch"
        yield Mutant(f"pod-changed:{what}", f"a Pod of the ReplicaSet changed by hand beyond its finalizers ({what})",
                     names=("beyond its finalizers", touched[0]),
                     observation=_with(obs, pod_writes=[*obs["pod_writes"], {"verb": verb, "name": pod, "touched": touched}]))
