"""The live requests lab: how long building it, checking all exercises on a fresh lab, explaining a
kubectl request and cleaning up take (target for `labkit run requests`: under 3 s).

Runs the real CLI in a throwaway labkit instance (own state directory and name prefix).
"""

from __future__ import annotations

import os
import sys
import tempfile

from figures import Figure, time_command


def run() -> list[Figure]:
    labkit = [sys.executable, "-m", "labkit"]
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "LABKIT_STATE_DIR": f"{scratch}/state", "LABKIT_ANSWERS_DIR": f"{scratch}/answers",
               "LABKIT_PREFIX": "brq"}
        env["KUBECONFIG"] = f"{scratch}/state/requests/apiserver/kubeconfig"
        try:
            up = time_command(labkit + ["run", "requests"], env)
            check = time_command(labkit + ["check", "requests"], env, ok=(1,))      # a fresh lab: every check fails
            explain = time_command(labkit + ["requests", "explain", "--", "kubectl", "get", "pods", "-n", "shop"], env)
        finally:
            down = time_command(labkit + ["cleanup", "requests"], env)
    return [
        Figure("requests lab", "labkit run requests (API server, namespaces, webhook backend, audit trail)",
               round(up, 3), "s", "< 3 s", up < 3.0),
        Figure("requests lab", "labkit check requests (6 exercises, fresh lab)", round(check, 3), "s"),
        Figure("requests lab", "labkit requests explain -- kubectl get pods -n shop", round(explain, 3), "s"),
        Figure("requests lab", "labkit cleanup requests", round(down, 3), "s"),
    ]
