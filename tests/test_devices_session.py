"""A device-plugins session gives the plugin its time in the plugin's own time
(labkit/devices/session.py Session.wait_for_plugin): on a loaded machine, a plugin still busy
(running, or waiting for a CPU) is given longer, up to BUSY_STRETCH times; an idle plugin that
does not do what it has to is judged when its time is up."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from labkit.devices.session import BUSY_STRETCH, Session


@pytest.fixture
def session(tmp_path):
    made = []

    def with_plugin(code: str) -> Session:
        s = Session(tmp_path / "device-plugins", tmp_path / "plugin.py", spawn=None, log=None)
        s.process = subprocess.Popen([sys.executable, "-c", code])
        made.append(s)
        return s

    yield with_plugin
    for s in made:
        s.process.kill()
        s.process.wait()


def _after(seconds: float):
    start = time.monotonic()
    return lambda: time.monotonic() - start >= seconds


def test_a_busy_plugin_is_given_longer(session):
    s = session("while True: pass")
    assert s.plugin_busy()
    # what it does at 0.6 s counts although its time is 0.3 s: every 20 ms it spent running or
    # waiting for a CPU moved the deadline on (at most to 5 × 0.3 s)
    assert BUSY_STRETCH * 0.3 > 0.6
    assert s.wait_for_plugin(_after(0.6), 0.3)


def test_an_idle_plugin_is_judged_when_its_time_is_up(session):
    s = session("import time; time.sleep(60)")
    time.sleep(0.2)              # past Python's start
    assert not s.plugin_busy()
    assert not s.wait_for_plugin(_after(3.0), 0.2)


def test_a_plugin_gone_is_not_busy_and_ends_the_wait(session):
    s = session("raise SystemExit(3)")
    s.process.wait()
    assert not s.plugin_busy()
    assert not s.wait_for_plugin(lambda: False, 30)


def test_time_kubelets_side_waited_for_a_cpu_is_given_back(session, monkeypatch):
    """An idle plugin whose Register is not yet recorded because kubelet's threads here waited for
    a CPU is not judged late: the deadline moves on by the time they waited (run_delay)."""
    s = session("import time; time.sleep(60)")
    time.sleep(0.2)
    assert not s.plugin_busy()
    waited = iter(range(10**6))
    monkeypatch.setattr(s, "kubelet_delay", lambda: next(waited) * 0.02)   # 20 ms more at each poll
    assert s.wait_for_plugin(_after(0.6), 0.3)


def test_run_delay_counts_the_time_a_thread_waited_for_a_cpu():
    """Two busy threads of one process and a busy process, all on one CPU: the threads other
    than the reading one have waited on the run queue; the reading one's own wait is left out."""
    code = """
import os, subprocess, sys, threading, time
from labkit.devices.session import run_delay
cpu = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {cpu})
burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
os.sched_setaffinity(burner.pid, {cpu})
stop, done = time.monotonic() + 0.5, threading.Event()
def spin():
    while time.monotonic() < stop:
        pass
def spin_then_stay():       # stays alive (asleep) until read: a thread gone takes its figures along
    spin()
    done.wait()
t = threading.Thread(target=spin_then_stay)
before = run_delay(os.getpid(), but=threading.get_native_id())
t.start(); spin()
after = run_delay(os.getpid(), but=threading.get_native_id())
done.set(); t.join(); burner.kill(); burner.wait()
print(before, after)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    before, after = map(float, out)
    assert before == 0.0 and after > 0.05
