"""Near-misses of background-delete: the order answer edited (a kind dropped, changed, two swapped),
and the observation of the solved lab changed one thing at a time — the Deployment still there
(also made live: created again), no DELETE of it by the student, another propagationPolicy,
a dependent left behind (orphaned, or still on its way out), the Pods or the ReplicaSet deleted
by the student, the Deployment scaled first, a dependent deleted by someone other than the
garbage collector (the ReplicaSet controller after a scale-down)."""

import copy

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant, answer_mutants


def _checks(ctx):
    return ctx.lab._load("checks.py")


def _recreate(env):
    lab = env.lab.environment_module()
    for_env(env).client().create("apps/v1", "deployments", lab.deployment("cart", 2), "shop")


def _with(obs, **changes):
    out = copy.deepcopy(obs)
    out.update(changes)
    return out


def mutants(ctx):
    answer = ctx.answer()
    yield from answer_mutants(answer, names=lambda e: ("order",))
    yield Mutant("answer-lower-case", "answer: the kinds in lower case", answer={"order": [k.lower() for k in answer["order"]]},
                 equivalent="kinds are names of the same three kinds whatever their case; the check compares them so")
    obs = _checks(ctx).observe_background_delete(ctx)
    name = ctx.params["deployment"]
    yield Mutant("deployment-present", "the Deployment is still there", names=("still there",),
                 observation=_with(obs, deployment="present", left=[]), apply=_recreate)
    yield Mutant("no-delete", "nobody deleted the Deployment through the API as the student",
                 names=("no DELETE",), observation=_with(obs, delete=None))
    for policy in ("Foreground", "Orphan"):
        yield Mutant(f"policy={policy}", f"the Deployment deleted with propagationPolicy {policy}",
                     names=(f"propagationPolicy {policy}",), observation=_with(obs, delete=policy))
    rs = {"kind": "ReplicaSet", "name": f"{name}-5d8f7c9b6", "deleting": False, "finalizers": []}
    yield Mutant("replicaset-orphaned", "the ReplicaSet stays, not being deleted", names=("not being deleted",),
                 observation=_with(obs, left=[rs]))
    pod = {"kind": "Pod", "name": f"{name}-5d8f7c9b6-x2x2x", "deleting": True, "finalizers": []}
    yield Mutant("pod-on-its-way", "a Pod is still in its grace period", names=("still going on",),
                 observation=_with(obs, left=[pod]))
    own = [{"verb": "delete", "kind": "Pod", "name": f"{name}-5d8f7c9b6-{s}", "finalizers": False} for s in ("a1b2c", "d3e4f")]
    patch = {"verb": "patch", "kind": "Deployment", "name": name, "finalizers": False}
    yield Mutant("scaled-first", "the student scaled the Deployment before deleting it", names=("yourself", "changed"),
                 observation=_with(obs, writes=[patch, *obs["writes"]]))
    yield Mutant("own-pod-deletes", "the student deleted the Pods themselves first", names=("yourself", "deleted"),
                 observation=_with(obs, writes=own))
    own_rs = {"verb": "delete", "kind": "ReplicaSet", "name": f"{name}-5d8f7c9b6", "finalizers": False,
              "policy": "Background"}
    yield Mutant("own-replicaset-delete", "the student deleted the ReplicaSet themselves first",
                 names=("yourself", "ReplicaSet"), observation=_with(obs, writes=[own_rs, *obs["writes"]]))
    by_rs = [{**d, "user": "system:serviceaccount:kube-system:replicaset-controller"} if d["kind"] == "Pod" else d
             for d in obs["deleted_by"]]
    yield Mutant("pods-deleted-by-replicaset-controller", "the Pods deleted by the ReplicaSet controller (scaled down), "
                 "not by the garbage collector", names=("the ReplicaSet controller", "not by the garbage collector"),
                 observation=_with(obs, deleted_by=by_rs))
    by_student = [{**obs["deleted_by"][0], "user": "kubernetes-admin"}, *obs["deleted_by"][1:]]
    yield Mutant("dependent-deleted-by-a-person", "a dependent deleted by a person's request the check did not see as "
                 "the student's", names=("kubernetes-admin", "not by the garbage collector"),
                 observation=_with(obs, deleted_by=by_student))
