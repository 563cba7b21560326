"""The scheduling queue: the order activeQ pops Pods in, and the backoff of a Pod that failed.

- activeQ is a heap ordered by the profile's QueueSort plugin, PrioritySort in every profile
  (pkg/scheduler/framework/plugins/queuesort/priority_sort.go Less): the higher spec.priority
  first, and among equal priorities the one queued earlier (QueuedPodInfo.Timestamp);
- backoff (pkg/scheduler/backend/queue/scheduling_queue.go calculateBackoffDuration):
  podInitialBackoffSeconds doubled per failed attempt, capped at podMaxBackoffSeconds (defaults
  1 s and 10 s: 1, 2, 4, 8, 10, 10, ...)."""

from __future__ import annotations

from typing import Callable

from labkit.controllers.workqueue import RateLimitingQueue

INITIAL_BACKOFF_SECONDS = 1
MAX_BACKOFF_SECONDS = 10


def backoff_seconds(attempts: int, initial: float = INITIAL_BACKOFF_SECONDS, maximum: float = MAX_BACKOFF_SECONDS) -> float:
    duration = initial
    for _ in range(1, attempts):
        if duration > maximum - duration:       # upstream's overflow-safe doubling
            return maximum
        duration += duration
    return duration


def less(priority_1: int, queued_1: float, priority_2: int, queued_2: float) -> bool:
    """PrioritySort's Less: Pod 1 pops before Pod 2."""
    return priority_1 > priority_2 or (priority_1 == priority_2 and queued_1 < queued_2)


class ActiveQueue(RateLimitingQueue):
    """The scheduler controller's work queue, popped as activeQ is: by PrioritySort's Less. Keys
    wait in the order they were queued (the timestamp of each), so the first key of the highest
    priority is the one Less puts first. `priority_of(key)` reads the Pod's spec.priority."""

    def __init__(self, name: str, priority_of: Callable[[str], int]):
        super().__init__(name)
        self.priority_of = priority_of

    def _pop(self):
        best, best_priority = 0, None
        for i, key in enumerate(self._queue):          # i: the order the keys were queued in
            priority = self.priority_of(key)
            if best_priority is None or less(priority, i, best_priority, best):
                best, best_priority = i, priority
        key = self._queue[best]
        del self._queue[best]
        return key
