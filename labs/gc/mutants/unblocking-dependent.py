"""Near-misses of unblocking-dependent, on the observation of the solved lab: the Secret's
finalizers, owner reference and data edited one step at a time (tree_edits: each field dropped or
changed; blockOwnerDeletion dropped is equivalent: unset does not block), another owner reference
or finalizer added, the Secret gone, the owner still there or still waiting, deleted with another
policy or not by the student. Two are also made live: blockOwnerDeletion set back to true, and
the finalizer removed."""

import copy
import json

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant, tree_edits


def _patch_secret(ops):
    def apply(env):
        for_env(env).kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=json", "-p", json.dumps(ops))
    return apply


def _with(obs, **changes):
    out = copy.deepcopy(obs)
    out.update(changes)
    return out


def _names(edit, owner):
    path = edit.path
    if path.startswith("finalizers"):
        return ("finalizer was removed",)
    if path.startswith("data"):
        return ("data",)
    if path == "ownerReferences" or edit.op == "drop-item" and path.startswith("ownerReferences["):
        return (f"no longer names {owner}",)
    if path.endswith("blockOwnerDeletion"):
        return ("still blocks",)
    return ("was changed", edit.key)


def mutants(ctx):
    p = ctx.params
    owner, fin = p["owner"], p["finalizer"]
    obs = ctx.lab._load("checks.py").observe_unblocking_dependent(ctx)
    dep = obs["dependent"]
    live = {"ownerReferences[0].blockOwnerDeletion": _patch_secret(
                [{"op": "replace", "path": "/metadata/ownerReferences/0/blockOwnerDeletion", "value": True}]),
            "finalizers[0]": _patch_secret([{"op": "remove", "path": "/metadata/finalizers/0"}])}
    alternatives = {"ownerReferences[0].blockOwnerDeletion": [True], "ownerReferences[0].kind": ["Secret", "ConfigMa"],
                    "ownerReferences[0].apiVersion": ["apps/v1", ""], "ownerReferences[0].name": ["settings", owner[:-1]],
                    "finalizers[0]": [fin[:-1], "example.com/upload"]}
    for edit in tree_edits(dep, alternatives=alternatives):
        dropped_block = edit.op == "drop" and edit.path.endswith("blockOwnerDeletion")
        yield Mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"{p['dependent']}: {edit.describe()}", names=() if dropped_block else _names(edit, owner),
                     observation=_with(obs, dependent=edit.value),
                     apply=live.get(edit.path) if (edit.op == "set" and edit.path.endswith("blockOwnerDeletion"))
                     or edit.op == "drop-item" and edit.path == "finalizers[0]" else None,
                     equivalent="an owner reference without blockOwnerDeletion does not block its owner "
                                "(processDeletingDependentsItem counts only blockOwnerDeletion: true)"
                     if dropped_block else None)
    ref = dep["ownerReferences"][0]
    yield Mutant("another-owner", "another owner reference added", names=("did not have",),
                 observation=_with(obs, dependent={**dep, "ownerReferences": [ref, {**ref, "name": "settings",
                                                                                    "uid": "00000000-0000-0000-0000-0000000000aa"}]}))
    yield Mutant("controller-set", "the reference made the controller", names=("was changed", "controller"),
                 observation=_with(obs, dependent={**dep, "ownerReferences": [{**ref, "controller": True}]}))
    yield Mutant("controller-false", "the reference says controller: false", observation=_with(
        obs, dependent={**dep, "ownerReferences": [{**ref, "controller": False}]}),
        equivalent="controller: false and unset are the same: only controller: true makes an owner the controller "
                   "(metav1.GetControllerOf)")
    yield Mutant("another-finalizer", "a finalizer added", names=("finalizers",),
                 observation=_with(obs, dependent={**dep, "finalizers": [*dep["finalizers"], "example.com/more"]}))
    yield Mutant("secret-gone", "the Secret is gone", names=("finalizer was removed",), observation=_with(obs, dependent=None))
    yield Mutant("owner-present", "the ConfigMap is still there", names=("still there",),
                 observation=_with(obs, owner={"uid": "x", "deleting": False}))
    yield Mutant("owner-waiting", "the ConfigMap still waits for the Secret", names=("waiting",),
                 observation=_with(obs, owner={"uid": "x", "deleting": True}))
    for policy in ("Background", "Orphan", "default"):
        yield Mutant(f"policy={policy}", f"the ConfigMap deleted with propagationPolicy {policy}",
                     names=(f"propagationPolicy {policy}",), observation=_with(obs, delete=policy))
    deleted = {"verb": "delete", "policy": "Foreground"}
    yield Mutant("owner-patched", "the ConfigMap's finalizer taken off by hand (patch)", names=("by hand", "patch"),
                 observation=_with(obs, owner_writes=[deleted, {"verb": "patch"}]))
    for policy in ("Background", "Orphan"):
        yield Mutant(f"owner-deleted-again={policy}", f"the waiting ConfigMap deleted again with {policy}",
                     names=("by hand", "second DELETE", policy),
                     observation=_with(obs, owner_writes=[deleted, {**deleted, "policy": policy}]))
    yield Mutant("owner-deleted-again=Foreground", "the waiting ConfigMap deleted again in the foreground",
                 observation=_with(obs, owner_writes=[deleted, deleted]),
                 equivalent="a second Foreground DELETE keeps foregroundDeletion (store.go, "
                            "deletionFinalizersForGarbageCollection)")
    yield Mutant("no-delete", "nobody deleted the ConfigMap as the student", names=("no DELETE",),
                 observation=_with(obs, delete=None))
    # the reference pointed elsewhere on the way and back again (the final Secret as solved): each
    # identity field rewritten by a JSON patch, a merge patch or an update, and one write that
    # repeats the reference as it is (equivalent: nothing of its owner changed)
    writes = obs.get("dependent_writes") or []
    for key, value in (("uid", "00000000-0000-0000-0000-00000000beef"), ("name", "settings"), ("kind", "Secret"),
                       ("apiVersion", "apps/v1")):
        yield Mutant(f"rewritten-on-the-way:json:{key}", f"the reference's {key} replaced and put back (JSON patch)",
                     names=("was changed on the way", key),
                     observation=_with(obs, dependent_writes=[*writes, {"verb": "patch", "body": [
                         {"op": "replace", "path": f"/metadata/ownerReferences/0/{key}", "value": value}]}]))
        yield Mutant(f"rewritten-on-the-way:merge:{key}", f"the reference's {key} replaced and put back (merge patch)",
                     names=("was changed on the way", key),
                     observation=_with(obs, dependent_writes=[*writes, {"verb": "update", "body": {
                         "metadata": {"ownerReferences": [{**ref, key: value}]}}}]))
    yield Mutant("reference-removed-on-the-way", "the reference removed and added again",
                 names=("was changed on the way", "removed"),
                 observation=_with(obs, dependent_writes=[*writes, {"verb": "patch", "body": [
                     {"op": "remove", "path": "/metadata/ownerReferences"}]}]))
    yield Mutant("reference-rewritten-as-it-is", "a write that sends the reference as it is",
                 observation=_with(obs, dependent_writes=[*writes, {"verb": "update", "body": {
                     "metadata": {"ownerReferences": [dict(ref)]}}}]),
                 equivalent="the write names the same owner (apiVersion, kind, name, uid, controller)")
