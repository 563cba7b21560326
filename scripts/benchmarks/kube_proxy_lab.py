"""kube-proxy lab figures: `labkit run kube-proxy` until the first request through a ClusterIP is
answered (target: under 3 s on a 2-core machine), where the build spends its time, and cleanup."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from figures import Figure

REPO = Path(__file__).resolve().parent.parent.parent
ROUNDS = 3
CLUSTER_IP, PORT, FROM_POD = "10.96.0.10", 80, "web-1"     # Service web in the lab's scenario


def _first_request(prefix: str) -> bool:
    probe = REPO / "labkit" / "netlab" / "httpprobe.py"
    result = subprocess.run(["nsenter", f"--net=/run/netns/{prefix}-kube-proxy-{FROM_POD}", "--",
                             sys.executable, "-I", "-S", str(probe), CLUSTER_IP, str(PORT), "--timeout", "2"],
                            capture_output=True, text=True)
    return '"ok": true' in result.stdout


def _cli_round(env: dict) -> tuple[float, float, float]:
    labkit = [sys.executable, "-m", "labkit"]
    start = time.perf_counter()
    subprocess.run(labkit + ["run", "kube-proxy"], env=env, cwd=REPO, check=True, capture_output=True)
    run_done = time.perf_counter()
    if not _first_request(env["LABKIT_PREFIX"]):
        raise RuntimeError("the first request through the ClusterIP failed")
    answered = time.perf_counter()
    subprocess.run(labkit + ["cleanup", "kube-proxy"], env=env, cwd=REPO, check=True, capture_output=True)
    return run_done - start, answered - start, time.perf_counter() - answered


def _phases() -> dict[str, float]:
    """The build in-process, timed at each step live.build reports (network, pods, node sync)."""
    from labkit.kubeproxy import live
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    lab = get_lab("kube-proxy")
    state = LabState(lab.id)
    state.ensure_dir()
    env = LabEnv(lab, state)
    marks = [("start", time.perf_counter())]
    try:
        live.build(env, lab.directory / "scenarios" / "cluster.yaml",
                   log=lambda msg: marks.append((msg, time.perf_counter())))
    finally:
        state.ledger.cleanup()
    return {msg: t - marks[i][1] for i, (msg, t) in enumerate(marks[1:])}


def run() -> list[Figure]:
    env = {**os.environ, "LABKIT_LABS_PATH": ""}
    rounds = [_cli_round(env) for _ in range(ROUNDS)]
    run_s = statistics.median(r[0] for r in rounds)
    first = statistics.median(r[1] for r in rounds)
    cleanup = statistics.median(r[2] for r in rounds)
    phases = _phases()
    note = f"median of {ROUNDS}"
    figures = [
        Figure("kube-proxy lab", "labkit run kube-proxy until the first ClusterIP request is answered",
               round(first, 3), "s", "< 3 s", first < 3.0, note),
        Figure("kube-proxy lab", "labkit run kube-proxy (whole command)", round(run_s, 3), "s", note=note),
        Figure("kube-proxy lab", "labkit cleanup kube-proxy", round(cleanup, 3), "s", note=note),
    ]
    for step, seconds in phases.items():
        figures.append(Figure("kube-proxy lab", f"build step: {step} (in-process)", round(seconds, 3), "s"))
    return figures
