"""Common wrong solutions to unblocking-dependent."""

from labkit.apiserver.target import for_env
from labkit.exercises import mistake, wait_for


def _delete_owner(env, cascade):
    for_env(env).kubectl("delete", "configmap", "archive", "-n", "shop", f"--cascade={cascade}", "--timeout=60s")


@mistake("its finalizer was removed")
def removes_the_finalizer(env):
    """Takes the finalizer off the Secret (the blog-post fix), then deletes the owner in the foreground."""
    for_env(env).kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=merge",
                         "-p", '{"metadata":{"finalizers":null}}')
    _delete_owner(env, "foreground")


@mistake("no longer names archive as its owner")
def removes_the_owner_reference(env):
    """Drops the Secret's owner reference instead of unblocking it, then deletes the owner in the foreground."""
    for_env(env).kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=json",
                         "-p", '[{"op":"remove","path":"/metadata/ownerReferences"}]')
    _delete_owner(env, "foreground")


@mistake("propagationPolicy Background")
def background_delete(env):
    """Deletes the owner with kubectl's default cascade: it goes at once, blockOwnerDeletion or not."""
    _delete_owner(env, "background")


@mistake("waiting", "still blocks")
def deletes_without_unblocking(env):
    """Deletes the owner in the foreground without changing the Secret: the owner waits, "Terminating"."""
    for_env(env).kubectl("delete", "configmap", "archive", "-n", "shop", "--cascade=foreground", "--wait=false")
    client = for_env(env).client()
    wait_for(lambda: (client.get_or_none("v1", "configmaps", "archive", "shop") or {}).get("metadata", {})
             .get("deletionTimestamp"), timeout=30)


@mistake("was changed", "uid")
def points_the_reference_elsewhere(env):
    """Replaces the owner reference's uid (a made-up one) instead of unblocking it: the GC finds the owner
    dangling, and the ConfigMap is deleted in the foreground."""
    for_env(env).kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=json", "-p",
                         '[{"op":"replace","path":"/metadata/ownerReferences/0/uid",'
                         '"value":"00000000-0000-0000-0000-00000000beef"}]')
    _delete_owner(env, "foreground")


@mistake("by hand", "ConfigMap archive")
def strips_the_owners_finalizer(env):
    """Deletes the owner in the foreground, takes foregroundDeletion off the waiting ConfigMap by hand, then
    unblocks the Secret: the owner went, but not because its dependent stopped blocking it."""
    target = for_env(env)
    target.kubectl("delete", "configmap", "archive", "-n", "shop", "--cascade=foreground", "--wait=false")
    target.kubectl("patch", "configmap", "archive", "-n", "shop", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    target.kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=json", "-p",
                   '[{"op":"replace","path":"/metadata/ownerReferences/0/blockOwnerDeletion","value":false}]')


@mistake("was changed on the way", "uid")
def points_the_reference_elsewhere_and_back(env):
    """Points the owner reference at a made-up uid, deletes the owner in the foreground (it has no
    dependent any more, and goes), then puts the uid back and sets blockOwnerDeletion false: the
    Secret ends as the task asks, but the owner did not go because its dependent stopped blocking."""
    target = for_env(env)
    client = target.client()
    uid = client.get("v1", "configmaps", "archive", "shop")["metadata"]["uid"]
    target.kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=json", "-p",
                   '[{"op":"replace","path":"/metadata/ownerReferences/0/uid",'
                   '"value":"00000000-0000-0000-0000-00000000beef"}]')
    _delete_owner(env, "foreground")
    target.kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=json", "-p",
                   '[{"op":"replace","path":"/metadata/ownerReferences/0/uid","value":"%s"},'
                   '{"op":"replace","path":"/metadata/ownerReferences/0/blockOwnerDeletion","value":false}]' % uid)


@mistake("took the finalizer example.com/keep off", "back now")
def removes_the_finalizer_and_puts_it_back(env):
    """Takes the finalizer off the Secret, thinks better of it and adds it back, then unblocks the owner
    reference and deletes the owner in the foreground: the Secret ends as the task asks, but its finalizer was
    removed on the way, which the task forbids."""
    target = for_env(env)
    target.kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=json",
                   "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    target.kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=json",
                   "-p", '[{"op":"add","path":"/metadata/finalizers","value":["example.com/keep"]}]')
    target.kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=json", "-p",
                   '[{"op":"replace","path":"/metadata/ownerReferences/0/blockOwnerDeletion","value":false}]')
    _delete_owner(env, "foreground")
