"""Resource quantities ("500m", "2", "1Gi", "1e3") as k8s.io/apimachinery v1.34 reads and writes
them (staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go and suffix.go): the one
implementation the embedded API server, its admission plugins, and every lab that reads Pods
(resources, numa, mounts, scheduler) share, so a malformed quantity gets kube-apiserver's words
wherever it is read.

* `parse(text)` is `ParseQuantity`: `parseQuantityString` scans a sign, digits, an optional
  fraction, then a suffix made of the letters "eEinumkKMGTP", an optional sign and digits. Any
  other character (a space included) is `ErrFormatWrong`; a suffix that is no known one
  (`interpret`) is `ErrSuffix`; a number that has no digit where the slow path needs one is
  `ErrNumeric`. Quirks kept: "", alone, is refused, but "+", "-", "." and "1." read as numbers
  ("1.G" is 1G). A non-zero value is rounded up (away from zero) to a whole nano; a BinarySI
  amount saturates at 2^63-1 and one below 1 becomes DecimalSI.
* JSON and YAML: `Quantity.UnmarshalJSON` trims surrounding white space first (`canonical`,
  `Quantity.parse`); a JSON number is read as its text.
* `format_quantity(value, format)` is `Quantity.String()` (`CanonicalizeBytes`): BinarySI only for
  whole values of at least 1024 in magnitude, otherwise DecimalSI; the mantissa is an integer
  and the exponent a multiple of 3 (`1000m` -> `1`, `0.5` -> `500m`, `1024Mi` -> `1Gi`,
  `1.5Ki` -> `1536`).
* `Quantity` is the value object kubelet's managers use: `Value()` and `MilliValue()` round up,
  `AsInt64()` only for whole numbers, `Add` takes the addend's format when the sum was zero.

One bound of labkit's own: a decimal exponent (`1e400`) beyond +-1000 is refused as an unknown
suffix. v1.34.1 truncates the exponent to int32 and then computes the whole number, which no real
value needs; labkit will not spend a machine's memory on it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from labkit.errors import ConfigError

BINARY = "BinarySI"
DECIMAL = "DecimalSI"
EXPONENT = "DecimalExponent"

# quantity.go: splitREString and the three parse errors, word for word
PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_ERROR = f"quantities must match the regular expression '{PATTERN}'"
NUMERIC_ERROR = "unable to parse numeric part of quantity"
SUFFIX_ERROR = "unable to parse quantity's suffix"

_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}        # powers of 2
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {exp: suffix for suffix, exp in _BINARY_SUFFIXES.items()}
_NANO = Fraction(1, 10 ** 9)
_MAX_ALLOWED = 2 ** 63 - 1            # quantity.go maxAllowed (int64 max), BinarySI's cap
_INT64_DIGITS = 18                    # quantity.go maxInt64Factors
_EXPONENT_BOUND = 1000                # labkit's own bound, see the module docstring


class QuantityError(ValueError):
    """A quantity ParseQuantity refuses; str() is upstream's error text."""


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """parseQuantityString: (positive, value, num, denom, suffix); raises ErrFormatWrong."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":          # leading zeros
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(FORMAT_ERROR)
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    """suffixHandler.interpret: (base, exponent, format); raises ErrSuffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and set(body) <= _DIGITS:                     # strconv.ParseInt(s[1:], 10, 64)
            exponent = int(digits)
            if -(2 ** 63) <= exponent < 2 ** 63:
                exponent = (exponent + 2 ** 31) % 2 ** 32 - 2 ** 31      # int32(parsed)
                if abs(exponent) <= _EXPONENT_BOUND:
                    return 10, exponent, EXPONENT
    raise QuantityError(SUFFIX_ERROR)


def parse(text: str) -> tuple[Fraction, str]:
    """ParseQuantity: (value, format), the format "BinarySI", "DecimalSI" or "DecimalExponent"."""
    if not isinstance(text, str) or text == "":
        raise QuantityError(FORMAT_ERROR)
    if text == "0":
        return Fraction(0), DECIMAL
    positive, value, num, denom, suffix = _scan(text)
    base, exponent, fmt = _interpret(suffix)
    # The fast path (an int64 mantissa) needs no digit; the slow one reads `value` with
    # inf.Dec.SetString, which fails on a number without digits ("." or "-." before "e-20").
    if fmt == BINARY:
        fast = exponent >= 0 and not denom and 15 - len(num) - int(exponent * 3 / 10) - 1 >= 0
    else:
        fast = _INT64_DIGITS - len(num) - len(denom) >= 0 and exponent - len(denom) >= -9
    if not fast and not any(c in _DIGITS for c in value):
        raise QuantityError(NUMERIC_ERROR)
    amount = Fraction(int(num + denom), 10 ** len(denom))
    amount *= Fraction(2) ** exponent if base == 2 else Fraction(10) ** exponent
    if amount != 0:
        amount = math.ceil(amount / _NANO) * _NANO         # inf.RoundUp to nano, on the magnitude
    if fmt == BINARY and amount > _MAX_ALLOWED:
        amount = Fraction(_MAX_ALLOWED)
    if fmt == BINARY and 0 < amount < 1:
        fmt = DECIMAL
    return (amount if positive else -amount), fmt


def round_up(value: Fraction, scale: int = -3) -> Fraction:
    """Quantity.RoundUp(scale): away from zero at 10^scale."""
    unit = Fraction(10) ** scale
    steps = value / unit
    steps = math.ceil(steps) if steps >= 0 else math.floor(steps)
    return steps * unit


def format_quantity(value: Fraction | int, fmt: str) -> str:
    """Quantity.String(): CanonicalizeBytes."""
    value = Fraction(value)
    if value == 0:
        return "0"
    if fmt == BINARY:
        if -1024 < value < 1024 or value.denominator != 1:
            fmt = DECIMAL
        else:
            number, exponent = int(value), 0
            while number % 1024 == 0 and exponent < 60:
                number //= 1024
                exponent += 10
            return f"{number}{_BINARY_BY_EXPONENT.get(exponent, '')}"
    # decimal: an integer mantissa and the smallest exponent that is a multiple of 3
    exponent = 0
    while value.denominator != 1:
        value *= 1000
        exponent -= 3
    number = int(value)
    while number != 0 and number % 1000 == 0 and exponent < 18:
        number //= 1000
        exponent += 3
    if fmt == EXPONENT:
        return f"{number}e{exponent}" if exponent else str(number)
    if exponent < -9:       # below nano (only arithmetic gets there): written with an exponent
        return f"{number}e{exponent}"
    return f"{number}{_DECIMAL_BY_EXPONENT[exponent]}"


def _json_text(value) -> str:
    """The text UnmarshalJSON parses: a string trimmed of white space, a number as written."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(FORMAT_ERROR)
    return value.strip() if isinstance(value, str) else repr(value)


def canonical(value, round_milli: bool = False) -> str:
    """The canonical text of a quantity given as a JSON string or number (UnmarshalJSON then
    String()); `round_milli` first rounds up to milli-units, as SetDefaults_ResourceList does."""
    return _canonical(_json_text(value), round_milli)


@functools.lru_cache(maxsize=4096)
def _canonical(text: str, round_milli: bool) -> str:
    amount, fmt = parse(text)
    if round_milli:
        amount = round_up(amount)
    return format_quantity(amount, fmt)


@dataclass(frozen=True)
class Quantity:
    """resource.Quantity as a value: its amount and the format String() writes it in."""

    value: Fraction
    format: str = DECIMAL

    @classmethod
    def parse(cls, text: str | int | float) -> "Quantity":
        """A quantity from a Pod or a configuration file (UnmarshalJSON: trimmed, numbers as
        their text)."""
        return cls(*parse(_json_text(text)))

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
        return format_quantity(self.value, self.format)


def quantity_map(data, source, where: str) -> dict[str, Quantity]:
    """A map of resource name to quantity as a file labkit reads gives it (a Pod's requests or
    limits, a kubelet configuration's kubeReserved): {} when absent; a ConfigError naming the file
    (`source`) and the field (`where`, `where.<name>`) when it is not one."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(source, where, "expected a map of resource name to quantity")
    out = {}
    for name, value in data.items():
        try:
            out[str(name)] = Quantity.parse(value)
        except QuantityError as exc:
            raise ConfigError(source, f"{where}.{name}", f"{value!r}: {exc}") from None
    return out
