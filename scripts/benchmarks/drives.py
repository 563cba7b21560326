"""CPU seconds of the suite's lab drives (tests/conftest.py LAB_DRIVERS), lab by lab, alone.

For each built-in lab (or those LABKIT_BENCH_DRIVE_LABS names, comma-separated): `labkit run`,
then each driver as the suite runs it (`python tests/<driver> LAB`: every common mistake, every
mutant, the answer fuzz), then `labkit cleanup`. A driver's figure is its CPU time, user + system,
with every child process it waited for (kubectl, iptables, labkit's tools), as `/usr/bin/time`
counts it; the lab's own processes (its API server, pod servers) are not children of the driver
and are counted apart, as the CPU their processes used while the lab was up. The suite's first
phase runs every lab's drives side by side on every core: it takes about the sum of these over
the number of cores. CPU, not wall seconds: a drive mostly waits for controllers, and its wall
time tells how loaded the machine was.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile

from figures import REPO, Figure

DRIVERS = ("test_mistakes.py", "test_mutants.py", "test_fuzz_answers.py")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _lab_processes_cpu(state_dir: str) -> float:
    """CPU seconds of the live processes whose environment names the instance's state directory
    (and of the children they waited for)."""
    needle = f"LABKIT_STATE_DIR={state_dir}".encode()
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15]) / tick
    return total


def _run(argv, env, timeout=1800) -> tuple[float, int]:
    before = _children_cpu()
    result = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, timeout=timeout)
    return _children_cpu() - before, result.returncode


def run() -> list[Figure]:
    from labkit.labs import discover

    wanted = [lab for lab in os.environ.get("LABKIT_BENCH_DRIVE_LABS", "").split(",") if lab]
    labs = wanted or sorted(lab for lab, directory in discover().items() if directory.parent == REPO / "labs")
    figures = []
    for lab_id in labs:
        with tempfile.TemporaryDirectory(prefix="labkit-drive-") as scratch:
            env = {**os.environ, "LABKIT_STATE_DIR": f"{scratch}/state", "LABKIT_ANSWERS_DIR": f"{scratch}/answers",
                   "LABKIT_PREFIX": "bdrv", "LABKIT_LABS_PATH": str(REPO / "tests" / "labs")}
            try:
                seconds, code = _run([sys.executable, "-m", "labkit", "run", lab_id], env)
                if code != 0:
                    figures.append(Figure(f"{lab_id} drives", "labkit run", seconds, "s CPU", note="failed"))
                    continue
                total = 0.0
                for driver in DRIVERS:
                    seconds, code = _run([sys.executable, str(REPO / "tests" / driver), lab_id], env)
                    total += seconds
                    figures.append(Figure(f"{lab_id} drives", driver.removesuffix(".py").removeprefix("test_"),
                                          round(seconds, 1), "s CPU", note="" if code == 0 else "failed"))
                figures.append(Figure(f"{lab_id} drives", "all drivers", round(total, 1), "s CPU"))
                figures.append(Figure(f"{lab_id} drives", "the lab's processes, build and drives",
                                      round(_lab_processes_cpu(env["LABKIT_STATE_DIR"]), 1), "s CPU"))
            finally:
                subprocess.run([sys.executable, "-m", "labkit", "cleanup", lab_id], env=env, cwd=REPO,
                               capture_output=True)
    return figures
