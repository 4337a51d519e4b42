"""The lenient reading of partition values and literals that partition predicates share (values are
stored as text; a numeric column's compare as numbers when they are numbers): Spark type classes,
a literal's text, a value as a number, the comparison classes by operator."""

from __future__ import annotations

import re
from typing import Any

from indextables_spark.expr.model import (
    Comparison,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    LessThan,
    LessThanOrEqual,
)


INTEGRAL_TYPES = frozenset({"byte", "short", "integer", "int", "long", "bigint", "tinyint", "smallint"})
FRACTIONAL_TYPES = frozenset({"float", "double", "real"})

CLASS_OF: dict[str, type[Comparison]] = {
    "=": EqualTo,
    "<": LessThan,
    "<=": LessThanOrEqual,
    ">": GreaterThan,
    ">=": GreaterThanOrEqual,
}
OP_OF: dict[type[Filter], str] = {cls: op for op, cls in CLASS_OF.items()}


def is_integral(t: str) -> bool:
    return t.lower() in INTEGRAL_TYPES


def is_numeric(t: str) -> bool:
    tl = t.lower()
    return tl in INTEGRAL_TYPES or tl in FRACTIONAL_TYPES or tl.startswith("decimal")


def literal_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        s = str(value).strip()
        return int(s) if re.fullmatch(r"[-+]?\d+", s) else float(s)
    except ValueError:
        return None
