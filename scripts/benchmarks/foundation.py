"""Foundation figures: how long labkit takes to start, to build and to clean up the demo lab."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from figures import Figure, time_command

REPO = Path(__file__).resolve().parent.parent.parent



def run() -> list[Figure]:
    env = {**os.environ, "LABKIT_LABS_PATH": str(REPO / "tests" / "labs")}
    labkit = [sys.executable, "-m", "labkit"]
    startup = min(time_command(labkit + ["--version"], env) for _ in range(5))
    up = time_command(labkit + ["run", "demo"], env)
    down = time_command(labkit + ["cleanup", "demo"], env)
    return [
        Figure("foundation", "labkit --version (best of 5)", round(startup * 1000, 1), "ms"),
        Figure("foundation", "labkit run demo", round(up, 3), "s"),
        Figure("foundation", "labkit cleanup demo", round(down, 3), "s"),
    ]
