"""The tests' host lock lets a waiting exclusive holder in before later shared holders."""

from __future__ import annotations

import fcntl
import multiprocessing
import os

import pytest

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


def _hold_nested(paths, events, release, leave):
    support.LOCK_PATH, support.TURNSTILE_PATH = paths
    with support.host_lock(False):
        events.put("outer")
        release.wait()
        with support.host_lock(False):
            events.put("inner")
            # held until the test has read "inner": a Queue's put is sent by a feeder thread, so
            # a writer let in at once could be read first (it was, once, on a loaded machine)
            leave.wait()


def test_a_shared_hold_inside_a_shared_hold_does_not_wait_for_a_waiting_writer(tmp_path):
    paths = (str(tmp_path / "lock"), str(tmp_path / "turnstile"))
    context = multiprocessing.get_context("fork")
    events = context.Queue()
    reader_release, reader_leave, writer_release = context.Event(), context.Event(), context.Event()
    reader = context.Process(target=_hold_nested, args=(paths, events, reader_release, reader_leave))
    reader.start()
    assert events.get(timeout=30) == "outer"
    writer = context.Process(target=_hold, args=(paths, True, events, writer_release))
    writer.start()
    turnstile = os.open(paths[1], os.O_RDWR | os.O_CREAT)
    assert support.wait_until(lambda: _held(turnstile), timeout=30)
    reader_release.set()
    assert events.get(timeout=30) == "inner"
    reader_leave.set()
    assert events.get(timeout=30) == "exclusive"
    writer_release.set()
    for process in (reader, writer):
        process.join(timeout=30)
        assert process.exitcode == 0
    os.close(turnstile)


def _hold_in_two_threads(paths, events, release, leave):
    """The first thread leaves while the second still holds: the lock must stay held."""
    import threading
    support.LOCK_PATH, support.TURNSTILE_PATH = paths
    second_in, first_out = threading.Event(), threading.Event()

    def first():
        with support.host_lock(False):
            events.put("first")
            second_in.wait()
        first_out.set()

    def second():
        with support.host_lock(False):
            second_in.set()
            first_out.wait()
            events.put("first left")
            release.wait()
            events.put("second leaves")
            # held until the test has read "second leaves": a Queue's put is sent by a feeder
            # thread, so the writer's "exclusive", put once this thread let go, could be read first
            leave.wait()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    threads[1].start()
    for thread in threads:
        thread.join()


def test_a_lock_shared_by_threads_is_held_until_the_last_thread_leaves(tmp_path):
    paths = (str(tmp_path / "lock"), str(tmp_path / "turnstile"))
    context = multiprocessing.get_context("fork")
    events = context.Queue()
    threads_release, threads_leave, writer_release = context.Event(), context.Event(), context.Event()
    threads = context.Process(target=_hold_in_two_threads, args=(paths, events, threads_release, threads_leave))
    writer = context.Process(target=_hold, args=(paths, True, events, writer_release))
    turnstile = os.open(paths[1], os.O_RDWR | os.O_CREAT)
    try:
        threads.start()
        assert events.get(timeout=30) == "first"
        assert events.get(timeout=30) == "first left"
        writer.start()
        assert support.wait_until(lambda: _held(turnstile), timeout=30), \
            "the writer got the lock while a thread of the holding process still held it"
        threads_release.set()
        assert events.get(timeout=30) == "second leaves"
        threads_leave.set()
        assert events.get(timeout=30) == "exclusive"
    finally:
        threads_release.set()
        threads_leave.set()
        writer_release.set()
        for process in (threads, writer):
            if process.pid is not None:
                process.join(timeout=30)
        os.close(turnstile)
    assert threads.exitcode == 0 and writer.exitcode == 0


def test_an_exclusive_request_inside_a_hold_of_the_same_process_fails_at_once():
    with support.host_lock(False), pytest.raises(RuntimeError, match="would wait for itself"):
        with support.host_lock(True):
            pass

def _held(fd) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False
