"""What one `labkit check LAB EXERCISE` costs as a whole process while the lab runs, and how much of
it is imports: a check that only talks HTTPS to the lab's API server reads where it listens through
labkit.apiserver.process and must not import the server itself (labkit.apiserver.server, ~150 ms of
imports); the mount-propagation lab's health check (is_up, asked before every check) reads the
node's recorded pid and start time instead of every process's environment.

Runs the real CLI in a throwaway labkit instance per lab (own state directory and name prefix).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile

from figures import REPO, Figure, time_command

ROUNDS = 5
CHECKS = (("gc", "owner-chain"), ("namespace", "terminating-create"), ("requests", "forbidden"),
          ("mount-propagation", "leaked-mount"))
SERVER_MODULE = "labkit.apiserver.server"
IS_UP = """
import os, time
from labkit.labs import get_lab
from labkit.state import LabEnv, LabState
lab = get_lab("mount-propagation")
env = LabEnv(lab, LabState(lab.id))
is_up = lab.environment_module().is_up
assert is_up(env)
start = time.perf_counter()
for _ in range(200):
    is_up(env)
print((time.perf_counter() - start) / 200, len([p for p in os.listdir("/proc") if p.isdigit()]))
"""


def _imports(argv: list[str], env: dict) -> tuple[float, float]:
    """(seconds of all imports, seconds of importing the API server, 0 if it is not) of one run."""
    result = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env, capture_output=True, text=True,
                            cwd=REPO)
    total = server = 0.0
    for line in result.stderr.splitlines():
        found = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$", line)
        if not found:
            continue
        if found.group(3) == " ":      # a top-level import: its cumulative time counts its own
            total += int(found.group(2)) / 1e6
        if found.group(4) == SERVER_MODULE:
            server = int(found.group(2)) / 1e6
    return total, server


def run() -> list[Figure]:
    labkit = [sys.executable, "-m", "labkit"]
    figures = []
    for lab, exercise in CHECKS:
        with tempfile.TemporaryDirectory() as scratch:
            env = {**os.environ, "LABKIT_STATE_DIR": f"{scratch}/state", "LABKIT_ANSWERS_DIR": f"{scratch}/answers",
                   "LABKIT_PREFIX": "bcs"}
            try:
                time_command(labkit + ["run", lab], env)
                check = labkit + ["check", lab, exercise]
                seconds = [time_command(check, env, ok=(0, 1)) for _ in range(ROUNDS)]
                imports, server = _imports(["-m", "labkit", "check", lab, exercise], env)
                if lab == "mount-propagation":
                    out = subprocess.run([sys.executable, "-c", IS_UP], env=env, capture_output=True, text=True,
                                         cwd=REPO, check=True).stdout.split()
            finally:
                time_command(labkit + ["cleanup", lab], env, ok=(0, 2))
        median = statistics.median(seconds)
        figures += [
            Figure("check start-up", f"labkit check {lab} {exercise} (median of {ROUNDS}, lab running)",
                   round(median, 3), "s", note=f"max {max(seconds):.3f} s; imports {imports * 1000:.0f} ms"),
            Figure("check start-up", f"  of which: importing {SERVER_MODULE}", round(server * 1000, 1), "ms",
                   target="0 (not imported)", met=server == 0),
        ]
        if lab == "mount-propagation":
            figures.append(Figure("check start-up", "  mount-propagation is_up (in-process, mean of 200)",
                                  round(float(out[0]) * 1e6, 1), "µs", note=f"{out[1]} processes on the machine"))
    return figures
