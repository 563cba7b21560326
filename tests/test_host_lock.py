"""The tests' host lock lets a waiting exclusive holder in before later shared holders."""

from __future__ import annotations

import fcntl
import multiprocessing
import os

import support


def _hold(paths, exclusive, events, release):
    support.LOCK_PATH, support.TURNSTILE_PATH = paths
    with support.host_lock(exclusive):
        events.put("exclusive" if exclusive else "shared")
        release.wait()


def test_a_waiting_exclusive_holder_goes_before_later_shared_ones(tmp_path):
    paths = (str(tmp_path / "lock"), str(tmp_path / "turnstile"))
    context = multiprocessing.get_context("fork")
    events = context.Queue()
    first_release, second_release, third_release = (context.Event() for _ in range(3))
    first = context.Process(target=_hold, args=(paths, False, events, first_release))
    first.start()
    assert events.get(timeout=30) == "shared"
    writer = context.Process(target=_hold, args=(paths, True, events, second_release))
    writer.start()
    # the writer now waits for the first holder, holding the turnstile
    turnstile = os.open(paths[1], os.O_RDWR | os.O_CREAT)
    assert support.wait_until(lambda: _held(turnstile), timeout=30)
    reader = context.Process(target=_hold, args=(paths, False, events, third_release))
    reader.start()
    first_release.set()
    assert events.get(timeout=30) == "exclusive"
    second_release.set()
    assert events.get(timeout=30) == "shared"
    third_release.set()
    for process in (first, writer, reader):
        process.join(timeout=30)
        assert process.exitcode == 0
    os.close(turnstile)


def _hold_nested(paths, events, release):
    support.LOCK_PATH, support.TURNSTILE_PATH = paths
    with support.host_lock(False):
        events.put("outer")
        release.wait()
        with support.host_lock(False):
            events.put("inner")


def test_a_shared_hold_inside_a_shared_hold_does_not_wait_for_a_waiting_writer(tmp_path):
    paths = (str(tmp_path / "lock"), str(tmp_path / "turnstile"))
    context = multiprocessing.get_context("fork")
    events = context.Queue()
    reader_release, writer_release = context.Event(), context.Event()
    reader = context.Process(target=_hold_nested, args=(paths, events, reader_release))
    reader.start()
    assert events.get(timeout=30) == "outer"
    writer = context.Process(target=_hold, args=(paths, True, events, writer_release))
    writer.start()
    turnstile = os.open(paths[1], os.O_RDWR | os.O_CREAT)
    assert support.wait_until(lambda: _held(turnstile), timeout=30)
    reader_release.set()
    assert events.get(timeout=30) == "inner"
    assert events.get(timeout=30) == "exclusive"
    writer_release.set()
    for process in (reader, writer):
        process.join(timeout=30)
        assert process.exitcode == 0
    os.close(turnstile)


def _held(fd) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False
