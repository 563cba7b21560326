"""Mount-propagation figures: bringing the lab up (target under 1 s), checking it, tearing it down,
and playing the e2e scenario on a fresh node. Each is the real CLI in a subprocess."""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from figures import Figure, time_command

REPO = Path(__file__).resolve().parent.parent.parent
ROUNDS = 5



def run() -> list[Figure]:
    env = dict(os.environ)
    labkit = [sys.executable, "-m", "labkit"]
    up, check, down = [], [], []
    for _ in range(ROUNDS):
        up.append(time_command(labkit + ["run", "mount-propagation"], env))
        time_command(labkit + ["solve", "mount-propagation", "predict-e2e-matrix"], env)   # so its check replays e2e
        check.append(time_command(labkit + ["check", "mount-propagation"], env, ok=(0, 1)))
        down.append(time_command(labkit + ["cleanup", "mount-propagation"], env))
    play = [time_command(labkit + ["mounts", "play", "-f", str(REPO / "labs/mount-propagation/scenarios/e2e.yaml")], env)
            for _ in range(ROUNDS)]
    startup = min(time_command(labkit + ["--version"], env) for _ in range(ROUNDS))
    median = statistics.median(up)
    return [
        Figure("mounts", f"labkit run mount-propagation (median of {ROUNDS})", round(median, 3), "s",
               target="< 1 s", met=median < 1.0, note=f"max {max(up):.3f} s; node + 7 containers"),
        Figure("mounts", "  of which: labkit CLI start-up (--version, best)", round(startup, 3), "s"),
        Figure("mounts", f"labkit check mount-propagation (median of {ROUNDS})", round(statistics.median(check), 3), "s",
               note="6 checks; probes, and a replay of the e2e scenario"),
        Figure("mounts", f"labkit cleanup mount-propagation (median of {ROUNDS})", round(statistics.median(down), 3), "s"),
        Figure("mounts", f"labkit mounts play e2e.yaml (median of {ROUNDS})", round(statistics.median(play), 3), "s"),
    ]
