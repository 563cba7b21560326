"""What a lab's build waits for of a cluster's own components before it makes objects that need
it: the server starts its controllers once it listens (server.EmbeddedServer.start_controllers),
and on a real cluster they work asynchronously anyway.

- `default_service_account(client, namespace)`: the ServiceAccount `default`, which the
  service-account controller makes in each namespace. Until it exists the ServiceAccount admission
  plugin refuses a Pod that names no account (403 `error looking up service account`, after
  looking again for a second or two); upstream's e2e framework waits for it the same way before
  it makes Pods in a new namespace (test/e2e/framework/util.go
  WaitForDefaultServiceAccountInNamespace).
"""

from __future__ import annotations

from labkit.errors import LabkitError
from labkit.exercises import wait_for

DEFAULT_SERVICE_ACCOUNT = "default"


def default_service_account(client, namespace: str, timeout: float = 30.0) -> None:
    """Until the ServiceAccount `default` of `namespace` exists; a LabkitError after `timeout`."""
    if not wait_for(lambda: client.get_or_none("v1", "serviceaccounts", DEFAULT_SERVICE_ACCOUNT, namespace) is not None,
                    timeout=timeout, interval=0.05):
        raise LabkitError(f"the service-account controller did not make the ServiceAccount "
                          f"{namespace}/{DEFAULT_SERVICE_ACCOUNT} within {timeout:.0f} s: no Pod can be made there "
                          "without it")
