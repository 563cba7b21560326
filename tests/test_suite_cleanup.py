"""The suite leaves nothing on the host however a test ends: a test that fails before its own
cleanup, and a run stopped with SIGTERM (kill, a CI timeout), still have their labs cleaned up
(tests/conftest.py isolated_labkit, pytest_configure). Each case runs a small test file in a pytest
of its own with this suite's conftest, then looks for the lab's network namespaces. (Not host_compared: the inner run takes the host lock
shared, and would wait for ever behind this test's exclusive hold.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


from support import REPO

INNER = '''
import os, time
from pathlib import Path
from support import labkit

def test_builds_a_lab_then_fails():
    Path(os.environ["PREFIX_FILE"]).write_text(os.environ["LABKIT_PREFIX"])
    labkit("run", "demo", check=0)
    if os.environ.get("WAIT"):
        Path(os.environ["PREFIX_FILE"] + ".up").write_text("up")
        time.sleep(600)
    assert False, "fails before any cleanup of its own"
'''

# a module's shared lab, built once under an environment of its own, which each test points
# LABKIT_* at (as tests/test_gc_lab.py's `lab` fixture does): it must outlive every test
SHARED = '''
import os, subprocess
from pathlib import Path
import pytest
from conftest import fresh_environment
from support import labkit

def up(prefix):
    return [l for l in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
            if l.startswith(prefix + "-")]

@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    env = {**os.environ, **fresh_environment(tmp_path_factory.mktemp("shared"))}
    Path(os.environ["PREFIX_FILE"]).write_text(env["LABKIT_PREFIX"])
    labkit("run", "demo", env=env, check=0)
    yield env
    labkit("cleanup", "demo", env=env, check=0)

@pytest.fixture
def on_shared(shared, monkeypatch):
    for key in ("LABKIT_STATE_DIR", "LABKIT_ANSWERS_DIR", "LABKIT_PREFIX", "LABKIT_LABS_PATH"):
        monkeypatch.setenv(key, shared[key])

def test_first(on_shared):
    assert up(os.environ["LABKIT_PREFIX"])

def test_second(on_shared):
    assert up(os.environ["LABKIT_PREFIX"]), "the shared lab was taken down after the first test"
'''


# under pytest-xdist: a worker killed with SIGTERM in the middle of a test
WORKER = '''
import os, time
from pathlib import Path
from support import labkit

def test_a_builds_a_lab_and_is_killed():
    Path(os.environ["PREFIX_FILE"]).write_text(os.environ["LABKIT_PREFIX"])
    labkit("run", "demo", check=0)
    Path(os.environ["PREFIX_FILE"] + ".pid").write_text(str(os.getpid()))
    time.sleep(600)

def test_b_runs_after_it():
    Path(os.environ["PREFIX_FILE"] + ".after").write_text("ran")
'''


def _namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix + "-")]


def _inner(tmp_path: Path, wait: bool, source: str = INNER, workers: int = 0) -> tuple[subprocess.Popen, Path]:
    (tmp_path / "test_inner.py").write_text(source)
    prefix_file = tmp_path / "prefix"
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests"), "PREFIX_FILE": str(prefix_file),
           **({"WAIT": "1"} if wait else {})}
    xdist = ["-n", str(workers)] if workers else ["-p", "no:xdist"]
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *xdist, "-p", "no:cacheprovider", "-p", "conftest",
                             "-q", "--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "base"),
                             str(tmp_path / "test_inner.py")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, prefix_file


def test_a_test_that_fails_before_its_cleanup_leaves_no_lab(tmp_path):
    proc, prefix_file = _inner(tmp_path, wait=False)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 1 and "fails before any cleanup of its own" in out, out[-2000:]
    assert prefix_file.read_text() and _namespaces(prefix_file.read_text()) == [], out[-2000:]


def test_a_run_stopped_with_sigterm_leaves_no_lab(tmp_path):
    proc, prefix_file = _inner(tmp_path, wait=True)
    up = Path(str(prefix_file) + ".up")
    deadline = time.monotonic() + 900
    while not up.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert up.exists(), proc.communicate(timeout=60)[0][-2000:]
    assert _namespaces(prefix_file.read_text())         # the lab is up while the run goes on
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == -signal.SIGTERM, out[-2000:]      # it died of the signal, at once
    deadline = time.monotonic() + 300       # the cleanup runs detached, after the process is gone
    while _namespaces(prefix_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _namespaces(prefix_file.read_text()) == [], out[-2000:]


def test_a_modules_shared_lab_outlives_each_test_that_uses_it(tmp_path):
    """The cleanup after each test is of the test's own instance, not of the shared lab its
    environment points at while it runs (that teardown once took the gc, kube-proxy and scheduler
    labs down under every module's second test)."""
    proc, prefix_file = _inner(tmp_path, wait=False, source=SHARED)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0 and "2 passed" in out, out[-3000:]
    assert _namespaces(prefix_file.read_text()) == [], out[-2000:]     # its own teardown ran


def test_a_worker_stopped_with_sigterm_leaves_no_lab_and_the_run_goes_on(tmp_path):
    """Under pytest-xdist a worker killed in the middle of a test is replaced and the run goes on
    (the signal once became an interrupt that stopped the whole run); its lab is cleaned up."""
    proc, prefix_file = _inner(tmp_path, wait=False, source=WORKER, workers=1)
    pid_file = Path(str(prefix_file) + ".pid")
    deadline = time.monotonic() + 900
    while not pid_file.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pid_file.exists(), proc.communicate(timeout=60)[0][-2000:]
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    out, _ = proc.communicate(timeout=900)
    assert "crashed while running" in out and "1 failed, 1 passed" in out, out[-3000:]
    assert Path(str(prefix_file) + ".after").exists(), out[-3000:]
    deadline = time.monotonic() + 900
    while _namespaces(prefix_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _namespaces(prefix_file.read_text()) == [], out[-2000:]
