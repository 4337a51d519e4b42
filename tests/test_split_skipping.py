"""Data skipping: skip_split never skips a split that holds a matching row (property test)."""

from __future__ import annotations

import datetime as dt
import decimal
import random

import pyarrow as pa
import pytest

from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.config.options import Options
from indextables_spark.expr.arrow_eval import arrow_mask
from indextables_spark.expr.model import (
    And,
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    Or,
    StringContains,
    StringStartsWith,
)
from indextables_spark.core.split.read.skipping import skip_split
from indextables_spark.core.split.write.builder import SplitWriter
from indextables_spark.core.split.format.stats import StatsCollector, decode_stat, encode_stat, increment_string
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.split.format.column_specs import validate_schema
from indextables_spark.core.storage.local import LocalStorage

UTC = dt.timezone.utc
D = decimal.Decimal


def field(name, t):
    return {"name": name, "type": t, "nullable": True, "metadata": {}}


SCHEMA = {
    "type": "struct",
    "fields": [
        field("n", "long"),
        field("x", "double"),
        field("s", "string"),
        field("day", "date"),
        field("ts", "timestamp"),
        field("dec", "decimal(12,3)"),
        field("flag", "boolean"),
        field("bin", "binary"),
    ],
}
SPECS = validate_schema(SCHEMA, [], Options())
CHARS = ["a", "b", "z", "é", "ÿ", "\ud7ff", "\ue000", "\uffff", "\U0010ffff", "\U0001f680", " "]


def rand_value(rng, col, center):
    if col == "n":
        return center + rng.randint(-20, 20)
    if col == "x":
        return rng.choice(
            [center + rng.uniform(-5, 5), float("nan"), float("inf"), float("-inf"), -0.0, 0.0, float(center)]
        )
    if col == "s":
        return "".join(rng.choice(CHARS[center % 4 : center % 4 + 6]) for _ in range(rng.randint(0, 6)))
    if col == "day":
        return dt.date(2024, 1, 1) + dt.timedelta(days=center + rng.randint(-10, 10))
    if col == "ts":
        return dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(
            hours=center, microseconds=rng.randint(-(10**7), 10**7)
        )
    if col == "dec":
        return D(center * 1000 + rng.randint(-5000, 5000)).scaleb(-3)
    if col == "flag":
        return rng.random() < (center % 3) / 2
    return bytes([rng.randint(0, 255)])


def rand_batch(rng, center):
    n = rng.randint(1, 25)
    null_p = rng.choice([0.0, 0.2, 1.0])
    rows = [
        {
            c: (None if rng.random() < null_p else rand_value(rng, c, center))
            for c in ("n", "x", "s", "day", "ts", "dec", "flag", "bin")
        }
        for _ in range(n)
    ]
    return pa.Table.from_pylist(rows, schema=arrow_schema(SCHEMA)).to_batches()[0]


def rand_filter(rng, batch):
    col = rng.choice(["n", "x", "s", "day", "ts", "dec", "flag"])
    existing = [v for v in batch.column(col).to_pylist() if v is not None]
    v = rng.choice(existing) if existing and rng.random() < 0.5 else rand_value(rng, col, rng.randint(0, 40))
    if col == "s" and rng.random() < 0.3:
        return StringStartsWith("s", v[: rng.randint(0, 3)])
    if rng.random() < 0.1:
        return rng.choice([IsNull(col), IsNotNull(col), Not(IsNull(col)), EqualNullSafe(col, None)])
    if rng.random() < 0.15:
        return In(col, tuple(rng.choice([v, None, rand_value(rng, col, rng.randint(0, 40))]) for _ in range(3)))
    cls = rng.choice([EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual])
    f = cls(col, v)
    r = rng.random()
    if r < 0.1:
        return And(f, rand_filter(rng, batch))
    if r < 0.2:
        return Or(f, rand_filter(rng, batch))
    return f


def add_file_for(batch, max_length, num_records=True):
    stats = StatsCollector(SPECS, 32, max_length)
    stats.add(batch)
    mins, maxs = stats.min_max_values()
    return AddFile(
        path="splits/x.split",
        partition_values={},
        size=1,
        modification_time=0,
        stats=stats.stats_json(),
        min_values=mins,
        max_values=maxs,
        num_records=batch.num_rows if num_records else None,
    )


def test_skip_split_never_skips_a_matching_split():
    rng = random.Random(11)
    skipped = checked = 0
    for trial in range(400):
        batch = rand_batch(rng, rng.randint(0, 40))
        add = add_file_for(batch, rng.choice([1, 2, 3, 32, None]))
        for _ in range(15):
            flt = [rand_filter(rng, batch) for _ in range(rng.randint(1, 2))]
            any_match = arrow_mask(batch, flt).to_pylist().count(True) > 0
            if skip_split(add, flt, SPECS):
                skipped += 1
                assert not any_match, (flt, batch.to_pylist(), add.min_values, add.max_values)
            checked += 1
    assert skipped > checked // 10  # the property is not vacuous


def test_skipping_on_real_splits(tmp_path):
    storage = LocalStorage(str(tmp_path / "t"))
    rng = random.Random(5)
    batches, adds = [], []
    for center in (0, 20, 40):
        b = rand_batch(rng, center)
        w = SplitWriter(storage, SCHEMA, [], Options())
        w.write_batch(b)
        adds.extend(w.finish())
        batches.append(b)
    for _ in range(200):
        flt = [rand_filter(rng, rng.choice(batches))]
        for b, a in zip(batches, adds):
            if skip_split(a, flt, SPECS):
                assert arrow_mask(b, flt).to_pylist().count(True) == 0, flt


def test_skip_split_examples():
    a = AddFile(
        path="p",
        partition_values={},
        size=1,
        modification_time=0,
        num_records=10,
        min_values={"n": "10", "s": "b", "x": "-1.5", "day": "2024-01-05", "dec": "1.500"},
        max_values={"n": "20", "s": "d", "x": "NaN", "day": "2024-01-09", "dec": "2.000"},
        stats='{"numRecords":10,"nullCount":{"n":0,"s":3,"flag":10}}',
    )
    skip = lambda *fs: skip_split(a, list(fs), SPECS)  # noqa: E731
    assert skip(EqualTo("n", 21)) and skip(EqualTo("n", 9)) and not skip(EqualTo("n", 15))
    assert skip(GreaterThan("n", 20)) and not skip(GreaterThanOrEqual("n", 20))
    assert skip(LessThan("n", 10)) and not skip(LessThanOrEqual("n", 10))
    assert skip(In("n", (1, 30, None))) and not skip(In("n", (1, 15)))
    assert skip(StringStartsWith("s", "e")) and skip(StringStartsWith("s", "a"))
    assert not skip(StringStartsWith("s", "c")) and not skip(StringStartsWith("s", "b"))
    assert not skip(StringStartsWith("s", "")) and not skip(StringContains("s", "zzz"))
    assert not skip(EqualTo("x", float("nan"))) and not skip(GreaterThan("x", 1e300))
    assert skip(GreaterThan("x", float("nan")))  # nothing is above NaN
    assert skip(EqualTo("day", dt.date(2024, 1, 4))) and not skip(EqualTo("day", dt.date(2024, 1, 5)))
    assert skip(GreaterThan("dec", D("2.0001"))) and not skip(GreaterThan("dec", D("1.9999")))
    assert skip(IsNull("n")) and not skip(IsNull("s")) and not skip(IsNotNull("s"))
    assert skip(IsNotNull("flag")) and skip(EqualTo("flag", True))  # all-null column
    assert skip(Not(IsNull("flag"))) and not skip(Not(IsNotNull("flag")))
    assert skip(Or(EqualTo("n", 1), EqualTo("n", 2))) and not skip(Or(EqualTo("n", 1), EqualTo("n", 12)))
    assert skip(And(EqualTo("n", 12), EqualTo("n", 1)))
    assert not skip(Not(EqualTo("n", 15)))
    assert not skip(EqualTo("n", "15"))  # wrong value type: never skip
    assert not skip(EqualTo("zzz", 1))  # unknown column: never skip
    bad = AddFile(
        path="p",
        partition_values={},
        size=1,
        modification_time=0,
        min_values={"n": "not-a-number"},
        max_values={"n": "also-not"},
    )
    assert not skip_split(bad, [EqualTo("n", 5)], SPECS)  # unreadable stats only disable skipping


@pytest.mark.parametrize(
    "s, cut, want",
    [
        ("abc", 2, "ac"),
        ("a\U0010ffff\U0010ffff", 2, "b"),
        ("\U0010ffff\U0010ffff", 1, None),
        ("a\ud7ffz", 2, "a\ue000"),
        ("short", 32, "short"),
    ],
)
def test_truncated_max_is_an_upper_bound(s, cut, want):
    got = encode_stat("string", s, is_max=True, max_length=cut)
    assert got == want
    if got is not None:
        assert got.encode() >= s.encode()
    assert encode_stat("string", s, is_max=False, max_length=cut) == s[:cut]
    assert increment_string("") is None


def test_stat_codec_round_trip():
    for kind, v in [
        ("i64", -5),
        ("f64", 0.1),
        ("f64", float("inf")),
        ("decimal", D("-1.230")),
        ("bool", True),
        ("date", 19723),
        ("timestamp", 1704067200000001),
        ("string", "x"),
    ]:
        assert decode_stat(kind, encode_stat(kind, v, is_max=False, max_length=None)) == v
    assert encode_stat("date", 10**9, is_max=True, max_length=None) is None  # outside 0001-9999
