"""Foundation figures: how long labkit takes to start (the version, help, a TAB of shell
completion), to build and to clean up the demo lab.

Start-up is given as the best wall time of five runs and as the median processor time (user +
system, of the process and its children): on a shared machine the second moves less."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from figures import Figure, time_command

REPO = Path(__file__).resolve().parent.parent.parent



def _start(argv: list[str], env: dict, runs: int = 5) -> tuple[float, float]:
    """(best wall seconds, median processor seconds) over `runs` runs after one not counted."""
    walls, cpus = [], []
    for i in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, cwd=REPO, check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if i:
            walls.append(wall)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), statistics.median(cpus)


def run() -> list[Figure]:
    env = {**os.environ, "LABKIT_LABS_PATH": str(REPO / "tests" / "labs")}
    labkit = [sys.executable, "-m", "labkit"]
    startup = min(time_command(labkit + ["--version"], env) for _ in range(5))
    help_wall, help_cpu = _start(labkit + ["--help"], env)
    # bash asking for the exercises of a lab after `labkit check demo ` and a TAB
    tab = {**env, "_LABKIT_COMPLETE": "complete_bash", "COMP_WORDS": "labkit check demo ", "COMP_CWORD": "3"}
    tab_wall, tab_cpu = _start(labkit, tab)
    starts = [
        Figure("foundation", "labkit --help (best of 5)", round(help_wall * 1000, 1), "ms", "< 150 ms", help_wall < 0.15),
        Figure("foundation", "labkit --help, processor time (median of 5)", round(help_cpu * 1000, 1), "ms"),
        Figure("foundation", "completion of an exercise id (best of 5)", round(tab_wall * 1000, 1), "ms", "< 150 ms",
               tab_wall < 0.15),
        Figure("foundation", "completion, processor time (median of 5)", round(tab_cpu * 1000, 1), "ms"),
    ]
    up = time_command(labkit + ["run", "demo"], env)
    down = time_command(labkit + ["cleanup", "demo"], env)
    return starts + [
        Figure("foundation", "labkit --version (best of 5)", round(startup * 1000, 1), "ms"),
        Figure("foundation", "labkit run demo", round(up, 3), "s"),
        Figure("foundation", "labkit cleanup demo", round(down, 3), "s"),
    ]
