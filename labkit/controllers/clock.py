"""The controllers' clock: real time that can be moved ahead.

A controller that waits for a time (a work queue's delayed items, the namespace controller's
namespaceDeletionGracePeriod and its estimate/2+1 s requeue) reads it from its clock. By default
that is the real monotonic clock. A `SkippingClock` runs with real time and can be moved ahead
(`advance`): everything waiting on it sees the time it skipped pass at once, so a scenario player
or a test need not sit through upstream's delays while nothing else happens, and the delays
keep their order and their lengths as the controllers see them.

Work queues subscribe to the clock they were given (`subscribe`) so that a move wakes their
waiting workers; `next_due` is the earliest time any subscribed queue has an item waiting for.
"""

from __future__ import annotations

import threading
import time
import weakref


class SkippingClock:
    """time.monotonic() / time.time() plus the seconds skipped so far."""

    def __init__(self):
        self._skipped = 0.0
        self._lock = threading.Lock()
        self._queues: weakref.WeakSet = weakref.WeakSet()

    def __call__(self) -> float:
        return time.monotonic() + self._skipped

    def time(self) -> float:
        """Wall-clock seconds (for comparing with timestamps the API server wrote)."""
        return time.time() + self._skipped

    @property
    def skipped(self) -> float:
        return self._skipped

    def subscribe(self, queue) -> None:
        """`queue.wake()` is called after every move; `queue.next_due()` counts for next_due."""
        with self._lock:
            self._queues.add(queue)

    def next_due(self) -> float | None:
        """The earliest time a subscribed queue has an item waiting for, if any."""
        with self._lock:
            queues = list(self._queues)
        times = [t for t in (q.next_due() for q in queues) if t is not None]
        return min(times) if times else None

    def busy(self) -> bool:
        """Some subscribed queue has an item queued or being processed."""
        with self._lock:
            queues = list(self._queues)
        return any(q.busy() for q in queues)

    def advance(self, seconds: float) -> None:
        if seconds <= 0:
            return
        with self._lock:
            self._skipped += seconds
            queues = list(self._queues)
        for q in queues:
            q.wake()

    def skip(self, quiet, limit: float | None = None, to_limit: bool = False, settle: float = 5.0) -> float:
        """While `quiet()` holds (twice, 20 ms apart) and no subscribed queue is busy: move ahead
        to the next delayed item, if it is due by `limit` (None: any time); with `to_limit`, to
        `limit` when nothing is due sooner. Then wait (at most `settle` seconds) until all is
        quiet again, so that whoever looks next sees what was due handled. The seconds skipped."""
        if not (quiet() and not self.busy()):
            return 0.0
        time.sleep(0.02)
        if not (quiet() and not self.busy()):
            return 0.0
        due = self.next_due()
        if due is None or (limit is not None and due > limit):
            if not to_limit or limit is None:
                return 0.0
            due = limit
        seconds = due - self()
        if seconds <= 0:
            return 0.0
        self.advance(seconds)
        until = time.monotonic() + settle
        while not (quiet() and not self.busy()) and time.monotonic() < until:
            time.sleep(0.01)
        return seconds


def wall(clock) -> float:
    """Wall-clock seconds on `clock` (time.time() for the real clock)."""
    return clock.time() if hasattr(clock, "time") else time.time()
