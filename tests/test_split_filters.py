"""Differential test: SplitReader.read with filters equals a plain-Python Spark-semantics reference.

Also checks, for every filter, that tantivy_query matches a superset of the right rows, that
count() agrees, and unit cases of arrow_mask / supports / prune_partition.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import random

import pyarrow as pa
import pytest

from indextables_spark.config.options import Options
from indextables_spark.errors import IndexTablesError
from indextables_spark.expr.arrow_eval import arrow_mask
from indextables_spark.core.split.read.skipping import prune_partition
from indextables_spark.expr.support import supports
from indextables_spark.core.split.read.tantivy_query import tantivy_query
from indextables_spark.expr.values import UnsupportedFilterError
from indextables_spark.core.split.write.builder import SplitWriter
from indextables_spark.core.split.cache.cache import get_cache
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
    StringEndsWith,
    StringStartsWith,
)
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.split.format.column_specs import column_specs
from indextables_spark.core.schema.types import ROW_FIELD
from indextables_spark.core.storage.local import LocalStorage

UTC = dt.timezone.utc
D = decimal.Decimal
N_ROWS = 12_000
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "Spark",
    "search",
    "émoji🚀",
    "zeta",
    "",
    "Al",
    "a%b_c",
    "ÿ",
    "\u00e9t\u00e9",
]


def field(name, t):
    return {"name": name, "type": t, "nullable": True, "metadata": {}}


SCHEMA = {
    "type": "struct",
    "fields": [
        field("id", "long"),
        field("s", "string"),
        field("t", "string"),
        field("ts2", "string"),
        field("n", "integer"),
        field("b", "byte"),
        field("x", "double"),
        field("f", "float"),
        field("day", "date"),
        field("ts", "timestamp"),
        field("ntz", "timestamp_ntz"),
        field("flag", "boolean"),
        field("dec", "decimal(10,2)"),
        field("big", "decimal(38,18)"),
        field("bin", "binary"),
        field("tags", {"type": "array", "elementType": "string", "containsNull": True}),
    ],
}
OPTIONS = Options.of({"indexing.typemap.t": "text", "indexing.typemap.ts2": "text_and_string"})
BASE_TS = dt.datetime(2024, 1, 1, tzinfo=UTC)
F32_TENTH = 0.10000000149011612  # float32(0.1) as a double


def make_rows() -> list[dict]:
    rng = random.Random(7)

    def maybe(v, p=0.06):
        return None if rng.random() < p else v

    rows = []
    for i in range(N_ROWS):
        x = rng.choice([rng.uniform(-10, 10), 0.5, 0.25, float("nan"), float("inf"), float("-inf"), 1.0, -0.0, 0.0])
        rows.append(
            {
                "id": i,
                "s": maybe(rng.choice(WORDS)),
                "t": maybe(" ".join(rng.choice(WORDS[:8]) for _ in range(rng.randint(1, 3)))),
                "ts2": maybe(rng.choice(["Alpha Beta", "gamma", "Delta delta", "beta", ""])),
                "n": maybe(rng.randint(-5, 1000)),
                "b": maybe(rng.randint(-128, 127)),
                "x": maybe(x),
                "f": maybe(rng.choice([F32_TENTH, 1.5, float("nan"), -2.0, 3.25])),
                "day": maybe(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 365))),
                "ts": maybe(
                    BASE_TS + dt.timedelta(seconds=rng.randint(0, 365 * 86400), microseconds=rng.randint(0, 999999))
                    if rng.random() > 0.02
                    else BASE_TS
                ),
                "ntz": maybe(dt.datetime(2024, 1, 1) + dt.timedelta(minutes=rng.randint(0, 100_000))),
                "flag": maybe(rng.random() < 0.5),
                "dec": maybe(D(rng.randint(-10000, 10000)) / 100 if rng.random() > 0.1 else D("1.25")),
                "big": maybe(
                    D(rng.randint(-(10**20), 10**20)).scaleb(-18)
                    if rng.random() > 0.1
                    else D("12345678901234567890.123456789012345678")
                ),
                "bin": maybe(bytes([rng.randint(0, 255) for _ in range(rng.randint(0, 3))])),
                "tags": maybe([rng.choice(WORDS) for _ in range(rng.randint(0, 2))]),
            }
        )
    return rows


FILTERS = [
    # string (raw, exact)
    EqualTo("s", "alpha"),
    Not(EqualTo("s", "beta")),
    GreaterThan("s", "delta"),
    GreaterThanOrEqual("s", "delta"),
    LessThan("s", "beta"),
    LessThanOrEqual("s", "beta"),
    In("s", ("alpha", "zeta", "nope")),
    In("s", ("alpha", None)),
    Not(In("s", ("alpha", "beta"))),
    Not(In("s", ("alpha", None))),
    IsNull("s"),
    IsNotNull("s"),
    StringStartsWith("s", "al"),
    StringStartsWith("s", "Al"),
    StringEndsWith("s", "ta"),
    StringContains("s", "mm"),
    StringContains("s", "%b_"),
    Not(StringStartsWith("s", "b")),
    EqualTo("s", ""),
    EqualNullSafe("s", None),
    EqualNullSafe("s", "gamma"),
    Not(EqualNullSafe("s", "gamma")),
    EqualTo("s", "émoji🚀"),
    GreaterThan("s", "zeta"),
    LessThan("s", "ÿ"),
    GreaterThan("s", "é"),
    StringStartsWith("s", ""),
    EqualTo("s", None),
    Not(EqualTo("s", None)),
    In("s", tuple(WORDS[:10])),
    # text (tokenized): exact semantics on the stored value
    EqualTo("t", "alpha beta"),
    StringContains("t", "Spark"),
    StringStartsWith("t", "gamma"),
    StringEndsWith("t", "delta"),
    IsNull("t"),
    In("t", ("alpha beta", "zeta")),
    GreaterThan("t", "m"),
    StringContains("t", "spark"),
    # text_and_string
    EqualTo("ts2", "Alpha Beta"),
    StringStartsWith("ts2", "Del"),
    In("ts2", ("gamma", "beta")),
    LessThan("ts2", "b"),
    # integers
    EqualTo("n", 42),
    Not(EqualTo("n", 42)),
    GreaterThan("n", 900),
    GreaterThanOrEqual("n", 990),
    LessThan("n", 5),
    LessThanOrEqual("n", 5),
    In("n", (1, 2, 3, 999)),
    In("n", tuple(range(0, 1000, 7))),
    IsNull("n"),
    Not(GreaterThan("n", 10)),
    And(GreaterThanOrEqual("n", 100), LessThanOrEqual("n", 120)),
    EqualNullSafe("n", None),
    EqualTo("b", -128),
    GreaterThan("b", 1000),
    LessThan("b", 1000),
    EqualTo("b", 1 << 70),
    In("n", (None,)),
    # doubles with NaN, infinities and signed zeros
    EqualTo("x", 0.5),
    GreaterThan("x", 0.9),
    LessThan("x", 0.1),
    GreaterThanOrEqual("x", 1.0),
    EqualTo("x", float("nan")),
    GreaterThan("x", 100.0),
    LessThanOrEqual("x", float("-inf")),
    IsNull("x"),
    Not(LessThan("x", 0.5)),
    In("x", (0.25, 0.5)),
    EqualTo("x", 0.0),
    EqualTo("x", -0.0),
    GreaterThan("x", float("nan")),
    GreaterThanOrEqual("x", float("nan")),
    LessThan("x", float("nan")),
    EqualTo("x", float("inf")),
    In("x", (float("nan"), 1.0)),
    Not(EqualTo("x", float("nan"))),
    EqualTo("x", 1),
    # floats (float32)
    EqualTo("f", F32_TENTH),
    EqualTo("f", 0.1),
    GreaterThan("f", 0.1),
    EqualTo("f", float("nan")),
    LessThan("f", 0.0),
    # dates and timestamps
    EqualTo("day", dt.date(2024, 2, 29)),
    GreaterThan("day", dt.date(2024, 12, 1)),
    And(GreaterThanOrEqual("day", dt.date(2024, 3, 1)), LessThanOrEqual("day", dt.date(2024, 3, 5))),
    In("day", (dt.date(2024, 1, 1), dt.date(2024, 7, 4))),
    GreaterThan("ts", dt.datetime(2024, 6, 1, tzinfo=UTC)),
    LessThanOrEqual("ts", dt.datetime(2024, 1, 2, tzinfo=UTC)),
    EqualTo("ts", BASE_TS),
    IsNull("ts"),
    Not(EqualTo("ts", BASE_TS)),
    GreaterThan("ts", dt.datetime(2024, 6, 1, 2, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))),
    LessThan("ntz", dt.datetime(2024, 1, 5)),
    EqualTo("ntz", dt.datetime(2024, 1, 1)),
    # booleans
    EqualTo("flag", True),
    Not(EqualTo("flag", True)),
    EqualTo("flag", False),
    IsNull("flag"),
    EqualNullSafe("flag", True),
    GreaterThan("flag", False),
    In("flag", (False, None)),
    # decimals (exact)
    EqualTo("dec", D("1.25")),
    GreaterThan("dec", D(50)),
    LessThan("dec", D("-50.5")),
    In("dec", (D("0.00"), D("1.25"))),
    EqualTo("dec", D("1.250")),
    EqualTo("dec", D("1.255")),
    GreaterThan("dec", D("1.255")),
    LessThanOrEqual("dec", D("-1.255")),
    GreaterThanOrEqual("dec", D("1.249")),
    LessThan("dec", D("1e20")),
    GreaterThan("dec", D("-1e20")),
    EqualTo("dec", 1),
    LessThan("dec", D("1e400")),
    EqualTo("dec", D("1e-400")),
    GreaterThan("dec", D("-1E+500")),
    In("dec", (D("1e400"), D("1.25"))),
    In("big", (D("-1e999"),)),
    EqualTo("big", D("12345678901234567890.123456789012345678")),
    GreaterThan("big", D("12.000000000000000001")),
    LessThan("big", D("-50.0000000000000000005")),
    Not(EqualTo("big", D("12345678901234567890.123456789012345678"))),
    # binary
    EqualTo("bin", b""),
    GreaterThan("bin", b"\x80"),
    In("bin", (b"\x01", b"\xff\xff")),
    IsNull("bin"),
    # nested column: null checks only
    IsNull("tags"),
    IsNotNull("tags"),
    # combinations
    And(EqualTo("s", "alpha"), GreaterThan("n", 500)),
    Or(EqualTo("s", "alpha"), EqualTo("flag", True)),
    Or(IsNull("n"), LessThan("x", 0.0)),
    Not(And(EqualTo("s", "alpha"), IsNotNull("n"))),
    Not(Or(EqualTo("s", "beta"), GreaterThan("n", 500))),
    And(Or(EqualTo("s", "zeta"), EqualTo("s", "Al")), Not(IsNull("dec"))),
    Or(And(EqualTo("n", 42), EqualTo("flag", True)), StringContains("t", "delta")),
    Not(Not(EqualTo("s", "gamma"))),
]

# Pairs of filters given together (a conjunction list, as Spark pushes them).
FILTER_LISTS = [
    [EqualTo("s", "alpha"), GreaterThan("n", 100), EqualTo("flag", True)],
    [GreaterThan("x", 0.0), LessThan("day", dt.date(2024, 6, 1)), IsNotNull("dec")],
    [StringStartsWith("s", "a"), Not(IsNull("ts"))],
]


# ------------------------------------------------------------------------------------------
# Reference evaluator: plain Python, Spark SQL semantics, independent of arrow_mask.


def _key(v):
    """Spark ordering key: NaN equal to itself and above all doubles; strings by UTF-8 bytes."""
    if isinstance(v, float):
        return (1, 0.0) if math.isnan(v) else (0, v)
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, decimal.Decimal):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return v


def _coerce(col_value, lit):
    """Bring literal and value to one domain (float column vs int literal, decimal vs int)."""
    if isinstance(col_value, float) and isinstance(lit, int) and not isinstance(lit, bool):
        return col_value, float(lit)
    if isinstance(col_value, decimal.Decimal) and isinstance(lit, int):
        return col_value, decimal.Decimal(lit)
    return col_value, lit


def ref_cmp(op, a, b):
    if a is None or b is None:
        return None
    a, b = _coerce(a, b)
    ka, kb = _key(a), _key(b)
    return {"eq": ka == kb, "gt": ka > kb, "ge": ka >= kb, "lt": ka < kb, "le": ka <= kb}[op]


def ref_eval(f, row):
    if isinstance(f, And):
        l, r = ref_eval(f.left, row), ref_eval(f.right, row)
        if l is False or r is False:
            return False
        return None if l is None or r is None else True
    if isinstance(f, Or):
        l, r = ref_eval(f.left, row), ref_eval(f.right, row)
        if l is True or r is True:
            return True
        return None if l is None or r is None else False
    if isinstance(f, Not):
        v = ref_eval(f.child, row)
        return None if v is None else not v
    v = row[f.column]
    if isinstance(f, IsNull):
        return v is None
    if isinstance(f, IsNotNull):
        return v is not None
    if isinstance(f, EqualNullSafe):
        if v is None or f.value is None:
            return v is None and f.value is None
        return ref_cmp("eq", v, f.value)
    if isinstance(f, In):
        if v is None:
            return None
        if any(x is not None and ref_cmp("eq", v, x) for x in f.values):
            return True
        return None if any(x is None for x in f.values) else False
    if isinstance(f, (StringStartsWith, StringEndsWith, StringContains)):
        if v is None:
            return None
        return {StringStartsWith: v.startswith, StringEndsWith: v.endswith, StringContains: v.__contains__}[type(f)](
            f.value
        )
    op = {EqualTo: "eq", GreaterThan: "gt", GreaterThanOrEqual: "ge", LessThan: "lt", LessThanOrEqual: "le"}[type(f)]
    return ref_cmp(op, v, f.value)


_REF_CACHE: dict[str, list[int]] = {}


def ref_ids(rows, filters):
    key = repr(filters)  # one dataset per module: results are reused across tests
    if key not in _REF_CACHE:
        _REF_CACHE[key] = sorted(r["id"] for r in rows if all(ref_eval(f, r) is True for f in filters))
    return _REF_CACHE[key]


# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("diff")
    storage = LocalStorage(str(root / "t"))
    rows = make_rows()
    # The reference sees the values as Arrow stores them (float32 rounding of f).
    at = pa.Table.from_pylist(rows, schema=arrow_schema(SCHEMA))
    rows = at.to_pylist()
    w = SplitWriter(storage, SCHEMA, [], OPTIONS, target_split_bytes=700_000)
    for b in at.to_batches(max_chunksize=2500):
        w.write_batch(b)
    adds = w.finish()
    assert len(adds) >= 2
    cache = get_cache({"cache.disk.path": str(root / "cache")})
    readers = [SplitReader(cache.local_dir(storage, a)) for a in adds]
    return rows, readers, adds


def test_enough_filters():
    assert len(FILTERS) >= 40


_IDS: dict[str, list[int]] = {}


def _ids_of(reader) -> list[int]:
    """The id column of a split in row order (row position → id)."""
    if reader.local_dir not in _IDS:
        _IDS[reader.local_dir] = [v for b in reader.read(columns=["id"]) for v in b.column("id").to_pylist()]
    return _IDS[reader.local_dir]


def _read_ids(readers, filters, batch_size=1000):
    ids = []
    for r in readers:
        for b in r.read(filters, None, ["id"], batch_size):
            assert b.num_rows <= batch_size
            ids.extend(b.column("id").to_pylist())
    return sorted(ids)


@pytest.mark.parametrize("flt", FILTERS + FILTER_LISTS, ids=repr)
def test_read_matches_reference(table, flt):
    rows, readers, _ = table
    filters = flt if isinstance(flt, list) else [flt]
    specs = readers[0].specs
    assert all(supports(f, specs) for f in filters), filters
    want = ref_ids(rows, filters)
    assert _read_ids(readers, filters) == want
    assert sum(r.count(filters) for r in readers) == len(want)
    # the narrowing query never loses a matching row
    got_superset = set()
    for r in readers:
        q = tantivy_query(r.index, filters, r.specs)
        if q is None:
            return
        searcher = r.index.searcher()
        hits = searcher.search(q, max(1, searcher.num_docs)).hits
        row_ids = searcher.fast_field_values(ROW_FIELD, [a for _, a in hits])
        ids = _ids_of(r)
        got_superset |= {ids[i] for i in row_ids}
    assert set(want) <= got_superset


def test_arrow_mask_against_reference_on_whole_table(table):
    rows, readers, _ = table
    data = pa.Table.from_pylist(rows, schema=arrow_schema(SCHEMA))
    for f in FILTERS:
        mask = arrow_mask(data, [f]).to_pylist()
        assert [rows[i]["id"] for i, m in enumerate(mask) if m] == ref_ids(rows, [f]), f


def test_supports():
    specs = column_specs(
        {
            "type": "struct",
            "fields": [
                field("s", "string"),
                field("n", "long"),
                field("ts", "timestamp"),
                field("ntz", "timestamp_ntz"),
                field("p", "string"),
                field("tags", {"type": "array", "elementType": "string", "containsNull": True}),
            ],
        },
        ["p"],
        Options(),
    )
    assert supports(EqualTo("s", "a"), specs)
    assert supports(EqualTo("`s`", "a"), specs)
    assert not supports(EqualTo("s", 1), specs)
    assert not supports(EqualTo("n", "1"), specs)
    assert not supports(EqualTo("n", 1.5), specs)
    assert not supports(EqualTo("n", True), specs)
    assert not supports(EqualTo("p", "x"), specs)  # partition columns: pruned elsewhere
    assert not supports(EqualTo("zzz", 1), specs)
    assert supports(EqualTo("ts", dt.datetime(2024, 1, 1, tzinfo=UTC)), specs)
    assert not supports(EqualTo("ts", dt.datetime(2024, 1, 1)), specs)  # naive for a tz column
    assert supports(EqualTo("ntz", dt.datetime(2024, 1, 1)), specs)
    assert not supports(EqualTo("ntz", dt.datetime(2024, 1, 1, tzinfo=UTC)), specs)
    assert not supports(StringStartsWith("n", "1"), specs)
    assert supports(IsNull("tags"), specs) and not supports(EqualTo("tags", "a"), specs)
    assert supports(Not(Or(EqualTo("s", "a"), In("n", (1, None)))), specs)
    assert not supports(And(EqualTo("s", "a"), EqualTo("p", "x")), specs)
    with pytest.raises(TypeError, match="unknown filter node str"):  # not a node: fails loudly
        supports("s = 'a'", specs)


def test_arrow_mask_errors_name_column():
    batch = pa.record_batch({"n": pa.array([1, 2])})
    with pytest.raises(IndexTablesError, match="'zzz'"):
        arrow_mask(batch, [EqualTo("zzz", 1)])
    with pytest.raises(UnsupportedFilterError, match="'n'"):
        arrow_mask(batch, [EqualTo("n", "x")])
    assert arrow_mask(batch, []).to_pylist() == [True, True]


def test_prune_partition():
    types = {"region": "string", "day": "date", "n": "integer"}
    cols = ["region", "day", "n"]
    pv = {"region": "eu", "day": "2024-01-02", "n": None}
    keep = lambda fs: prune_partition(pv, fs, cols, types)  # noqa: E731
    assert keep([EqualTo("region", "eu")])
    assert not keep([EqualTo("region", "us")])
    assert keep([In("region", ("us", "eu"))])
    assert not keep([GreaterThan("day", dt.date(2024, 1, 2))])
    assert keep([GreaterThanOrEqual("day", dt.date(2024, 1, 2))])
    assert not keep([EqualTo("n", 1)])  # NULL = 1 is NULL: pruned
    assert not keep([Not(EqualTo("n", 1))])  # NOT NULL is NULL: pruned too
    assert keep([IsNull("n")])
    assert keep([EqualTo("other", 1)])  # not a partition filter: ignored
    assert not keep([Or(EqualTo("region", "us"), EqualTo("n", 3))])
    assert keep([EqualNullSafe("n", None), StringStartsWith("region", "e")])
