"""Resource quantities ("500m", "2", "1Gi", "1e3"), as `k8s.io/apimachinery/pkg/api/resource` has them.

Only what kubelet's resource managers use: exact values, `Value()` and `MilliValue()` (both round
up), `AsInt64()` (whole numbers only), comparison, `Add` (a zero sum takes the addend's format) and
the canonical `String()` kubelet prints in its error messages ("16484Mi", "1500m", "1k").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

BINARY = "BinarySI"
DECIMAL = "DecimalSI"
EXPONENT = "DecimalExponent"

_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = {power: suffix for suffix, power in _BINARY_SUFFIXES.items()}
_SYNTAX = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
REGEXP_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


class QuantityError(ValueError):
    pass


@dataclass(frozen=True)
class Quantity:
    value: Fraction
    format: str = DECIMAL

    @classmethod
    def parse(cls, text: str | int | float) -> "Quantity":
        """resource.ParseQuantity; ints and floats as YAML gives them are read as their decimal text."""
        if isinstance(text, bool):
            raise QuantityError(REGEXP_ERROR)
        if isinstance(text, (int, float)):
            text = repr(text) if isinstance(text, float) else str(text)
        text = str(text).strip()
        match = _SYNTAX.match(text)
        if not match or not text:
            raise QuantityError(REGEXP_ERROR)
        number, suffix = match.groups()
        value = Fraction(number)
        if suffix in _BINARY_SUFFIXES:
            return cls(value * 1024 ** _BINARY_SUFFIXES[suffix], BINARY)
        if suffix in _DECIMAL_SUFFIXES:
            return cls(value * Fraction(10) ** _DECIMAL_SUFFIXES[suffix], DECIMAL)
        exponent = _EXPONENT.match(suffix)
        if exponent:
            return cls(value * Fraction(10) ** int(exponent.group(1)), EXPONENT)
        raise QuantityError("unable to parse quantity's suffix")

    @classmethod
    def of(cls, value: int | Fraction, fmt: str = DECIMAL) -> "Quantity":
        return cls(Fraction(value), fmt)

    def is_zero(self) -> bool:
        return self.value == 0

    def value_int(self) -> int:
        """Value(): rounded up to an integer."""
        return math.ceil(self.value)

    def milli_value(self) -> int:
        """MilliValue(): value * 1000, rounded up."""
        return math.ceil(self.value * 1000)

    def as_int64(self) -> int | None:
        """AsInt64(): the value if it is a whole number in int64 range, else None."""
        if self.value.denominator != 1 or not -(2 ** 63) <= self.value < 2 ** 63:
            return None
        return int(self.value)

    def add(self, other: "Quantity") -> "Quantity":
        fmt = other.format if self.value == 0 else self.format
        return Quantity(self.value + other.value, fmt)

    def __str__(self) -> str:
        return canonical(self.value, self.format)


def canonical(value: Fraction, fmt: str) -> str:
    """Quantity.String(): the canonical form kubelet prints."""
    if fmt == BINARY and (-1024 < value < 1024 or value.denominator != 1):
        fmt = DECIMAL
    if fmt == BINARY:
        number, power = int(value), 0
        while power < 6 and number != 0 and number % 1024 == 0:
            number //= 1024
            power += 1
        return f"{number}{_BINARY_BY_POWER.get(power, '')}"
    mantissa, exponent = _base10(value)
    if fmt == EXPONENT:
        return f"{mantissa}" if exponent == 0 else f"{mantissa}e{exponent}"
    return f"{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"


def _base10(value: Fraction) -> tuple[int, int]:
    """Integer mantissa and an exponent that is a multiple of 3 in [-9, 18]; rounds up below nano."""
    exponent = -9
    mantissa = math.ceil(value * 10 ** 9)
    while exponent < 18 and mantissa != 0 and mantissa % 1000 == 0:
        mantissa //= 1000
        exponent += 3
    if mantissa == 0:
        exponent = 0
    return mantissa, exponent
