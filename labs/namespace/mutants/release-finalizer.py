"""Near-misses of releasing the Backup that holds reports, as what the check observes of the
solved lab: the namespace still there (held, or not finished yet, or never deleted), force-
finalized, something still stored under its name; the CRD deleted or Terminating; the other
namespaces' Backups released (a finalizer dropped, renamed or added), being deleted or gone
(every Backup of the cluster released, or the CRD deleted with them); the CRD patched or updated
(a version unserved hides the Backups); the namespace created again by hand. A patch of the namespace
itself on the side is equivalent: it keeps spec.finalizers."""

from labkit.namespaces.mutants import gone_edits, gone_equivalent, gone_names, observation_mutants


def _kubectl(env, *args):
    env.lab.environment_module().target(env).kubectl(*args)


def _delete_crd(env):
    _kubectl(env, "delete", "crd", "backups.example.com", "--wait=false")


def _release_weekly(env):
    _kubectl(env, "-n", "legacy", "patch", "backup", "weekly", "--type=json",
             "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')


def mutants(ctx):
    checks = ctx.env.lab._load("checks.py")
    seen = checks.observe_release_finalizer(ctx)

    def names(edit):
        path = edit.path
        if path.startswith("crd_writes"):
            return ("CustomResourceDefinition itself",)
        if path == "recreated":
            return ("created a namespace", "again")
        if path.startswith("crds"):
            return ("CustomResourceDefinition", "is being deleted" if edit.after == "deleting" else "is gone")
        key = next((k for k in seen["elsewhere"] if path.startswith(f"elsewhere.{k}") or
                    path.startswith(f"elsewhere/{k}")), None)
        if key is not None:
            return (key, "other namespaces' objects alone")
        return gone_names(edit, "gone/") or gone_names(edit, "gone.")

    lab = ctx.env.lab.environment_module()

    def equivalent(edit):
        key = next((k for k in seen["elsewhere"] if edit.path == f"elsewhere/{k}/state"), None)
        if key is not None and edit.after == "deleting" and key.rsplit(" in ", 1)[1] in lab.DELETED_AT_SETUP:
            return ("its namespace is Terminating as the lab built it: the namespace controller has asked to delete "
                    "everything in it already, and the object's finalizer keeps it, as built")
        return gone_equivalent(edit, "gone.")

    crds = {("crds", name): ["deleting", None] for name in seen["crds"]}
    states = {("elsewhere", key, "state"): ["deleting", None] for key in seen["elsewhere"]}
    replace, add = gone_edits(("gone",), "backups.example.com/nightly")
    add.update({("elsewhere", key, "finalizers"): ["example.com/other"] for key in seen["elsewhere"]})
    add[("crd_writes",)] = ["patch backups.example.com", "update backups.example.com"]
    weekly = next(k for k in seen["elsewhere"] if "weekly" in k)
    yield from observation_mutants(
        seen, names=names, equivalent=equivalent,
        alternatives={"gone.spec_edit": ["patched"]},
        skip=lambda p: p.startswith("crds") or p.endswith(".state"),
        replace={**crds, **states, **replace}, add=add,
        apply={"replace:crds/backups.example.com=deleting": _delete_crd,
               f"drop-item:elsewhere.{weekly}.finalizers[0]": _release_weekly})
