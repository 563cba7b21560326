"""Foundation figures: how long labkit takes to start, to build and to clean up the demo lab."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from figures import Figure

REPO = Path(__file__).resolve().parent.parent.parent


def _time(argv, env) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - start


def run() -> list[Figure]:
    env = {**os.environ, "LABKIT_LABS_PATH": str(REPO / "tests" / "labs")}
    labkit = [sys.executable, "-m", "labkit"]
    startup = min(_time(labkit + ["--version"], env) for _ in range(5))
    up = _time(labkit + ["run", "demo"], env)
    down = _time(labkit + ["cleanup", "demo"], env)
    return [
        Figure("foundation", "labkit --version (best of 5)", round(startup * 1000, 1), "ms"),
        Figure("foundation", "labkit run demo", round(up, 3), "s"),
        Figure("foundation", "labkit cleanup demo", round(down, 3), "s"),
    ]
