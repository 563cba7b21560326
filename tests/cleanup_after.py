"""`python tests/cleanup_after.py PID ENVS_JSON`: wait until process PID is gone, then clean up
every labkit instance in ENVS_JSON (a list of LABKIT_* environments) with `labkit cleanup --all`.

A test process stopped with SIGTERM (kill, a CI timeout) starts this, detached, and dies at once
(tests/conftest.py _on_sigterm): cleaning up inside the dying process could wait for ever on a
lab's lock that the process itself holds, and under pytest-xdist a worker that dies is replaced
and the run goes on, where one that turned the signal into an interrupt would stop the whole run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(pid: int, envs: list[dict]) -> None:
    deadline = time.monotonic() + 60
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    for env in envs:
        subprocess.run([sys.executable, "-m", "labkit", "cleanup", "--all"], env={**os.environ, **env}, cwd=REPO,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)


if __name__ == "__main__":
    main(int(sys.argv[1]), json.loads(sys.argv[2]))
