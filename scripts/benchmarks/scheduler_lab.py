"""The live scheduler lab: how long `labkit run scheduler` takes (target: under 2 s) and where the
embedded API server's start goes, each a whole process, RUNS times, the figure the median and the
note the range:

- the server's imports (`python -c "import labkit.apiserver.server"`);
- `python -m labkit.apiserver` with the lab's 19 controllers, from its start to server.json (it
  listens and serves: the controllers start after that) and to all 19 controllers started;
- `labkit run scheduler` (the server, the thirteen Nodes, the Pods, the Deployment shop placed), and
  `labkit cleanup scheduler` after it (not counted in the run's figure).

Runs the real CLI in a throwaway labkit instance (own state directory and name prefix).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import REPO, Figure, time_command

RUNS = 5
TARGET_S = 2.0


def _lab_controllers() -> tuple[str, ...]:
    spec = importlib.util.spec_from_file_location("scheduler_lab", REPO / "labs" / "scheduler" / "lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CONTROLLERS


def _server_start(state: Path, controllers: tuple[str, ...]) -> tuple[float, float]:
    """Seconds from the server's start to its server.json, and to all its controllers started."""
    from labkit.apiserver.process import read_server_info
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "labkit.apiserver", "--state", str(state), "--controllers",
                             ",".join(controllers)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while (info := read_server_info(state)) is None or info.pid != proc.pid:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the API server did not start")
            time.sleep(0.005)
        listening = time.perf_counter() - started
        client = info.client()
        while not client.check(*client.request("GET", "/labkit/v1/controllers/startup"))["done"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the API server's controllers did not start")
            time.sleep(0.005)
        return listening, time.perf_counter() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        (state / "server.json").unlink(missing_ok=True)


def _figure(name: str, times: list[float], target: float | None = None, note: str = "") -> Figure:
    median = statistics.median(times)
    spread = f"{min(times):.2f}-{max(times):.2f} s, median of {len(times)}"
    return Figure("scheduler lab", name, round(median, 3), "s", f"< {target:g} s" if target else None,
                  None if target is None else median < target, note=f"{spread}{'; ' + note if note else ''}")


def run() -> list[Figure]:
    labkit = [sys.executable, "-m", "labkit"]
    controllers = _lab_controllers()
    figures = []
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "LABKIT_STATE_DIR": f"{scratch}/state", "LABKIT_ANSWERS_DIR": f"{scratch}/answers",
               "LABKIT_PREFIX": "bsch"}
        imports = [time_command([sys.executable, "-c", "import labkit.apiserver.server"], env) for _ in range(RUNS)]
        figures.append(_figure("python -c 'import labkit.apiserver.server' (the server's imports)", imports))
        listening, all_started = [], []
        for i in range(RUNS):
            first, last = _server_start(Path(scratch) / f"server-{i}", controllers)
            listening.append(first)
            all_started.append(last)
        figures.append(_figure(f"python -m labkit.apiserver, {len(controllers)} controllers: to server.json "
                               "(listening)", listening))
        figures.append(_figure(f"python -m labkit.apiserver, {len(controllers)} controllers: to all started",
                               all_started))
        up, down = [], []
        try:
            for _ in range(RUNS):
                up.append(time_command(labkit + ["run", "scheduler"], env))
                down.append(time_command(labkit + ["cleanup", "scheduler"], env))
        finally:
            time_command(labkit + ["cleanup", "scheduler"], env, ok=(0, 2))
        figures.append(_figure("labkit run scheduler (API server, 13 Nodes, Pods, Deployment placed)", up, TARGET_S))
        figures.append(_figure("labkit cleanup scheduler", down))
    return figures
