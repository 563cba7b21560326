"""Common wrong solutions to unblocking-dependent."""

from labkit.apiserver.target import for_env
from labkit.exercises import mistake


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
