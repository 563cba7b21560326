"""Common wrong fixes of release-finalizer."""

from labkit.exercises import mistake


def _kubectl(env, *args):
    return env.lab.environment_module().target(env).kubectl(*args)


@mistake("force-finalized")
def force_finalizes(env):
    """Clears the namespace's spec.finalizers through /finalize, as blog posts recommend."""
    env.lab.environment_module().finalize(env, "reports", [])


@mistake("still exists", "a normal update keeps spec.finalizers")
def patches_the_namespace(env):
    """Patches spec.finalizers of the namespace away with kubectl patch (silently ignored)."""
    _kubectl(env, "patch", "ns", "reports", "--type=merge", "-p", '{"spec":{"finalizers":[]}}')


@mistake("still exists", "still carry finalizers")
def deletes_the_backup(env):
    """Deletes the Backup: it only gets a deletionTimestamp, its finalizer still holds it."""
    _kubectl(env, "delete", "backup", "nightly", "-n", "reports", "--wait=false")
