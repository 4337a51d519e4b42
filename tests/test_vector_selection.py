"""The rows a filtered vector search searches (core/split/read/row_selection.py behind
ReadPlan.row_ids): from the index alone where it answers a filter exactly, from the rows' columns
otherwise, the same rows either way. Each filter kind (equality, range, IN, IS NULL, AND / OR / NOT;
integer, string, timestamp, boolean, float, text and partition columns) is checked against a
brute force over the written rows, through both routes, under positional and value deletes and
time travel; searches keep their recall."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.split.read import row_selection
from indextables_spark.core.split.read.reader import SplitReader

P = "spark.indextables."
DIMS = 8
N = 3000
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)

Row = dict[str, Any]


def _vectors(n: int) -> np.ndarray:
    rng = np.random.default_rng(11)
    centres = rng.standard_normal((20, DIMS)).astype(np.float32) * 4
    return (centres[rng.integers(0, 20, n)] + rng.standard_normal((n, DIMS))).astype(np.float32)


def _rows(x: np.ndarray) -> list[Row]:
    return [
        {
            "id": i,
            "sel": i % 100,
            "name": None if i % 11 == 0 else f"n{i % 7}",
            "opt": None if i % 13 == 0 else i % 5,
            "ts": T0 + dt.timedelta(minutes=i),
            "flag": i % 3 == 0,
            "score": (i % 17) / 17,
            "body": f"w{i % 5} common",
            "day": f"d{i % 3}",
            "emb": x[i].tolist(),
        }
        for i in range(len(x))
    ]


SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("sel", pa.int64()),
        ("name", pa.string()),
        ("opt", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("flag", pa.bool_()),
        ("score", pa.float64()),
        ("body", pa.string()),
        ("day", pa.string()),
        ("emb", pa.list_(pa.float32())),
    ]
)


def _nn(v: Any, f: Callable[[Any], bool]) -> bool:
    """A comparison under SQL semantics: NULL is never true."""
    return v is not None and f(v)


# (where, the brute force over one row): exact in the index (integers, whole strings, timestamps,
# booleans, IS NULL, their AND / OR / NOT), decided by the rows (floats, text), on the partition
# column (pruning) and mixing it with data columns (residual filters)
FILTERS: list[tuple[str, Callable[[Row], bool]]] = [
    ("sel = 7", lambda r: r["sel"] == 7),
    ("sel < 10", lambda r: r["sel"] < 10),
    ("sel >= 95", lambda r: r["sel"] >= 95),
    ("sel IN (1, 2, 3, 50)", lambda r: r["sel"] in (1, 2, 3, 50)),
    ("name = 'n3'", lambda r: r["name"] == "n3"),
    ("name IN ('n1', 'n5')", lambda r: r["name"] in ("n1", "n5")),
    ("name IS NULL", lambda r: r["name"] is None),
    ("name IS NOT NULL AND sel < 20", lambda r: r["name"] is not None and r["sel"] < 20),
    ("opt IS NULL", lambda r: r["opt"] is None),
    ("NOT (opt = 3)", lambda r: _nn(r["opt"], lambda v: v != 3)),
    ("NOT (sel < 50)", lambda r: r["sel"] >= 50),
    ("sel < 5 OR name = 'n2'", lambda r: r["sel"] < 5 or r["name"] == "n2"),
    ("(sel < 30 AND opt = 1) OR opt IS NULL", lambda r: (r["sel"] < 30 and r["opt"] == 1) or r["opt"] is None),
    ("ts >= '2024-01-02 12:00:00'", lambda r: r["ts"] >= T0 + dt.timedelta(hours=36)),
    ("ts < '2024-01-01 05:00:00' AND flag = true", lambda r: r["ts"] < T0 + dt.timedelta(hours=5) and r["flag"]),
    ("flag = false AND sel IN (4, 8)", lambda r: not r["flag"] and r["sel"] in (4, 8)),
    ("score > 0.5", lambda r: r["score"] > 0.5),
    ("score <= 0.25 AND sel < 50", lambda r: r["score"] <= 0.25 and r["sel"] < 50),
    ("body = 'w2 common'", lambda r: r["body"] == "w2 common"),
    ("day = 'd1'", lambda r: r["day"] == "d1"),
    ("day = 'd2' AND sel < 30", lambda r: r["day"] == "d2" and r["sel"] < 30),
    ("day = 'd1' OR sel < 5", lambda r: r["day"] == "d1" or r["sel"] < 5),
    ("NOT (day = 'd0' OR name = 'n6')", lambda r: r["day"] != "d0" and _nn(r["name"], lambda v: v != "n6")),
]


def _write(path: str, data: list[Row]) -> None:
    """The rows in 6 splits (3 partitions, 2 writes), with `emb` a vector column."""
    opts = {P + "indexing.vector.emb": f"{DIMS},cosine", P + "indexing.typemap.body": "text"}
    for half in (data[: N // 2], data[N // 2 :]):
        it.write_table(path, pa.Table.from_pylist(half, schema=SCHEMA), options=opts, partition_by=["day"])


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray, list[Row]]:
    x = _vectors(N)
    data = _rows(x)
    path = str(tmp_path_factory.mktemp("selection") / "t")
    _write(path, data)
    return path, x, data


def _search_all(t: it.IndexTable, q: np.ndarray, where: str, **kw: Any) -> list[int]:
    """Every row the filter selects (the limit exceeds the table), nearest first."""
    got = t.search(vector=q, limit=N + 1, where=where, columns=["id"], **kw)
    return [int(i) for i in got.column("id").to_pylist()]


def _nearest_first(x: np.ndarray, q: np.ndarray, ids: list[int]) -> list[int]:
    a = np.asarray(ids, dtype=np.int64)
    m = x[a].astype(np.float64)
    d = 1 - (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    return [int(i) for i in a[np.lexsort((a, d))]]


@pytest.fixture(params=["index", "rows", "chosen"])
def route(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """index: the index counts and lists its matches whatever they are; rows: every row is checked;
    chosen: as row_selection.py chooses."""
    if request.param != "chosen":
        _force(monkeypatch, request.param == "index")
    return str(request.param)


def _force(monkeypatch: pytest.MonkeyPatch, index: bool) -> None:
    share = 1.0 if index else 0.0
    monkeypatch.setattr(row_selection, "INDEX_FRACTION", share)
    monkeypatch.setattr(row_selection, "NARROW_SCAN_FRACTION", share)
    monkeypatch.setattr(row_selection, "_counted_by_postings", lambda filters, specs: index)


def test_each_filter_selects_the_rows_of_a_brute_force(
    written: tuple[str, np.ndarray, list[Row]], route: str, tmp_path: Path
) -> None:
    path, x, data = written
    t = it.IndexTable(path, options={P + "cache.selections.enabled": "false", P + "cache.disk.path": str(tmp_path)})
    q = x[42] + 0.1
    for where, keep in FILTERS:
        want = [r["id"] for r in data if keep(r)]
        assert want, where  # (every filter keeps some rows)
        assert _search_all(t, q, where) == _nearest_first(x, q, want), (route, where)


def test_deletes_and_time_travel(written: tuple[str, np.ndarray, list[Row]], route: str, tmp_path: Path) -> None:
    """Positional deletes, then a value delete (`name = 'n4'`, kind equality): the deleted rows
    drop out of every filter's selection; the version before them still selects them."""
    _path, x, data = written
    _write(str(tmp_path / "t"), data)
    options = {P + "cache.selections.enabled": "false", P + "cache.disk.path": str(tmp_path / "cache")}
    t = it.IndexTable(str(tmp_path / "t"), options=options)
    before = t.version()
    gone = set(range(0, N, 7)) | {1, 2, 3}
    t.delete(where="id IN (" + ", ".join(str(i) for i in sorted(gone)) + ")")
    t.delete(where="name = 'n4'", kind="equality")
    alive = [r for r in data if r["id"] not in gone and r["name"] != "n4"]
    q = x[7] + 0.2
    for where, keep in FILTERS:
        want = [r["id"] for r in alive if keep(r)]
        assert _search_all(t, q, where) == _nearest_first(x, q, want), (route, where)
    for where, keep in FILTERS[:4] + FILTERS[-2:]:
        want = [r["id"] for r in data if keep(r)]
        assert _search_all(t, q, where, version=before) == _nearest_first(x, q, want), (route, where)


def test_the_index_alone_answers_exact_filters(
    written: tuple[str, np.ndarray, list[Row]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Filters the index answers exactly read no row when it lists their matches; those it cannot
    (a float, a text column, a partition column mixed in) read the rows."""
    path, x, _data = written
    reads: list[list[str] | None] = []
    source = SplitReader.source

    def counted(self: SplitReader, rows: Any, with_ids: bool, columns: Any = None, dead: Any = None) -> Any:
        reads.append(None if columns is None else list(columns))
        return source(self, rows, with_ids, columns, dead)

    monkeypatch.setattr(SplitReader, "source", counted)
    _force(monkeypatch, True)
    t = it.IndexTable(path, options={P + "cache.selections.enabled": "false", P + "cache.disk.path": str(tmp_path)})
    for where in ("sel < 10", "name IN ('n1', 'n5')", "opt IS NULL OR NOT (sel < 50)", "ts >= '2024-01-02 12:00:00'"):
        reads.clear()
        t.search(vector=x[0], limit=5, where=where, columns=["id"])
        assert reads == [], where  # (the winners' rows are taken by id: SplitReader.take)
    for where, read in (("score > 0.5", "score"), ("body = 'w2 common'", "body"), ("day = 'd1' OR sel < 5", "sel")):
        reads.clear()
        t.search(vector=x[0], limit=5, where=where, columns=["id"])
        assert reads and all(columns == [read] for columns in reads), where


def test_the_winners_rows_carry_the_columns_asked_for(
    written: tuple[str, np.ndarray, list[Row]], tmp_path: Path
) -> None:
    """The winners' rows are taken by id from each split once: their values whatever columns are
    asked for (a partition column alone, the filter's column, none but `_distance`)."""
    path, x, data = written
    t = it.IndexTable(path, options={P + "cache.disk.path": str(tmp_path)})
    q = x[5] + 0.3
    want = _nearest_first(x, q, [r["id"] for r in data if r["sel"] < 10])[:12]
    for columns in (["id", "day", "sel", "name", "ts"], ["day"], ["name", "id"], []):
        got = t.search(vector=q, limit=12, where="sel < 10", columns=columns)
        assert got.schema.names == [*columns, "_distance"]
        assert got.to_pylist() == [
            {**{c: data[i][c] for c in columns}, "_distance": d}
            for i, d in zip(want, got.column("_distance").to_pylist())
        ]
    many = t.search_many(vectors=[q, x[9]], limit=4, where="name IN ('n1', 'n2')", columns=["id", "day"])
    for v, table in zip([q, x[9]], many):
        ids = _nearest_first(x, v, [r["id"] for r in data if r["name"] in ("n1", "n2")])[:4]
        assert table.select(["id", "day"]).to_pylist() == [{"id": i, "day": data[i]["day"]} for i in ids]
