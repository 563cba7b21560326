"""Common wrong fixes of release-finalizer."""

import time

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


@mistake("CustomResourceDefinition backups.example.com", "is being deleted")
def deletes_the_crd(env):
    """Deletes the CRD backups.example.com (on a real cluster every Backup in every namespace is
    gone with it), then removes the Backup's finalizer, so that reports empties and goes."""
    _kubectl(env, "delete", "crd", "backups.example.com", "--wait=false")
    _kubectl(env, "-n", "reports", "patch", "backup", "nightly", "--type=json",
             "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    c = env.lab.environment_module().client(env)
    deadline = time.monotonic() + 60
    while c.get_or_none("v1", "namespaces", "reports") is not None and time.monotonic() < deadline:
        time.sleep(0.3)


@mistake("backups.example.com/weekly in legacy", "other namespaces' objects alone")
def releases_every_backup(env):
    """Removes the finalizer from every Backup of the cluster (`kubectl get backups -A` and a patch
    for each), not only from the one that holds reports."""
    for ns, name in (("reports", "nightly"), ("legacy", "weekly")):
        _kubectl(env, "-n", ns, "patch", "backup", name, "--type=json",
                 "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    c = env.lab.environment_module().client(env)
    deadline = time.monotonic() + 60
    while c.get_or_none("v1", "namespaces", "reports") is not None and time.monotonic() < deadline:
        time.sleep(0.3)


@mistake("CustomResourceDefinition itself", "patch backups.example.com")
def unserves_the_crd(env):
    """Makes the CRD's only version unserved: the namespace controller's discovery no longer lists
    Backups, so reports goes with its Backup still stored; then serves it again, creates reports
    anew to release the Backup (no write reaches an object of a namespace that does not exist) and
    deletes it again, so that nothing is stored under reports and the CRD looks as built."""
    c = env.lab.environment_module().client(env)

    def served(flag):
        _kubectl(env, "patch", "crd", "backups.example.com", "--type=json",
                 "-p", f'[{{"op":"replace","path":"/spec/versions/0/served","value":{str(flag).lower()}}}]')

    def wait_gone():
        deadline = time.monotonic() + 60
        while c.get_or_none("v1", "namespaces", "reports") is not None and time.monotonic() < deadline:
            time.sleep(0.3)
    served(False)
    wait_gone()
    served(True)
    _kubectl(env, "create", "namespace", "reports")
    _kubectl(env, "-n", "reports", "patch", "backup", "nightly", "--type=json",
             "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    _kubectl(env, "delete", "namespace", "reports", "--wait=false")
    wait_gone()
