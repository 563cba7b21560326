"""How the scheduler lab's checks read the numbers in answer files, in-process."""

from __future__ import annotations

from labkit.labs import get_lab


def test_a_score_written_as_a_whole_float_is_a_whole_number():
    checks = get_lab("scheduler")._load("checks.py")
    assert checks._int(50.0) == 50 and checks._int("49") == 49
    assert checks._int(49.5) is None and checks._int(True) is None
