"""Timestamps as the API writes them (metav1.Time: RFC 3339, second precision, UTC)."""

from __future__ import annotations

import time


def now_rfc3339(offset: float = 0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))
