"""GROUP BY keys that are calls of the reference's bucket functions (core/split/aggregate/buckets.py):
`indextables_histogram(col, 50.0)`, `indextables_date_histogram(ts, '1h', offset => '6h')`,
`indextables_range(col, 'cheap', NULL, 50.0, ...)`, planned as a BucketKey of the request when
every argument is a literal the index route reads exactly as Spark does; otherwise Unplannable
(Spark computes the statement with the functions spark/bucket_functions.py registers).
Arguments the function refuses raise BucketArgumentError now, before any job."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from indextables_spark.core.split.aggregate import buckets as bk
from indextables_spark.core.split.aggregate.group_aggregate import BucketKey
from indextables_spark.expr.sql_condition import Unplannable

_NUMERIC = ("byte", "short", "integer", "long", "float", "double")
_COLUMN_TYPES = {bk.HISTOGRAM: _NUMERIC, bk.DATE_HISTOGRAM: ("timestamp",), bk.RANGE: _NUMERIC}
_PARAMS = ("interval", "offset", "min_doc_count")  # the histograms' parameters after the column
_PLAIN_DECIMAL = re.compile(r"^([0-9]*)\.?([0-9]*)$")
_MAX_DIGITS = 15  # a decimal literal Spark turns into a double as long / 10^scale: exact below 2^53


def is_bucket_call(e: exp.Expr) -> bool:
    return isinstance(e, exp.Anonymous) and str(e.this).lower() in bk.FUNCTIONS


def bucket_key(
    call: exp.Expr, name: str, column_of: Callable[[exp.Column], str | None], types: dict[str, str]
) -> tuple[BucketKey, str]:
    """(the key, its Spark type name) of a bucket call."""
    assert isinstance(call, exp.Anonymous)
    fn = str(call.this).lower()
    args = list(call.expressions)
    if not args or not isinstance(args[0], exp.Column) or column_of(args[0]) is None:
        raise Unplannable(f"{fn} of something other than a column of the table")
    column = column_of(args[0])
    assert column is not None
    if types[column] not in _COLUMN_TYPES[fn]:
        raise Unplannable(f"{fn} of a {types[column]} column")
    rest = args[1:]
    if fn == bk.RANGE:
        if any(isinstance(a, exp.Kwarg) for a in rest):
            raise Unplannable(f"{fn} with named arguments")
        spec: bk.Bucket = bk.ranges([_literal(a, fn) for a in rest])
    else:
        values = _histogram_args(rest, fn)
        spec = bk.histogram(**values) if fn == bk.HISTOGRAM else bk.date_histogram(**values)
    return BucketKey(name, column, spec), bk.KEY_TYPES[fn]


def _histogram_args(rest: list[exp.Expr], fn: str) -> dict[str, Any]:
    """{interval, offset, min_doc_count} from positional then named arguments, as Spark binds them."""
    out: dict[str, Any] = {}
    named = False
    for i, a in enumerate(rest):
        if isinstance(a, exp.Kwarg):
            named = True
            param = a.this.name.lower()
            if param not in _PARAMS or param in out:
                raise bk.BucketArgumentError(f"{fn}: unknown or repeated argument {a.this.name!r}")
            out[param] = _literal(a.expression, fn)
        elif named or i >= len(_PARAMS):
            raise bk.BucketArgumentError(
                f"{fn}(column, interval [, offset [, min_doc_count]]): too many arguments, or a positional "
                f"argument after a named one"
            )
        else:
            out[_PARAMS[i]] = _literal(a, fn)
    if "interval" not in out:
        raise bk.BucketArgumentError(f"{fn} needs an interval: {fn}(column, interval [, offset [, min_doc_count]])")
    return out


def _literal(e: exp.Expr, fn: str) -> Any:
    """A literal argument's value as Spark reads it (numbers as the doubles Spark casts them to)."""
    if isinstance(e, exp.Null):
        return None
    negative = isinstance(e, exp.Neg)
    if negative:
        e = e.this
    if not isinstance(e, exp.Literal):
        raise Unplannable(f"{fn} with an argument that is not a literal: {e.sql(dialect='spark')}")
    text = str(e.this)
    if e.is_string:
        if negative or "\\" in text or "'" in text:
            raise Unplannable(f"{fn} with the string argument {text!r}")
        return text
    m = _PLAIN_DECIMAL.match(text)
    if m is not None and "." in text:
        digits = (m.group(1) + m.group(2)).lstrip("0")
        if len(digits) > _MAX_DIGITS or len(m.group(2)) > 22:
            raise Unplannable(f"{fn} with the long decimal literal {text}")
    elif m is None and not re.match(r"^[0-9.]+[eE][+-]?[0-9]+$", text):
        raise Unplannable(f"{fn} with the literal {text}")
    value: float | int = int(text) if text.isdigit() else float(text)
    return -value if negative else value
