"""Go's time.ParseDuration (src/time/format.go), for the values kube-apiserver reads as
durations (`?timeout=`): its grammar `[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+`, its units and its
error texts, which reach the client in the 400 Status."""

from __future__ import annotations

from labkit.apiserver.errors import go_quote

# nanoseconds per unit (format.go unitMap)
UNITS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000,
         "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}
_MAX = 1 << 63


def parse(text: str) -> int:
    """The duration in nanoseconds; ValueError with Go's message when Go refuses the text."""
    invalid = ValueError("time: invalid duration " + go_quote(text))
    s, negative = text, False
    if s and s[0] in "+-":
        negative, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    total = 0
    while s:
        if not (s[0] == "." or s[0].isascii() and s[0].isdigit()):
            raise invalid
        i = 0
        while i < len(s) and s[i].isascii() and s[i].isdigit():
            i += 1
        whole, s, before = int(s[:i] or 0), s[i:], i > 0
        if whole >= _MAX:                       # leadingInt's overflow
            raise invalid
        fraction, scale, after = 0, 1, False
        if s and s[0] == ".":
            s = s[1:]
            i = 0
            while i < len(s) and s[i].isascii() and s[i].isdigit():
                i += 1
            digits, s, after = s[:i], s[i:], i > 0
            for d in digits:                    # leadingFraction: digits past int64 are dropped
                if fraction > (_MAX - 1) // 10:
                    break
                fraction, scale = fraction * 10 + int(d), scale * 10
        if not before and not after:
            raise invalid
        i = 0
        while i < len(s) and not (s[i] == "." or s[i].isascii() and s[i].isdigit()):
            i += 1
        if i == 0:
            raise ValueError("time: missing unit in duration " + go_quote(text))
        unit, s = s[:i], s[i:]
        if unit not in UNITS:
            raise ValueError(f"time: unknown unit {go_quote(unit)} in duration {go_quote(text)}")
        per = UNITS[unit]
        if whole > _MAX // per:
            raise invalid
        value = whole * per
        if fraction:
            value += int(float(fraction) * (float(per) / scale))
            if value > _MAX:
                raise invalid
        total += value
        if total > _MAX:
            raise invalid
    if negative:
        return -total
    if total > _MAX - 1:
        raise invalid
    return total
