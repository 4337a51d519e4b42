"""The one parser of sizes and durations: options (`merge.targetSize=2G`), SQL clauses (`TARGET
SIZE 100 M`, `OLDER THAN 7 DAYS`), command-line flags (`--target-size 1T`, `--older-than 36h`) and
table function arguments all read them here, with one grammar.

Size: a number of bytes, or a number and a unit (case-insensitive, space between allowed):

    <number> [B | K | KB | M | MB | G | GB | T | TB]      K = 1024 bytes; 1.5G, 100 M, 512k, 1T

Duration (in hours): a number and a unit (case-insensitive, space between allowed):

    <number> [H | HOUR | HOURS | D | DAY | DAYS]          7d, 36h, 2 days, 1.5 DAY

Short duration (in milliseconds; options such as `read.stalenessLimit`):

    <number> [MS | S | SEC | M | MIN | H | D]                0, 500ms, 2s, 1.5 s, 1m

<number> is digits with an optional fraction (`1.5`, `.5`) or exponent (`1e3`), no sign. A bare number is bytes,
hours (durations) or milliseconds (short durations, as Spark's time settings); the SQL grammar requires a duration's
unit (`OLDER THAN 7 DAYS`).
"""

from __future__ import annotations

import re

SIZE_UNITS: dict[str, int] = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "T": 1 << 40,
    "TB": 1 << 40,
}
MILLIS_UNITS: dict[str, float] = {
    "": 1.0,
    "MS": 1.0,
    "S": 1000.0,
    "SEC": 1000.0,
    "M": 60_000.0,
    "MIN": 60_000.0,
    "H": 3_600_000.0,
    "D": 86_400_000.0,
}
HOUR_UNITS: dict[str, float] = {"H": 1.0, "HOUR": 1.0, "HOURS": 1.0, "D": 24.0, "DAY": 24.0, "DAYS": 24.0}

_NUMBER_UNIT = re.compile(r"\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*")


class UnitError(ValueError):
    """Text that is no size or duration; the message says what was expected."""


def split_number(text: str) -> tuple[str, str] | None:
    """`100 m` → ("100", "m"); None when the text is not a number with an optional word after it."""
    m = _NUMBER_UNIT.fullmatch(text)
    return (m.group(1), m.group(2)) if m else None


def size_bytes(number: str, unit: str) -> int:
    """A number and one of SIZE_UNITS → bytes."""
    if unit.upper() not in SIZE_UNITS:
        raise UnitError(f"unknown size unit {unit!r} (use K, M, G or T)")
    try:
        return int(float(number) * SIZE_UNITS[unit.upper()])
    except OverflowError:  # 1e400
        raise UnitError(f"size {number}{unit} is too large") from None


def parse_size(text: str) -> int:
    """A size (see the module's grammar) → bytes."""
    parts = split_number(text)
    if parts is None or parts[1].upper() not in SIZE_UNITS:
        raise UnitError(f"expected a size like 100M or 2G, got {text!r}")
    return size_bytes(*parts)


def parse_hours(text: str) -> float:
    """A duration (see the module's grammar; a bare number is hours) → hours."""
    parts = split_number(text)
    if parts is None or (parts[1] and parts[1].upper() not in HOUR_UNITS):
        raise UnitError(f"expected a duration like 7d or 36h, got {text!r}")
    number, unit = parts
    return float(number) * HOUR_UNITS.get(unit.upper(), 1.0)


def parse_millis(text: str) -> int:
    """A short duration (see the module's grammar; a bare number is milliseconds) → milliseconds."""
    parts = split_number(text)
    if parts is None or parts[1].upper() not in MILLIS_UNITS:
        raise UnitError(f"expected a duration like 0, 500ms or 2s, got {text!r}")
    number, unit = parts
    try:
        return int(float(number) * MILLIS_UNITS[unit.upper()])
    except OverflowError:  # 1e400
        raise UnitError(f"duration {text.strip()} is too long") from None
