"""Java's arithmetic and number formats, where Python's differ and the JVM backend's results or
messages depend on them (the two backends give the same values and the same words)."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal


def java_int(value: float) -> int:
    """Java's ``(int)`` of a double: toward zero, NaN to 0, saturated at the int range."""
    if value != value:
        return 0
    if value >= 2147483647.0:
        return 2147483647
    if value <= -2147483648.0:
        return -2147483648
    return int(value)


def java_max(a: float, b: float) -> float:
    """Java's ``Math.max`` of doubles: NaN wins, and 0.0 is over -0.0."""
    if a != a or b != b:
        return math.nan
    if a == b == 0.0:
        return a if math.copysign(1.0, a) > 0 else b
    return a if a > b else b


def java_min(a: float, b: float) -> float:
    """Java's ``Math.min`` of doubles: NaN wins, and -0.0 is under 0.0."""
    if a != a or b != b:
        return math.nan
    if a == b == 0.0:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def java_double(value: float | None) -> str:
    """Java's ``Double.toString`` (its shortest digits): ``0.25``, ``1.0``, ``1.0E-4``, ``NaN``;
    ``null`` for a missing value, as Scala's ``mkString`` shows one."""
    if value is None:
        return "null"
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    _, all_digits, exponent = Decimal(repr(abs(value))).as_tuple()
    written = "".join(map(str, all_digits))
    digits = written.rstrip("0")
    # The value is 0.<digits> x 10^point.
    point = len(written) + int(exponent)
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def megapixels(pixels: int) -> str:
    """``12.3 MP``, rounded half up as Java's ``%.1f`` rounds."""
    return f"{Decimal(repr(pixels / 1e6)).quantize(Decimal('0.1'), ROUND_HALF_UP)} MP"


def megabytes(size: int) -> str:
    """``1.5 MB`` (MiB), rounded half up as Java's ``%.1f`` rounds."""
    return f"{Decimal(repr(size / 1048576)).quantize(Decimal('0.1'), ROUND_HALF_UP)} MB"
