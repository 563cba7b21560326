"""The scheduling queue's backoff (pkg/scheduler/backend/queue/scheduling_queue.go
calculateBackoffDuration): podInitialBackoffSeconds doubled per failed attempt, capped at
podMaxBackoffSeconds (defaults 1 s and 10 s: 1, 2, 4, 8, 10, 10, ...)."""

from __future__ import annotations

INITIAL_BACKOFF_SECONDS = 1
MAX_BACKOFF_SECONDS = 10


def backoff_seconds(attempts: int, initial: float = INITIAL_BACKOFF_SECONDS, maximum: float = MAX_BACKOFF_SECONDS) -> float:
    duration = initial
    for _ in range(1, attempts):
        if duration > maximum - duration:       # upstream's overflow-safe doubling
            return maximum
        duration += duration
    return duration
