"""The live GC lab: how long building it, checking all exercises on a fresh lab, drawing the
owner graph and cleaning up take.

Runs the real CLI in a throwaway labkit instance (own state directory and name prefix).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import Figure

REPO = Path(__file__).resolve().parent.parent.parent


def _time(argv, env, ok=(0,)) -> float:
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, cwd=REPO)
    if result.returncode not in ok:
        raise RuntimeError(f"{' '.join(argv)}: exit {result.returncode}: {result.stderr.decode()[-500:]}")
    return time.perf_counter() - start


def run() -> list[Figure]:
    labkit = [sys.executable, "-m", "labkit"]
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "LABKIT_STATE_DIR": f"{scratch}/state", "LABKIT_ANSWERS_DIR": f"{scratch}/answers",
               "LABKIT_PREFIX": "bgc"}
        try:
            up = _time(labkit + ["run", "gc"], env)
            check = _time(labkit + ["check", "gc"], env, ok=(1,))      # a fresh lab: every check fails
            graph = _time(labkit + ["gc", "graph", "-n", "shop"], env)
            svg = _time(labkit + ["gc", "graph", "-n", "shop", "--format", "svg", "-o", f"{scratch}/g.svg"], env)
        finally:
            down = _time(labkit + ["cleanup", "gc"], env)
    return [
        Figure("gc lab", "labkit run gc (API server, controllers, starting state settled)", round(up, 3), "s"),
        Figure("gc lab", "labkit check gc (7 exercises, fresh lab)", round(check, 3), "s"),
        Figure("gc lab", "labkit gc graph -n shop (text)", round(graph, 3), "s"),
        Figure("gc lab", "labkit gc graph -n shop --format svg", round(svg, 3), "s"),
        Figure("gc lab", "labkit cleanup gc", round(down, 3), "s"),
    ]
