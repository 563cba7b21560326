"""Scheduler figures: Pods bound per second by the reconstructed kube-scheduler with the default
profile, each size measured as a whole process (`labkit scheduler simulate`, start-up included),
and how it grows with nodes and Pods.

Run as `scripts/bench scheduler`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

from figures import Figure  # noqa: E402

SIZES = [(100, 1000), (1000, 5000)]
GROWTH = [(100, 500), (300, 500), (1000, 500), (100, 2000)]


def _simulate(nodes: int, pods: int) -> tuple[float, dict]:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "labkit", "scheduler", "simulate", "--nodes", str(nodes),
                          "--pods", str(pods), "-o", "json"], capture_output=True, text=True, cwd=REPO, check=True)
    return time.perf_counter() - started, json.loads(out.stdout)


def run() -> list[Figure]:
    figures = []
    for nodes, pods in SIZES:
        wall, data = _simulate(nodes, pods)
        figures.append(Figure("scheduler", f"{nodes} nodes x {pods:,} Pods, default profile (whole process)",
                              round(pods / wall, 1), "Pods/s", note=f"{wall:.1f} s, {data['bound']} bound"))
    for nodes, pods in GROWTH:
        _wall, data = _simulate(nodes, pods)
        figures.append(Figure("scheduler", f"growth: {nodes} nodes x {pods} Pods (scheduling only)",
                              data["podsPerSecond"], "Pods/s"))
    return figures
