"""How long each lab's checks take, as whole processes (`labkit check LAB EXERCISE`).

For every exercise of every built-in lab: the check on the fresh lab, after each of its common
wrong solutions (applied to the exercise freshly reset, as tests/test_mistakes.py does) and after
its reference solution. Per lab, the slowest failing check and the slowest passing one.
Target: a failing check answers within 2 s; one that sends real traffic within 5 s (TRAFFIC).
Runs each lab in a throwaway labkit instance (own state directory and name prefix).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from figures import REPO, Figure

sys.path.insert(0, str(REPO))

FAILING_S, TRAFFIC_S = 2.0, 5.0
# exercises whose checks send real packets (labs/kube-proxy/checks.py: live.send)
TRAFFIC = {"kube-proxy": {"nodeport", "session-affinity", "traffic-policy", "hairpin", "debug-ruleset",
                          "clusterip-by-hand"}}


def _labkit(env, *args, ok=(0,)) -> tuple[float, int]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "labkit", *args], env=env, capture_output=True, cwd=REPO)
    elapsed = time.perf_counter() - start
    if result.returncode not in ok:
        raise RuntimeError(f"labkit {' '.join(args)} exited {result.returncode}: {result.stderr.decode()[-500:]}")
    return elapsed, result.returncode


def measure(lab) -> list[tuple[str, str, float, int]]:
    """(exercise, what was applied, seconds, exit code) of every check."""
    from labkit.exercises import answer_path

    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "LABKIT_STATE_DIR": f"{scratch}/state", "LABKIT_ANSWERS_DIR": f"{scratch}/answers",
               "LABKIT_PREFIX": "bchk"}
        os.environ["LABKIT_ANSWERS_DIR"] = env["LABKIT_ANSWERS_DIR"]      # answer_path() below
        timings = []
        try:
            _labkit(env, "run", lab.id)
            for ex in lab.exercises:
                timings.append((ex.id, "fresh lab", *_labkit(env, "check", lab.id, ex.id, ok=(0, 1))))
            for ex in lab.exercises:
                applied = [(m.name, ["--mistake", m.name]) for m in lab.mistakes(ex)] + [("reference solution", [])]
                for name, extra in applied:
                    answer_path(lab.id, ex.id).unlink(missing_ok=True)
                    _labkit(env, "reset", lab.id, ex.id)
                    _labkit(env, "solve", lab.id, ex.id, *extra)
                    timings.append((ex.id, name, *_labkit(env, "check", lab.id, ex.id, ok=(0, 1))))
        finally:
            _labkit(env, "cleanup", lab.id, ok=(0, 2))
        return timings


def run() -> list[Figure]:
    from labkit.labs import discover, load_lab

    figures = []
    for lab_id, directory in sorted(discover().items()):
        if directory.parent != REPO / "labs":
            continue
        lab = load_lab(directory)
        traffic = TRAFFIC.get(lab_id, set())
        unknown = traffic - {ex.id for ex in lab.exercises}
        if unknown:
            raise RuntimeError(f"TRAFFIC names exercises lab {lab_id} does not have: {sorted(unknown)}")
        timings = measure(lab)
        for kind, chosen, target in (("failing", [t for t in timings if t[3] != 0 and t[0] not in traffic], FAILING_S),
                                     ("failing traffic", [t for t in timings if t[3] != 0 and t[0] in traffic], TRAFFIC_S),
                                     ("passing", [t for t in timings if t[3] == 0], None)):
            if not chosen:
                continue
            ex, applied, seconds, _ = max(chosen, key=lambda t: t[2])
            figures.append(Figure(f"{lab_id} checks", f"slowest {kind} check (of {len(chosen)})", round(seconds, 2), "s",
                                  target=f"< {target:g} s" if target else None,
                                  met=seconds < target if target else None, note=f"{ex}, {applied}"))
        wrongly = [f"{ex}/{applied}" for ex, applied, _, code in timings if code == 0 and applied not in
                   ("fresh lab", "reference solution")]
        if wrongly:
            figures.append(Figure(f"{lab_id} checks", "common mistakes that pass", len(wrongly), "", target="0",
                                  met=False, note=", ".join(wrongly)))
    return figures
