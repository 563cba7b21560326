"""The live NUMA lab: how long building it, pinning a Pod for real and cleaning up take.

Runs the real CLI in a throwaway labkit instance (own state directory and name prefix).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from figures import Figure, time_command

REPO = Path(__file__).resolve().parent.parent.parent
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: bench}
spec:
  containers:
    - name: app
      command: [sleep, infinity]
      resources:
        limits: {cpu: "1", memory: 64Mi}
"""



def run() -> list[Figure]:
    labkit = [sys.executable, "-m", "labkit"]
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "LABKIT_STATE_DIR": f"{scratch}/state", "LABKIT_ANSWERS_DIR": f"{scratch}/answers",
               "LABKIT_PREFIX": "bnuma"}
        pod = Path(scratch) / "pod.yaml"
        pod.write_text(POD)
        try:
            up = time_command(labkit + ["run", "numa"], env)
            pin = time_command(labkit + ["numa", "run", "-f", str(pod)], env)
            show = time_command(labkit + ["numa", "show", "-o", "json"], env)
            delete = time_command(labkit + ["numa", "delete", "bench"], env)
        finally:
            down = time_command(labkit + ["cleanup", "numa"], env)
    return [
        Figure("numa lab", "labkit run numa (discover, node, node-b, node agent)", round(up, 3), "s"),
        Figure("numa lab", "labkit numa run: admit + start + reconcile, 1 Guaranteed Pod", round(pin, 3), "s"),
        Figure("numa lab", "labkit numa show -o json (kubelet state + /proc)", round(show, 3), "s"),
        Figure("numa lab", "labkit numa delete", round(delete, 3), "s"),
        Figure("numa lab", "labkit cleanup numa", round(down, 3), "s"),
    ]
