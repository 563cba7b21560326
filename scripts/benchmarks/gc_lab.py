"""The live GC lab: how long building it, checking all exercises on a fresh lab, drawing the
owner graph and cleaning up take.

Runs the real CLI in a throwaway labkit instance (own state directory and name prefix).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from figures import Figure, time_command

REPO = Path(__file__).resolve().parent.parent.parent



def run() -> list[Figure]:
    labkit = [sys.executable, "-m", "labkit"]
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "LABKIT_STATE_DIR": f"{scratch}/state", "LABKIT_ANSWERS_DIR": f"{scratch}/answers",
               "LABKIT_PREFIX": "bgc"}
        try:
            up = time_command(labkit + ["run", "gc"], env)
            check = time_command(labkit + ["check", "gc"], env, ok=(1,))      # a fresh lab: every check fails
            graph = time_command(labkit + ["gc", "graph", "-n", "shop"], env)
            svg = time_command(labkit + ["gc", "graph", "-n", "shop", "-o", "svg", "--output-file", f"{scratch}/g.svg"], env)
        finally:
            down = time_command(labkit + ["cleanup", "gc"], env)
    return [
        Figure("gc lab", "labkit run gc (API server, controllers, starting state settled)", round(up, 3), "s"),
        Figure("gc lab", "labkit check gc (7 exercises, fresh lab)", round(check, 3), "s"),
        Figure("gc lab", "labkit gc graph -n shop (text)", round(graph, 3), "s"),
        Figure("gc lab", "labkit gc graph -n shop -o svg", round(svg, 3), "s"),
        Figure("gc lab", "labkit cleanup gc", round(down, 3), "s"),
    ]
