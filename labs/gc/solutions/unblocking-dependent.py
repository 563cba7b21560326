"""Set blockOwnerDeletion to false on the Secret's owner reference (the reference and the
finalizer stay), then delete the ConfigMap in the foreground: no dependent blocks it, so the GC
removes its foregroundDeletion finalizer at once, while the Secret waits for its own finalizer."""

from labkit.apiserver.target import for_env


def solve(env):
    target = for_env(env)
    target.kubectl("patch", "secret", "archive-key", "-n", "shop", "--type=json", "-p",
                   '[{"op":"replace","path":"/metadata/ownerReferences/0/blockOwnerDeletion","value":false}]')
    target.kubectl("delete", "configmap", "archive", "-n", "shop", "--cascade=foreground", "--timeout=60s")
