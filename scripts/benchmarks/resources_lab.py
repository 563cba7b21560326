"""The resources lab: building it (target under 1 s), checking it (target under 2 s), an eviction
pass on live memory, and cleaning up. Each is the real CLI in a subprocess, in a throwaway
labkit instance; the checks run once on a fresh lab and once after every reference solution
(their settle waits only matter then)."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile

from figures import Figure, time_command

ROUNDS = 5
EXERCISES = ("qos", "throttled", "oom", "noisy-neighbour", "eviction-order", "weight")


def run() -> list[Figure]:
    labkit = [sys.executable, "-m", "labkit"]
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "LABKIT_STATE_DIR": f"{scratch}/state", "LABKIT_ANSWERS_DIR": f"{scratch}/answers",
               "LABKIT_PREFIX": "bres"}
        up, fresh, down = [], [], []
        try:
            for _ in range(ROUNDS):
                up.append(time_command(labkit + ["run", "resources"], env))
                fresh.append(time_command(labkit + ["check", "resources"], env, ok=(1,)))
                down.append(time_command(labkit + ["cleanup", "resources"], env))
            time_command(labkit + ["run", "resources"], env)
            for exercise in EXERCISES:
                time_command(labkit + ["solve", "resources", exercise], env)
            solved = [time_command(labkit + ["check", "resources"], env) for _ in range(ROUNDS)]
            startup = min(time_command(labkit + ["--version"], env) for _ in range(ROUNDS))
        finally:
            time_command(labkit + ["cleanup", "resources"], env, ok=(0, 1, 2))
    median_up, median_solved = statistics.median(up), statistics.median(solved)
    return [
        Figure("resources", f"labkit run resources (median of {ROUNDS})", round(median_up, 3), "s", target="< 1 s",
               met=median_up < 1.0, note=f"max {max(up):.3f} s; 3 nodes, 12 Pods, 15 containers"),
        Figure("resources", "  of which: labkit CLI start-up (--version, best)", round(startup, 3), "s"),
        Figure("resources", f"labkit check resources, fresh lab (median of {ROUNDS})", round(statistics.median(fresh), 3),
               "s", target="< 2 s", met=statistics.median(fresh) < 2.0),
        Figure("resources", f"labkit check resources, all solved (median of {ROUNDS})", round(median_solved, 3), "s",
               target="< 2 s", met=median_solved < 2.0, note="6 checks on live cgroups, with their settle waits"),
        Figure("resources", f"labkit cleanup resources (median of {ROUNDS})", round(statistics.median(down), 3), "s"),
    ]
