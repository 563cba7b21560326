"""The live device-plugins lab: how long `labkit run device-plugins` takes, and every exercise's
check as a whole process with the reference solution in place (target for each: under 2 s; issue
27). Each check is timed RUNS times; the figure is the median, the note the range and the load.

The plugin exercises' checks start the plugin (Python and grpc) against a fresh node and stop
watching as soon as what they judge is complete, except where lab.yaml states a window that runs in
real time: register watches the plugin 1 s from its registration on; restart restarts kubelet 0.15-0.3
s after the registration and again after the re-registration by as long as that came after the
first plus 0.25-0.4 s, then watches 0.2 s more (labs/device-plugins/lab.yaml, README.md).

Runs the real CLI in a throwaway labkit instance (own state directory and name prefix).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile

from figures import Figure, time_command

RUNS = 3
TARGET_S = 2.0
EXERCISES = ("register", "health", "allocate", "preferred", "restart", "share", "checkpoint")
WINDOW = {"register": "1 s of it the window from the registration on",
          "restart": "about 1 s of it kubelet's two restarts, their quiet times and the 0.2 s after",
          "checkpoint": "a prediction: no plugin runs"}


def _load() -> str:
    try:
        return "load " + " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "load unknown"


def run() -> list[Figure]:
    labkit = [sys.executable, "-m", "labkit"]
    figures = []
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "LABKIT_STATE_DIR": f"{scratch}/state", "LABKIT_ANSWERS_DIR": f"{scratch}/answers",
               "LABKIT_PREFIX": "bdp"}
        try:
            up = time_command(labkit + ["run", "device-plugins"], env)
            figures.append(Figure("device-plugins lab", "labkit run device-plugins (API server, scheduler, Node, "
                                  "device nodes)", round(up, 3), "s", f"< {TARGET_S:g} s", up < TARGET_S))
            for exercise in EXERCISES:
                time_command(labkit + ["solve", "device-plugins", exercise], env)
                before = _load()
                times = [time_command(labkit + ["check", "device-plugins", exercise], env) for _ in range(RUNS)]
                median = statistics.median(times)
                note = f"{min(times):.2f}-{max(times):.2f} s; {before}, after: {_load()}"
                if exercise in WINDOW:
                    note += f"; {WINDOW[exercise]}"
                figures.append(Figure("device-plugins lab", f"labkit check device-plugins {exercise} (reference "
                                      f"solution, median of {RUNS})", round(median, 3), "s", f"< {TARGET_S:g} s",
                                      median < TARGET_S, note=note))
        finally:
            time_command(labkit + ["cleanup", "device-plugins"], env, ok=(0, 2))
    return figures
