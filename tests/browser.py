"""Headless Chromium (Debian's `chromium`) for tests of the HTML pages labkit writes.

`load(page)` opens a local file with no network use, returns the DOM after the scripts ran and
every console message the page produced (Chromium logs them to stderr as `CONSOLE` lines with
`--enable-logging=stderr`; it does not say their level, so a test that wants "no console errors"
asks for no console messages at all — labkit's pages log nothing). With `screenshot=PATH` it
also writes a PNG. Every Chromium process is started in a session of its own and the whole group
is killed when the call ends, also on a timeout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
CONSOLE_RE = re.compile(r":CONSOLE[^\]]*\] (.*)$")


@dataclass
class Loaded:
    dom: str
    console: list[str]


def _run(argv: list[str], timeout: float) -> tuple[str, str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {err[-2000:]}")
    return out, err


def load(page: Path, screenshot: Path | None = None, size: tuple[int, int] = (1280, 1600),
         timeout: float = 90) -> Loaded:
    url = Path(page).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="labkit-chromium-") as profile:
        base = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}"]
        dom, err = _run(base + ["--dump-dom", url], timeout)
        console = [m.group(1) for m in map(CONSOLE_RE.search, err.splitlines()) if m]
        if screenshot is not None:
            _, err2 = _run(base + [f"--screenshot={screenshot}", url], timeout)
            console += [m.group(1) for m in map(CONSOLE_RE.search, err2.splitlines()) if m]
    return Loaded(dom, console)
