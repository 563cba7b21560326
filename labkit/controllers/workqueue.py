"""client-go's rate-limited work queue (k8s.io/client-go/util/workqueue): an item is queued at most
once; an item being processed that is added again is queued when its processing is `done`;
`add_after` keeps one waiting entry per item, moved earlier when the item is added again with a
shorter delay and left alone otherwise (delaying_queue.go insert); `add_rate_limited` re-adds an
item after the DefaultControllerRateLimiter's delay — the larger of a per-item exponential backoff
(5 ms doubling up to 1000 s) and an overall token bucket (10 per second, burst 100)."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque


class TokenBucket:
    """BucketRateLimiter's rate.Limiter, on `clock`: the queue's, so time a SkippingClock skips
    refills it as it would have in real time."""

    def __init__(self, qps: float, burst: int, clock=time.monotonic):
        self.qps, self.burst = qps, burst
        self.clock = clock
        self.tokens = float(burst)
        self.last = clock()
        self.lock = threading.Lock()

    def reserve(self) -> float:
        """Take a token; returns how long the caller must wait for it."""
        with self.lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
            self.last = now
            self.tokens -= 1
            return 0.0 if self.tokens >= 0 else -self.tokens / self.qps


class RateLimitingQueue:
    def __init__(self, name: str, base_delay: float = 0.005, max_delay: float = 1000.0,
                 qps: float = 10.0, burst: int = 100, clock=time.monotonic):
        self.name = name
        self.clock = clock              # when delayed items are due (a test may pass a fake clock)
        self.base_delay, self.max_delay = base_delay, max_delay
        self.bucket = TokenBucket(qps, burst, clock)
        self._failures: dict = {}
        self._queue: deque = deque()
        self._dirty: set = set()
        self._processing: set = set()
        self._waiting: list = []          # heap of (ready time, seq, item); stale entries skipped
        self._ready_at: dict = {}         # item -> its one waiting entry's ready time
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._shutdown = False
        if hasattr(clock, "subscribe"):     # a clock that can be moved ahead wakes the waiting workers
            clock.subscribe(self)

    # -- adding ----------------------------------------------------------------------------------
    def add(self, item) -> None:
        with self._cond:
            if self._shutdown or item in self._dirty:
                return
            self._dirty.add(item)
            if item in self._processing:
                return
            self._queue.append(item)
            self._cond.notify()

    def add_after(self, item, delay: float) -> None:
        if delay <= 0:
            self.add(item)
            return
        with self._cond:
            if self._shutdown:
                return
            ready = self.clock() + delay
            if item in self._ready_at and self._ready_at[item] <= ready:
                return          # already waiting to be queued as soon or sooner
            self._ready_at[item] = ready
            heapq.heappush(self._waiting, (ready, next(self._seq), item))
            self._cond.notify()

    def when(self, item) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        backoff = min(self.max_delay, self.base_delay * (2 ** min(failures, 40)))
        return max(backoff, self.bucket.reserve())

    def add_rate_limited(self, item) -> None:
        self.add_after(item, self.when(item))

    def forget(self, item) -> None:
        self._failures.pop(item, None)

    # -- taking ----------------------------------------------------------------------------------
    def _promote_due(self) -> float | None:
        """Move waiting items whose time has come into the queue; the wait until the next one."""
        now = self.clock()
        while self._waiting:
            ready, _, item = self._waiting[0]
            if self._ready_at.get(item) != ready:
                heapq.heappop(self._waiting)        # stale: the item was moved earlier since
                continue
            if ready > now:
                return ready - now
            heapq.heappop(self._waiting)
            del self._ready_at[item]
            if item not in self._dirty:
                self._dirty.add(item)
                if item not in self._processing:
                    self._queue.append(item)
        return None

    def get(self, timeout: float | None = None):
        """The next item (mark it processing), or None on timeout / shutdown."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                next_due = self._promote_due()
                if self._queue:
                    item = self._pop()
                    self._dirty.discard(item)
                    self._processing.add(item)
                    return item
                if self._shutdown:
                    return None
                wait = next_due
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._cond.wait(wait)

    def _pop(self):
        """The next item of the queue (first in, first out; a subclass may order them otherwise)."""
        return self._queue.popleft()

    def done(self, item) -> None:
        with self._cond:
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def wake(self) -> None:
        """The clock moved: the waiting workers look again at what is due."""
        with self._cond:
            self._cond.notify_all()

    # -- state -----------------------------------------------------------------------------------
    def busy(self) -> bool:
        """Items queued or being processed now, or delayed ones whose time has come (those still
        waiting for their time do not count)."""
        with self._cond:
            if self._queue or self._processing:
                return True
            now = self.clock()
            return any(t <= now for t in self._ready_at.values())

    def next_due(self) -> float | None:
        """The clock time the earliest delayed item is due at, if any."""
        with self._cond:
            return min(self._ready_at.values(), default=None)

    def idle(self, horizon: float = 1.0) -> bool:
        """Nothing queued or processing, and nothing due again within `horizon` seconds (items
        retried with long backoffs, e.g. references to kinds that do not exist, do not count)."""
        with self._cond:
            if self._queue or self._processing:
                return False
            now = self.clock()
            return not any(t - now <= horizon for t in self._ready_at.values())
