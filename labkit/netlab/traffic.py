"""Real HTTP requests from inside a lab host, one new TCP connection each (see httpprobe.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from labkit.errors import LabkitError
from labkit.netlab.netns import run_in

PROBE = Path(__file__).resolve().parent / "httpprobe.py"


def http_requests(netns: str, ip: str, port: int, count: int = 1, *, source: str | None = None,
                  timeout: float = 1.0, parallel: int = 1) -> list[dict]:
    """Send `count` requests from the namespace `netns` to ip:port; one result dict per request.

    A result is {"ok": True, "ms", "status", "body": <the pod's who-am-I reply>} or
    {"ok": False, "ms", "error": "refused" | "timeout" | ...}.
    """
    argv = [sys.executable, "-I", "-S", str(PROBE), ip, str(port), "--count", str(count),
            "--timeout", str(timeout), "--parallel", str(parallel)]
    if source:
        argv += ["--source", source]
    rounds = -(-count // max(parallel, 1))
    result = run_in(netns, argv, check=False, timeout=30 + rounds * (timeout + 1))
    if result.returncode != 0:
        raise LabkitError(f"requests from {netns} to {ip}:{port} failed: {result.stderr.strip()[-300:]}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
