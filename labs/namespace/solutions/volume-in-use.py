"""Reference solution: node-b is shut down for good, so mark it out of service (non-graceful node
shutdown); the pod garbage collector deletes the Pod that can never finish, the PVC protection
controller releases the claim, and the namespace empties itself."""

import time


def solve(env):
    c = env.lab.environment_module().client(env)
    node = c.get("v1", "nodes", "node-b")
    taints = list((node.get("spec") or {}).get("taints") or [])
    taints.append({"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"})
    c.patch("v1", "nodes", "node-b", {"spec": {"taints": taints}}, "merge")
    deadline = time.monotonic() + 180
    while c.request("GET", "/api/v1/namespaces/archive")[0] != 404 and time.monotonic() < deadline:
        time.sleep(0.5)
