"""The batch reader without a SparkSession: data skipping, bounded batches, per-task top n.

The data source and its reader are driven directly (planning on "the driver", read() as a task
would), so these run in milliseconds; test_search_sql.py covers the same through Spark.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import datasource as sds

import indextables_spark as it
from indextables_spark.config.options import Options
from indextables_spark.errors import InvalidOptionError
from indextables_spark.spark.datasource import IndexTablesDataSource
from indextables_spark.spark.read_options import load_options, read_options
from search_tables import DOCS_OPTIONS, docs, docs_schema, write_table

N = 3000


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("reader")
    path = str(root / "t")
    data = docs(N)
    # ids grow with the write order: each split covers an id range, so id filters can skip splits
    write_table(
        path,
        data,
        docs_schema(),
        {**DOCS_OPTIONS, "dataSkippingNumIndexedCols": "4", "stats.truncation.maxLength": "3"},
    )
    return path, data, {"spark.indextables.cache.disk.path": str(root / "cache")}


def plan(path, options, filters=()):
    """Plan a guarded scan (spark/guard.py) as Spark would: every data filter is handed back to
    Spark as well, and the reader narrows by those it can answer (reader.rechecked: the scan prunes and pushes them)."""
    import uuid

    from indextables_spark.spark.guard import GUARD_PREFIX, INDEXGUARD

    ds = IndexTablesDataSource({"path": path, **options})
    reader = ds.reader(ds.schema())
    guard = sds.Not(sds.EqualNullSafe((INDEXGUARD,), GUARD_PREFIX + uuid.uuid4().hex))
    returned = list(reader.pushFilters(list(filters) + [guard]))
    assert all(any(r is f for f in filters) for r in returned)
    taken = [f for f in filters if not any(r is f for r in returned)]
    assert taken == []  # never taken away from Spark
    return reader, reader.partitions(), returned


def rows(reader, parts) -> pa.Table:
    batches = [b for p in parts for b in reader.read(p)]
    return pa.Table.from_batches(batches) if batches else None


def test_stats_cover_the_first_columns_truncated_and_never_partitions(table):
    path, _, _ = table
    files = it.IndexTable(path).files()
    assert len(files) >= 8
    for f in files:
        # dataSkippingNumIndexedCols=4: id, body, tag, views (region is a partition column)
        assert set(f.max_values) <= {"id", "body", "tag", "views"} and "id" in f.max_values
        assert "region" not in f.min_values and "score" not in f.min_values
        # stats.truncation.maxLength=3: a cut max is incremented so it stays an upper bound
        assert all(
            len(f.min_values[c]) <= 3 and len(f.max_values[c]) <= 3 for c in ("body", "tag") if c in f.min_values
        )


def test_data_skipping_counts_and_results(table, caplog):
    path, data, opts = table
    ids = data.column("id")
    cases = [
        ([sds.EqualTo(("id",), 17)], pc.equal(ids, 17)),
        ([sds.In(("id",), (5, 2900))], pc.is_in(ids, pa.array([5, 2900]))),
        ([sds.GreaterThanOrEqual(("id",), 2800)], pc.greater_equal(ids, 2800)),
        (
            [sds.LessThan(("id",), 100), sds.StringStartsWith(("tag",), "do")],
            pc.and_(pc.less(ids, 100), pc.fill_null(pc.starts_with(data.column("tag"), "do"), False)),
        ),
    ]
    n_files = len(it.IndexTable(path).files())
    for filters, mask in cases:
        with caplog.at_level(logging.INFO, logger="indextables_spark.spark.reader"):
            caplog.clear()
            reader, parts, _ = plan(path, opts, filters)
        assert len(reader.rechecked) == len(filters)  # every filter narrows the read
        msg = next(r.getMessage() for r in caplog.records if "skipped by data skipping" in r.getMessage())
        skipped = int(msg.split(" skipped by data skipping")[0].rsplit(" ", 1)[1])
        read = sum(len(p.files) for p in parts)
        assert skipped > 0 and skipped + read == n_files, msg
        got = rows(reader, parts)
        want = sorted(data.filter(mask).column("id").to_pylist())
        assert sorted(got.column("id").to_pylist() if got else []) == want
    # partition pruning is counted apart
    with caplog.at_level(logging.INFO, logger="indextables_spark.spark.reader"):
        caplog.clear()
        plan(path, opts, [sds.EqualTo(("region",), "eu")])
    assert any(
        "pruned by partition filters" in r.getMessage() and " 0 pruned" not in r.getMessage() for r in caplog.records
    )


def test_batches_are_bounded(table):
    path, data, opts = table
    for extra, filters in (({}, []), ({"query": "body:spark"}, []), ({}, [sds.GreaterThan(("views",), 5000)])):
        reader, parts, _ = plan(path, {**opts, "read.batchSize": "97", **extra}, filters)
        sizes = [b.num_rows for p in parts for b in reader.read(p)]
        assert sizes and max(sizes) <= 97
    reader, parts, _ = plan(path, opts)
    assert sum(b.num_rows for p in parts for b in reader.read(p)) == N


def test_top_n_is_one_task_and_score_columns(table):
    path, data, opts = table
    full_reader, full_parts, _ = plan(path, {**opts, "query": "body:spark OR body:lake", "orderBy": "_score"})
    assert len(full_parts) >= 2  # every match: a task per group of splits
    everything = rows(full_reader, full_parts)
    assert everything.schema.names[-3:] == ["_indexall", "_indexguard", "_score"]
    ranked = sorted(everything.column("_score").to_pylist(), reverse=True)
    reader, parts, _ = plan(path, {**opts, "query": "body:spark OR body:lake", "limit": "7", "snippetFields": "body"})
    # a top n is one task over every split: it ranks them all and reads the rows of the global n only
    assert len(parts) == 1 and len(parts[0].files) == len(it.IndexTable(path).files()) >= 2
    top = pa.Table.from_batches(list(reader.read(parts[0])))
    assert top.column("_score").to_pylist() == ranked[:7]  # best first: the global top 7
    assert all("<b>" in s for s in top.column("_snippet").to_pylist())
    ids = set(top.column("id").to_pylist())
    best = everything.sort_by([("_score", "descending")])
    assert ids <= set(best.column("id").to_pylist()[: len(ranked) - ranked[::-1].index(ranked[6])])
    # limit without a query: any n rows, no score column
    reader, parts, _ = plan(path, {**opts, "limit": "5"})
    assert all(sum(b.num_rows for b in reader.read(p)) <= 5 for p in parts)
    assert "_score" not in reader.schema_json["fields"][-1]["name"]


def test_read_option_errors(table):
    path, _, opts = table
    with pytest.raises(InvalidOptionError, match="orderBy"):
        read_options(Options.of({"query": "x", "orderBy": "views"}))
    with pytest.raises(InvalidOptionError, match="needs option 'query'"):
        read_options(Options.of({"orderBy": "_score"}))
    with pytest.raises(InvalidOptionError, match="limit"):
        read_options(Options.of({"limit": "0"}))
    with pytest.raises(InvalidOptionError, match="views"):
        IndexTablesDataSource({"path": path, "query": "body:x", "snippetFields": "views", **opts}).schema()
    with pytest.raises(InvalidOptionError, match="region"):  # partition columns are not in the splits
        IndexTablesDataSource({"path": path, "query": "body:x", "snippetFields": "region", **opts}).schema()


def test_load_options_take_the_arrow_batch_size():
    class Conf:
        def __init__(self, v):
            self.v = v

        def get(self, key, default=None):
            assert key in ("spark.sql.execution.arrow.maxRecordsPerBatch", "spark.default.parallelism")
            return self.v if key.endswith("maxRecordsPerBatch") else default

    class Context:
        defaultParallelism = 3

    class Session:
        def __init__(self, v):
            self.conf = Conf(v)
            self.sparkContext = Context()

    assert load_options(Session("2048"), {}) == {"read.batchSize": "2048", "read.minPartitions": "3"}
    assert load_options(Session("2048"), {"spark.indextables.read.batchSize": "10", "read.minPartitions": "1"}) == {}
    assert load_options(Session(None), {}) == {"read.minPartitions": "3"}


def test_groups_are_balanced_one_wave():
    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.split.read.groups import group_by_size

    files = [AddFile(f"s{i}", {}, size, 0) for i, size in enumerate([90, 80, 70, 30, 20, 10, 5, 5])]
    groups = group_by_size(files, 1000, 2)
    assert len(groups) == 2 and sorted(sum(f.size for f in g) for g in groups) == [155, 155]
    assert len(group_by_size(files, 100, 2)) == 4  # 310 bytes in groups of about 100
    assert len(group_by_size(files[:1], 10, 4)) == 1  # never more groups than splits
    assert group_by_size([], 10, 2) == []


def test_tasks_of_a_search_are_one_wave(tmp_path):
    """Reads with a query or pushed filters: read.minPartitions tasks (the cores), whatever the
    bytes; other reads: one task per read.maxPartitionBytes; an explicit maxPartitionBytes wins."""
    import pyarrow as pa
    from pyspark.sql.datasource import EqualNullSafe, GreaterThan, Not
    from pyspark.sql.types import StructType

    import indextables_spark as it
    from indextables_spark.spark.datasource import IndexTablesDataSource
    from indextables_spark.spark.guard import GUARD_PREFIX, INDEXGUARD

    path = str(tmp_path / "t")
    n = 4000
    it.write_table(
        path,
        pa.table(
            {
                "id": pa.array(range(n), pa.int64()),
                "body": [f"w{i % 9}" for i in range(n)],
                "region": [f"r{i % 8}" for i in range(n)],
            }
        ),
        partition_by=["region"],
        options={"indexing.typemap.body": "text", "write.chunkRows": "1000"},
    )
    assert len(it.IndexTable(path).files()) == 32

    def tasks(options, filters=()):
        ds = IndexTablesDataSource({"path": path, "read.minPartitions": "3", **options})
        full = ds.schema()
        reader = ds.reader(StructType([f for f in full.fields if f.name == "id"]))
        list(reader.pushFilters([*filters, Not(EqualNullSafe((INDEXGUARD,), GUARD_PREFIX + "1"))]))
        groups = reader.partitions()
        assert sum(len(g.files) for g in groups) == 32
        return len(groups)

    tiny = str(min(f.size for f in it.IndexTable(path).files()))
    assert tasks({"query": "body:w1"}) == 3
    assert tasks({}, [GreaterThan(("id",), 10)]) == 3
    assert tasks({"read.maxPartitionBytes": tiny}) == 32  # a full read: by bytes
    assert tasks({"query": "body:w1", "read.maxPartitionBytes": tiny}) == 32


def test_joined_batches_keep_order_and_each_rows_partition_values():
    """A selective read yields a few rows per split: the reader joins them up to read.batchSize
    rows (order kept), drops empty ones, passes big ones through on their own, and gives every
    row its own split's partition values (NULL for a null partition value and `_indexall`)."""
    import pyarrow as pa

    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.split.read.split_rows import joined

    def split(region, day):
        return AddFile(
            path=f"{region}-{day}.split", partition_values={"region": region, "day": day}, size=1, modification_time=0
        )

    def b(*ids):
        return pa.record_batch({"id": pa.array(ids, pa.int64())})

    target = pa.schema([("id", pa.int64()), ("region", pa.string()), ("day", pa.date32()), ("_indexall", pa.string())])
    eu, us, nul = split("eu", "2024-01-02"), split("us", "2024-03-04"), split(None, "2024-01-02")
    big = pa.record_batch({"id": pa.array(range(100, 160), pa.int64())})
    pieces = [(eu, b(1, 2)), (us, b()), (us, b(3)), (nul, b(4, 5)), (eu, b(6, 7, 8)), (us, b(9, 10, 11))]
    pieces += [(eu, b(12)), (us, b(13, 14)), (nul, big), (eu, b(15))]
    out = list(joined(iter(pieces), 10, target, ["region", "day"]))
    assert [x.num_rows for x in out] == [11, 3, 60, 1]
    rows = [r for x in out for r in x.to_pylist()]
    assert [r["id"] for r in rows] == [*range(1, 15), *range(100, 160), 15]
    region = {1: "eu", 2: "eu", 3: "us", 4: None, 5: None, 6: "eu", 7: "eu", 8: "eu", 9: "us", 10: "us", 11: "us"}
    region |= {12: "eu", 13: "us", 14: "us", 15: "eu"} | {i: None for i in range(100, 160)}
    assert {r["id"]: r["region"] for r in rows} == region
    assert {r["day"].isoformat() for r in rows if r["region"] == "us"} == {"2024-03-04"}
    assert {r["day"].isoformat() for r in rows if r["region"] != "us"} == {"2024-01-02"}
    assert all(r["_indexall"] is None for r in rows)
    assert all(x.schema.equals(target) for x in out)
    assert list(joined(iter([(eu, b())]), 10, target, ["region", "day"])) == []


def test_tasks_carry_addfiles_without_planning_statistics():
    """A task's partition carries each AddFile without min/max statistics (they only serve
    planning, and are most of its JSON); a split whose row count is only inside `stats` keeps it."""
    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.spark.task_read import task_json

    stats = '{"numRecords":3}'
    add = AddFile(
        path="a.split", partition_values={"r": "x"}, size=10, modification_time=1, stats=stats,
        min_values={"id": "1"}, max_values={"id": "3"}, num_records=3, footer_start_offset=5, footer_end_offset=10,
    )  # fmt: skip
    shipped = AddFile.from_json(task_json(add))
    assert (shipped.stats, shipped.min_values, shipped.max_values) == (None, None, None)
    assert (shipped.path, shipped.partition_values, shipped.size, shipped.num_records) == ("a.split", {"r": "x"}, 10, 3)
    assert (shipped.footer_start_offset, shipped.footer_end_offset) == (5, 10)
    legacy = AddFile(
        path="b.split", partition_values={}, size=10, modification_time=1, stats=stats, min_values={"id": "1"}
    )
    kept = AddFile.from_json(task_json(legacy))
    assert (kept.stats, kept.min_values) == (stats, None)


def test_partition_values_attach_to_a_table_with_casts_and_missing_columns():
    """A split that stored an older type of a column is cast to the read type; a column the split
    lacks is NULL; a Table stays a Table (the scored path hands Tables)."""
    import pyarrow as pa

    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.split.read.split_rows import with_partition_values

    add = AddFile(path="a.split", partition_values={"region": "eu"}, size=1, modification_time=0)
    data = pa.table({"id": pa.array([1, 2], pa.int32()), "_score": pa.array([0.5, 0.25], pa.float32())})
    target = pa.schema([("id", pa.int64()), ("added", pa.string()), ("region", pa.string()), ("_score", pa.float32())])
    out = with_partition_values([(add, data)], target, ["region"])
    assert isinstance(out, pa.Table) and out.schema.equals(target)
    assert out.to_pylist() == [
        {"id": 1, "added": None, "region": "eu", "_score": 0.5},
        {"id": 2, "added": None, "region": "eu", "_score": 0.25},
    ]
