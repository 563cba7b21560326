"""resource.Quantity as k8s.io/apimachinery/pkg/api/resource reads and writes it: `500m`, `1Gi`,
`1e3`, `0.5`. A quantity keeps the family of its suffix (binary `Ki`..`Ei`, decimal `n`..`E`,
exponent `e3`) and is always written back in canonical form (`1000m` -> `1`, `0.5` -> `500m`,
`1024Mi` -> `1Gi`, `1.5Ki` -> `1536`); resource lists are rounded up to milli-units first
(SetDefaults_ResourceList)."""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_ERROR = f"quantities must match the regular expression '{PATTERN}'"

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX = {v: k for k, v in _BINARY.items()}
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)$")


class QuantityError(ValueError):
    pass


def parse(text: str) -> tuple[Fraction, str]:
    """(value, format): format is 'BinarySI', 'DecimalSI' or 'DecimalExponent'."""
    text = text.strip()
    m = re.match(r"^([+-]?[0-9.]+)(.*)$", text)
    if not m or not _NUMBER.match(m.group(1)):
        raise QuantityError(FORMAT_ERROR)
    number, suffix = m.group(1), m.group(2)
    value = Fraction(number.lstrip("+")) if number not in ("+", "-") else None
    if value is None:
        raise QuantityError(FORMAT_ERROR)
    if suffix in _BINARY:
        return value * (1 << _BINARY[suffix]), "BinarySI"
    if suffix in _DECIMAL:
        return value * Fraction(10) ** _DECIMAL[suffix], "DecimalSI"
    e = re.match(r"^[eE]([-+]?\d+)$", suffix)
    if e:
        return value * Fraction(10) ** int(e.group(1)), "DecimalExponent"
    raise QuantityError("unable to parse quantity's suffix")


def round_up(value: Fraction, scale: int = -3) -> Fraction:
    """Quantity.RoundUp(scale): away from zero at 10^scale."""
    unit = Fraction(10) ** scale
    steps = value / unit
    steps = math.ceil(steps) if steps >= 0 else math.floor(steps)
    return steps * unit


def format_quantity(value: Fraction, fmt: str) -> str:
    """Quantity.String(): CanonicalizeBytes."""
    if value == 0:
        return "0"
    if fmt == "BinarySI":
        if -1024 < value < 1024 or value.denominator != 1:
            fmt = "DecimalSI"
        else:
            number, exponent = int(value), 0
            while number % 1024 == 0 and exponent < 60:
                number //= 1024
                exponent += 10
            return f"{number}{_BINARY_SUFFIX.get(exponent, '')}"
    # decimal: the smallest mantissa whose exponent is a multiple of 3
    exponent = 0
    while value.denominator != 1:
        value *= 1000
        exponent -= 3
    number = int(value)
    while number != 0 and number % 1000 == 0 and exponent < 18:
        number //= 1000
        exponent += 3
    if fmt == "DecimalExponent":
        return f"{number}e{exponent}" if exponent else str(number)
    if exponent < -9:       # below nano: written with an exponent, as DecimalExponent
        return f"{number}e{exponent}"
    return f"{number}{_DECIMAL_SUFFIX[exponent]}"


def canonical(value, round_milli: bool = False) -> str:
    """The canonical text of a quantity given as a string or a JSON number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(FORMAT_ERROR)
    return _canonical(value if isinstance(value, str) else repr(value), round_milli)


@functools.lru_cache(maxsize=4096)
def _canonical(text: str, round_milli: bool) -> str:
    amount, fmt = parse(text)
    if round_milli:
        amount = round_up(amount)
    return format_quantity(amount, fmt)
