"""Near-misses of foreground-delete: the answer edited (the finalizer changed to the other GC
finalizer, another, or cut; the last kind changed), and the observation of the solved lab changed
one thing at a time — the Deployment still there (also made live), no DELETE by the student,
another propagationPolicy, a finalizer removed by hand from the Deployment or its ReplicaSet, a ReplicaSet or Pod of
the chain deleted by hand while it waits, the Deployment scaled before or while it is deleted,
something of the chain left behind."""

import copy

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant, answer_mutants


def _recreate(env):
    lab = env.lab.environment_module()
    for_env(env).client().create("apps/v1", "deployments", lab.deployment("api", 2), "shop")


def _with(obs, **changes):
    out = copy.deepcopy(obs)
    out.update(changes)
    return out


def mutants(ctx):
    answer = ctx.answer()
    kinds = ["Deployment", "ReplicaSet", "Pod"]
    yield from answer_mutants(answer, alternatives={"finalizer": ["orphan", "kubernetes", "example.com/keep"],
                                                    "last": [k for k in kinds if k != answer["last"]]},
                              names=lambda e: (e.key,) if e.op == "drop" or (e.key == "last" and str(e.after).lower()
                                                                              not in ("deployment", "replicaset", "pod"))
                              else ("answer is not right",))
    obs = ctx.lab._load("checks.py").observe_foreground_delete(ctx)
    name = ctx.params["deployment"]
    yield Mutant("deployment-present", "the Deployment is still there, not being deleted", names=("still there",),
                 observation=_with(obs, deployment="present", left=[]), apply=_recreate)
    yield Mutant("no-delete", "nobody deleted the Deployment through the API as the student", names=("no DELETE",),
                 observation=_with(obs, delete=None))
    for policy in ("Background", "Orphan", "default"):
        yield Mutant(f"policy={policy}", f"the Deployment deleted with propagationPolicy {policy}",
                     names=(f"propagationPolicy {policy}",), observation=_with(obs, delete=policy))
    for kind, target in (("Deployment", name), ("ReplicaSet", f"{name}-6c9f8d7b5")):
        for verb in ("patch", "update"):
            hand = {"verb": verb, "kind": kind, "name": target, "finalizers": True}
            yield Mutant(f"by-hand:{verb}:{kind}", f"the finalizers of the {kind} changed by hand ({verb})",
                         names=("by hand", kind), observation=_with(obs, writes=[hand]))
    first = {"verb": "delete", "kind": "Deployment", "name": name, "finalizers": False, "policy": "Foreground"}
    for policy in ("Background", "Orphan"):
        yield Mutant(f"deleted-again={policy}", f"the waiting Deployment deleted a second time with {policy} (which "
                     "drops its foregroundDeletion)", names=("a second time", policy),
                     observation=_with(obs, writes=[first, {**first, "policy": policy}]))
    for kind, target in (("ReplicaSet", f"{name}-6c9f8d7b5"), ("Pod", f"{name}-6c9f8d7b5-x2k4q")):
        for policy in ("Background", "Orphan", "Foreground", "default"):
            dependent = {"verb": "delete", "kind": kind, "name": target, "finalizers": False, "policy": policy}
            yield Mutant(f"dependent-deleted:{kind}:{policy}", f"the student deleted a {kind} of the chain by hand "
                         f"({policy}) while the foreground deletion went on", names=("yourself", f"{kind} {target}"),
                         observation=_with(obs, writes=[first, dependent]))
    yield Mutant("deleted-again=Foreground", "the waiting Deployment deleted a second time, in the foreground again",
                 observation=_with(obs, writes=[first, first]),
                 equivalent="a second Foreground DELETE keeps foregroundDeletion (store.go, "
                            "deletionFinalizersForGarbageCollection): the deletion goes on as before")
    scale = {"verb": "patch", "kind": "Deployment", "name": name, "finalizers": False}
    yield Mutant("scaled-before", "the Deployment scaled by hand before the foreground DELETE",
                 names=("before you deleted",), observation=_with(obs, writes=[scale, first]))
    yield Mutant("scaled-while", "the Deployment scaled by hand while the foreground deletion went on",
                 names=("while the foreground deletion went on",), observation=_with(obs, writes=[first, scale]))
    yield Mutant("deployment-waiting", "the Deployment still waits", names=("still going on",),
                 observation=_with(obs, deployment="deleting", left=[{"kind": "Deployment", "name": name, "deleting": True,
                                                                      "finalizers": ["foregroundDeletion"]}]))
    yield Mutant("replicaset-orphaned", "the ReplicaSet stays, not being deleted", names=("not being deleted",),
                 observation=_with(obs, left=[{"kind": "ReplicaSet", "name": f"{name}-6c9f8d7b5", "deleting": False,
                                               "finalizers": []}]))
