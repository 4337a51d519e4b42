"""indextables vs Parquet through Spark on the same generated documents, measured in one run.

    .venv/bin/python bench/search_vs_parquet.py [--rows 1000000] [--runs 5] [--dir /tmp/indextables-bench] [--reuse]
        [--partitions 32] [--regions 16] [--merge] [--kinds-only] [--sql]

Documents come from examples/datagen.py (8-word title, 50-word body, ...), generated on executors
by a small Python data source (no pandas needed) with --partitions tasks; 1% of the bodies also
hold the word "kestrel" and 0.01% the word "osprey", so full-text queries select 1% and 0.01% of
the rows; `uuid` is a per-row UUID (from the id). Both tables are written by one job each from
that source and partitioned by region (--regions values), so the indextables table has about
partitions x regions splits, as a Spark job leaves them before MERGE SPLITS. indextables indexes
body as tokenized text. Every figure is the median of --runs runs after one warm-up. --merge runs
MERGE SPLITS afterwards and reports the query kinds again; --kinds-only skips the other scenarios;
--sql runs only the spark.sql section below (and its floors), on the tables as they are.

Scenarios (ours | Parquet):
- full scan          every column of every row materialised (`write.format("noop")`) | same
- 10% filter         `views < 10000` materialised | same
- 1% full-text       option query=body:kestrel, rows materialised | `body like '%kestrel%'`
- top-10             query + limit 10 (best by _score), collected | like + orderBy(score).limit(10)
- count              IndexTable.count() (log numRecords) | df.count()
- terms aggregation  IndexTable.aggregate terms on `day` (366 keys) | groupBy("day").count()

spark.sql section (print_sql_routes; run by default, under --kinds-only, and alone with --sql),
over `CREATE TEMPORARY VIEW docs USING indextables` | a temp view `pq` of the Parquet table:
- ids                `SELECT id FROM docs WHERE body TEXTSEARCH 'kestrel'` (and '"data lake"'),
                     the reader with query + columns=id, the reader with every column .select("id")
                     | `SELECT id FROM pq WHERE body LIKE '%kestrel%'`, collected (target >= 25x)
- count              `SELECT count(*) ... TEXTSEARCH 'kestrel'` | LIKE (target >= 50x)
- GROUP BY           `SELECT region, count(*), avg(views) ... GROUP BY region`, also on a view with
                     'aggregate.cache.enabled' 'false' | LIKE (target >= 50x)
each result checked against Parquet's, with the floors: spark.range(n).collect() for n ids, a
16-row local DataFrame (from Arrow) collected, the index alone (IndexTable.count).
"""

from __future__ import annotations

import os
import shutil
import sys
import time

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
MARKER = "kestrel"
MARKER_SHARE = 0.01
RARE_MARKER = "osprey"
RARE_MARKER_SHARE = 0.0001

from pyspark.sql import functions as sf  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

import indextables_spark as it  # noqa: E402
from bench_common import bench_arguments, local_spark, median_time  # noqa: E402

SCHEMA = (
    "id long, uuid string, title string, body string, tags array<string>, views long, score double, "
    "day date, ts timestamp, region string"
)


def region_values(n: int) -> list[str]:
    """The region partition values: datagen's 4 regions, or up to 16 zones of them."""
    if n <= 4:
        return ["us-east", "us-west", "eu-central", "ap-south"][: max(1, n)]
    return [f"{r}-{z}" for z in range(1, 5) for r in ("us-east", "us-west", "eu-central", "ap-south")][:n]


def uuid_of(i: int) -> str:
    import hashlib
    import uuid

    return str(uuid.UUID(bytes=hashlib.md5(str(i).encode()).digest()))


class _Part(InputPartition):
    def __init__(self, index: int, start: int, count: int):
        self.index, self.start, self.count = index, start, count


class BenchDocs(DataSource):
    """`spark.read.format("bench_docs").option("rows", n)`: datagen documents made on executors."""

    @classmethod
    def name(cls) -> str:
        return "bench_docs"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema):
        return _DocsReader(
            int(self.options["rows"]), int(self.options.get("partitions", "4")), int(self.options.get("regions", "4"))
        )


class _DocsReader(DataSourceReader):
    def __init__(self, rows: int, parts: int, regions: int):
        self.rows, self.parts, self.regions = rows, parts, regions

    def partitions(self):
        per = -(-self.rows // self.parts)
        return [_Part(p, p * per, max(0, min(per, self.rows - p * per))) for p in range(self.parts)]

    def read(self, part: _Part):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        sys.path.insert(0, EXAMPLES)
        from datagen import documents

        for off in range(0, part.count, 50_000):
            n = min(50_000, part.count - off)
            t = documents(n, seed=42 + part.index * 1009 + off, start=part.start + off)
            rng = np.random.default_rng(7 + part.index * 1009 + off)
            draw = rng.random(n)
            body = t.column("body").combine_chunks()
            body = pc.if_else(pa.array(draw < MARKER_SHARE), pc.binary_join_element_wise(body, MARKER, " "), body)
            rare = pa.array((draw >= MARKER_SHARE) & (draw < MARKER_SHARE + RARE_MARKER_SHARE))
            body = pc.if_else(rare, pc.binary_join_element_wise(body, RARE_MARKER, " "), body)
            t = t.set_column(t.schema.get_field_index("body"), "body", body)
            ids = t.column("id").to_pylist()
            t = t.add_column(1, "uuid", pa.array([uuid_of(i) for i in ids], pa.string()))
            zones = region_values(self.regions)
            picked = np.random.default_rng(11 + part.index * 1009 + off).integers(0, len(zones), size=n)
            t = t.set_column(
                t.schema.get_field_index("region"),
                "region",
                pa.array(np.array(zones, dtype=object)[picked], pa.string()),
            )
            yield t.to_batches()[0]


class BenchRows(DataSource):
    """`spark.read.format("bench_rows").option("path", ipc_file).option("partitions", n)`: the rows
    of an Arrow IPC file, in n tasks — a Python data source that only hands over given rows (the
    floor of any Python data source returning them)."""

    @classmethod
    def name(cls) -> str:
        return "bench_rows"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema):
        cls = _PushdownRowsReader if self.options.get("pushdown") == "true" else _RowsReader
        return cls(self.options["path"], int(self.options.get("partitions", "2")))


class _RowsReader(DataSourceReader):
    def __init__(self, path: str, parts: int):
        self.path, self.parts = path, parts

    def partitions(self):
        import pyarrow as pa

        with pa.memory_map(self.path) as f:
            n = pa.ipc.open_file(f).read_all().num_rows
        per = -(-n // self.parts) if n else 0
        return [_Part(p, p * per, max(0, min(per, n - p * per))) for p in range(self.parts)]

    def read(self, part: _Part):
        import pyarrow as pa

        with pa.memory_map(self.path) as f:
            t = pa.ipc.open_file(f).read_all().slice(part.start, part.count)
        yield from t.to_batches()


class _PushdownRowsReader(_RowsReader):
    """Takes Spark's filter pushdown planning call, as a source that narrows by filters does,
    and hands every filter back for Spark to check (as indextables does): the floor of a
    filtered read such as the uuid lookup."""

    def pushFilters(self, filters):
        yield from filters


def noop(df):
    return lambda: df.write.format("noop").mode("overwrite").save()


def docs_source(spark, args):
    """The generated documents (`bench_docs`, registered) with --rows, --partitions, --regions."""
    return (
        spark.read.format("bench_docs")
        .option("rows", args.rows)
        .option("partitions", args.partitions)
        .option("regions", args.regions)
        .load()
    )


def main() -> None:
    ap = bench_arguments("/tmp/indextables-bench", runs=5)
    ap.add_argument("--partitions", type=int, default=4, help="tasks of the source (and of each write)")
    ap.add_argument("--regions", type=int, default=4, help="distinct values of the partition column (<= 16)")
    ap.add_argument("--merge", action="store_true", help="MERGE SPLITS, then the query kinds again")
    ap.add_argument("--kinds-only", action="store_true", help="only the per-query-kind table (and the floors)")
    ap.add_argument("--sql", action="store_true", help="only the spark.sql section (and its floors)")
    args = ap.parse_args()
    spark = local_spark()
    spark.dataSource.register(BenchDocs)
    spark.dataSource.register(BenchRows)
    cores = spark.sparkContext.defaultParallelism
    it_path, pq_path = os.path.join(args.dir, "it"), os.path.join(args.dir, "pq")

    if not (args.reuse and it.IndexTable(it_path).exists() and os.path.exists(pq_path)):
        shutil.rmtree(args.dir, ignore_errors=True)
        src = docs_source(spark, args)
        t0 = time.perf_counter()
        src.write.format("noop").mode("overwrite").save()
        gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        src.write.partitionBy("region").parquet(pq_path)
        pq_write = time.perf_counter() - t0
        t0 = time.perf_counter()
        (
            src.write.format("indextables")
            .mode("overwrite")
            .partitionBy("region")
            .option("spark.indextables.indexing.typemap.body", "text")
            .save(it_path)
        )
        it_write = time.perf_counter() - t0
        print(
            f"write (incl. generation): indextables {args.rows / it_write:,.0f} rows/s, "
            f"parquet {args.rows / pq_write:,.0f} rows/s, ratio {pq_write / it_write:.2f}"
        )
        print_write_floor(args, cores, gen, pq_write)
    table = it.IndexTable(it_path)
    rows = table.count()
    print(f"rows: {rows:,}; splits: {len(table.files())}; cores: {cores}; runs per figure: {args.runs} (median)")

    pq = spark.read.parquet(pq_path)

    def ours(**options):
        r = spark.read.format("indextables")
        for k, v in options.items():
            r = r.option(k, v)
        return r.load(it_path)

    if args.sql:
        print_sql_routes(spark, ours, pq, it_path, args.runs)
        spark.stop()
        return
    t_pq_1pct = None
    if not args.kinds_only:
        t_pq_1pct = print_scenarios(spark, ours, pq, it_path, rows, cores, args.runs)
    kinds = query_kinds(args.regions)
    written = it.IndexTable(it_path).snapshot().version  # the table as written (before MERGE SPLITS)
    times = print_query_kinds(spark, ours, pq, args.runs, kinds)
    if args.merge:
        t0 = time.perf_counter()
        res = it.IndexTable(it_path).maintenance.merge_splits(spark=spark)
        print(
            f"MERGE SPLITS: {time.perf_counter() - t0:.1f}s, {res.get('sourceSplitsMerged')} splits merged -> "
            f"{len(it.IndexTable(it_path).files())} splits"
        )
        print_query_kinds(spark, ours, pq, args.runs, kinds, before=times)
    if t_pq_1pct is None:
        t_pq_1pct = times.get("1% term", (0, 0, 0, 0, 0))[2]
    print_floors(spark, args.runs, t_pq_1pct)
    print_collect_floors(spark, args.runs, {k: v for k, v in times.items() if "*" not in k})
    print_row_floors(spark, it_path, args, cores, times, kinds, written)
    print_sql_routes(spark, ours, pq, it_path, args.runs)
    spark.stop()


def print_write_floor(args, cores: int, gen: float, pq_write: float) -> None:
    """The least time any indextables write of these rows can take here: generating them (the
    same source written to Spark's noop sink) plus Tantivy building the splits of the default
    mapping, measured without Spark on a sample (CPU seconds, Tantivy's threads included), spread
    over the cores."""
    import tempfile

    from indextables_spark.core.split.write.builder import SplitWriter
    from indextables_spark.core.schema.arrow_types import spark_schema_json
    from indextables_spark.core.storage import open_storage

    n = min(args.rows, 200_000)
    batches = list(_DocsReader(n, 1, args.regions).read(_Part(0, 0, n)))
    options = {"spark.indextables.indexing.typemap.body": "text"}
    with tempfile.TemporaryDirectory() as d:
        writer = SplitWriter(open_storage(d), spark_schema_json(batches[0].schema), ["region"], options)
        c0 = time.process_time()
        for b in batches:
            writer.write_batch(b)
        writer.finish()
        cpu = time.process_time() - c0
    indexing = cpu / n * args.rows / cores
    floor = gen + indexing
    print(
        f"write floor: generation alone (noop sink) {gen:.1f}s + split building {cpu / n * 1e6:.1f} CPU-us/row "
        f"(measured without Spark on {n:,} rows) over {cores} cores {indexing:.1f}s = {floor:.1f}s "
        f"-> at most {pq_write / floor:.2f} of parquet's write throughput ({pq_write:.1f}s)"
    )


def print_row_floors(spark, it_path: str, args, cores: int, times: dict, kinds: list[tuple], written: int) -> None:
    """Per query kind, a Python data source that only hands over the same matching rows (every
    column, read from an Arrow file in `cores` tasks; for a kind with a filter, one that also
    takes Spark's filter pushdown planning call, as indextables does): the floor of any Python
    data source returning them, and so the best ratio any can reach against Parquet (a Python
    data source cannot prune columns, so count() and collect() of ids ship every column).
    For a full-text kind, also the index's least work on the table as written (version `written`):
    counting the matches over every split, Spark-free, threads on all cores. A task finds its rows
    before it hands any over, so a read through Spark costs about that source's time plus this."""
    import tempfile

    import pyarrow as pa

    print(
        "row floors (a Python data source handing over the same matching rows, every column; "
        "with a filter, one that also takes the filter pushdown planning call):"
    )
    names = [f.split()[0] for f in SCHEMA.split(", ")]
    with tempfile.TemporaryDirectory() as d:
        for kind, options, flt, _pq, what in kinds:
            if kind not in times:
                continue
            query = options.get("query")
            c_it, r_it, r_pq, c_pq, n = times[kind]
            table = it.IndexTable(it_path)
            rows = (table.search(query) if query is not None else table.to_arrow(where=flt)).select(names)
            path = os.path.join(d, "rows.arrow")
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, rows.schema) as w:
                w.write_table(rows)
            del rows
            reader = spark.read.format("bench_rows").option("path", path).option("partitions", cores)
            df = reader.load() if flt is None else reader.option("pushdown", "true").load().filter(flt)
            f_count = median_time(df.count, args.runs)
            if what == "*":
                f_collect = median_time(lambda: df.collect(), args.runs)
            else:
                f_collect = median_time(lambda: df.select("id").collect(), args.runs)
            print(
                f"  {kind:<20} {n:>9,} rows: count {f_count:.3f}s (at most {c_pq / f_count:.1f}x parquet; ours "
                f"{c_pq / c_it:.1f}x), collect {f_collect:.3f}s (at most {r_pq / f_collect:.1f}x; ours {r_pq / r_it:.1f}x)"
            )
            if query is not None:
                from indextables_spark.core.split.read.search import count_matches

                snap = table.snapshot(written)

                def find() -> int:
                    return count_matches(table.storage, snap, snap.files, query, table.options)

                find()  # this process opens the splits once
                t_find = median_time(find, args.runs)
                print(
                    f"  {'':<20} {'':>9}       + finding them (the index alone: Spark-free count over the "
                    f"{len(snap.files)} splits of the table as written, all cores, {t_find:.3f}s): count at most "
                    f"{c_pq / (f_count + t_find):.1f}x, collect at most {r_pq / (f_collect + t_find):.1f}x"
                )


def print_scenarios(spark, ours, pq, it_path: str, rows: int, cores: int, runs: int) -> float:
    """The first table of docs/benchmarks.md's search benchmark; returns Parquet's 1% full-text materialised time."""
    query = f"body:{MARKER}"
    n_query = it.IndexTable(it_path).count(query)
    n_filter = pq.filter("views < 10000").count()
    scenarios = [
        ("full scan", noop(ours()), noop(pq), rows, None),
        ("10% filter", noop(ours().filter("views < 10000")), noop(pq.filter("views < 10000")), n_filter, None),
        ("1% full-text", noop(ours(query=query)), noop(pq.filter(f"body like '%{MARKER}%'")), n_query, 10.0),
        (
            "top-10 by score",
            lambda: ours(query=query, limit=10).collect(),
            lambda: pq.filter(f"body like '%{MARKER}%'").orderBy(sf.desc("score")).limit(10).collect(),
            10,
            None,
        ),
        ("count", lambda: it.IndexTable(it_path).count(), lambda: pq.count(), rows, 20.0),
        (
            "terms aggregation",
            lambda: it.IndexTable(it_path, spark=spark).aggregate(
                {"d": {"terms": {"field": "day", "size": 400}}}, spark=spark
            ),
            lambda: pq.groupBy("day").count().collect(),
            366,
            20.0,
        ),
    ]
    print(f"{'scenario':<20} {'rows':>10} {'indextables':>12} {'parquet':>10} {'speedup':>8}  target")
    results = {}
    for name, fn_ours, fn_pq, n, target in scenarios:
        t_ours = median_time(fn_ours, runs)
        t_pq = median_time(fn_pq, runs)
        results[name] = (t_ours, t_pq)
        goal = f">= {target:.0f}x" if target else ""
        if name == "full scan":
            goal = "<= 1.5x parquet time"
        print(f"{name:<20} {n:>10,} {t_ours:>11.3f}s {t_pq:>9.3f}s {t_pq / t_ours:>7.1f}x  {goal}")
    t_sel = results["10% filter"][0]
    print(
        f"10% filter: {rows / t_sel / cores:,.0f} table rows/s per core, "
        f"{n_filter / t_sel / cores:,.0f} matching rows/s per core (target >= 1,000,000)"
    )
    t_cold = median_time(
        lambda: it.IndexTable(it_path, {"aggregate.cache.enabled": "false"}, spark=spark).aggregate(
            {"d": {"terms": {"field": "day", "size": 400}}}, spark=spark
        ),
        runs,
    )
    print(
        f"terms aggregation without the split request cache: {t_cold:.3f}s "
        f"({results['terms aggregation'][1] / t_cold:.1f}x parquet)"
    )
    t_spark = median_time(
        lambda: it.IndexTable(it_path, spark=spark).aggregate(
            {"d": {"terms": {"field": "day", "size": 400}}}, spark=spark, execution="spark"
        ),
        runs,
    )
    print(
        f"terms aggregation as a Spark job (execution='spark'): {t_spark:.3f}s "
        f"({results['terms aggregation'][1] / t_spark:.1f}x parquet)"
    )
    t_sql = median_time(
        lambda: spark.sql(f"SELECT * FROM indextables_search('{it_path}', '{query}', 10)").collect(), runs
    )
    print(f"top-10 through SQL indextables_search: {t_sql:.3f}s")
    t_count_q = median_time(lambda: it.IndexTable(it_path).count(query), runs)
    print(
        f"1% full-text count without Spark (IndexTable.count(query)): {t_count_q:.4f}s "
        f"({results['1% full-text'][1] / t_count_q:.0f}x parquet's 1% read)"
    )
    return results["1% full-text"][1]


def query_kinds(regions: int) -> list[tuple]:
    """(name, read options, filter on ours, filter on Parquet, what is collected: "id" or "*")."""
    region = region_values(regions)[min(2, regions - 1)]
    uuid = uuid_of(123_457)
    return [
        ("0.01% term", {"query": f"body:{RARE_MARKER}"}, None, f"body like '%{RARE_MARKER}%'", "id"),
        ("rare term (~0.1%)", {"query": "body:zephyr"}, None, "body like '%zephyr%'", "id"),
        ("1% term", {"query": f"body:{MARKER}"}, None, f"body like '%{MARKER}%'", "id"),
        ("phrase", {"query": 'body:"data lake"'}, None, "body like '%data lake%'", "id"),
        ("uuid lookup", {}, f"uuid = '{uuid}'", f"uuid = '{uuid}'", "id"),
        ("numeric range (1%)", {}, "views >= 1000 AND views < 2000", "views >= 1000 AND views < 2000", "id"),
        ("numeric range, *", {}, "views >= 1000 AND views < 2000", "views >= 1000 AND views < 2000", "*"),
        ("partition filter", {}, f"region = '{region}'", f"region = '{region}'", "id"),
        ("partition, *", {}, f"region = '{region}'", f"region = '{region}'", "*"),
    ]


def print_query_kinds(spark, ours, pq, runs: int, kinds: list[tuple], before: dict | None = None) -> dict:
    """Median count() and collect() (of the id column, or every column for "*") per query kind,
    ours vs Parquet; with `before`, also ours against an earlier run of the same kinds."""
    title = "after MERGE SPLITS" if before else "as written"
    print(
        f"{'query kind (' + title + ')':<34} {'rows':>9} {'it count':>9} {'pq count':>9} {'ratio':>6} "
        f"{'it collect':>10} {'pq collect':>10} {'ratio':>6}"
    )
    # Spark gives each task to whichever Python worker is free, and a worker opens a split the
    # first time it reads it (~1 ms each; kept open afterwards): until every worker has opened
    # every split, a query also pays for opening some. Warm them as a running session would be,
    # so that the first kind measured does not pay for it.
    for _ in range(2 * spark.sparkContext.defaultParallelism):
        ours(query=f"body:{MARKER}").count()
    out = {}
    for kind, options, flt, pq_filter, what in kinds:
        mine = ours(**options)
        if flt:
            mine = mine.filter(flt)
        theirs = pq.filter(pq_filter)
        n = mine.count()
        c_it = median_time(mine.count, runs)
        c_pq = median_time(theirs.count, runs)
        if what == "*":
            cols = [c for c in theirs.columns]
            r_it = median_time(lambda: mine.select(*cols).collect(), runs)
            r_pq = median_time(lambda: theirs.collect(), runs)
        else:
            r_it = median_time(lambda: mine.select("id").collect(), runs)
            r_pq = median_time(lambda: theirs.select("id").collect(), runs)
        n_pq = theirs.count()
        out[kind] = (c_it, r_it, r_pq, c_pq, n)
        note = "" if n == n_pq else f"  (parquet substring matches {n_pq:,})"
        if before and kind in before:
            note += f"  (as written: {before[kind][0]:.3f}s / {before[kind][1]:.3f}s)"
        print(
            f"{kind:<34} {n:>9,} {c_it:>8.3f}s {c_pq:>8.3f}s {c_pq / c_it:>5.1f}x "
            f"{r_it:>9.3f}s {r_pq:>9.3f}s {r_pq / r_it:>5.1f}x{note}"
        )
    return out


def print_collect_floors(spark, runs: int, times: dict) -> None:
    """Per query kind, collecting its number of ids from any source (`spark.range(n).collect()`,
    no Python worker at all): what a collect() costs before any search, and so the best ratio
    a source can reach against Parquet's collect of the same rows."""
    print("collect() floors (spark.range(n).collect() of the same number of rows):")
    for kind, (_c_it, r_it, r_pq, _c_pq, n) in times.items():
        if n < 1000:
            continue
        floor = median_time(lambda: spark.range(n).collect(), runs)
        print(
            f"  {kind:<28} {n:>9,} rows: {floor:.3f}s -> at most {r_pq / floor:.1f}x parquet's collect "
            f"(ours {r_pq / r_it:.1f}x)"
        )


def print_floors(spark, runs: int, t_pq_1pct: float) -> None:
    """What any Spark DataFrame costs here, whatever its source: the bound on every ratio above."""
    t_job = median_time(lambda: spark.range(1).collect(), runs)
    t_count = median_time(lambda: spark.range(10).count(), runs)
    tiny = spark.read.format("bench_docs").option("rows", 2).option("partitions", 2).load()
    t_ds = median_time(lambda: tiny.write.format("noop").mode("overwrite").save(), runs)
    t_ds_count = median_time(tiny.count, runs)
    t_ds_collect = median_time(lambda: tiny.select("id").collect(), runs)
    print(
        f"floors here: any Spark job (spark.range(1).collect()) {t_job:.3f}s; any count() "
        f"(spark.range(10).count()) {t_count:.3f}s; any Python data source read (2 rows, 2 tasks): "
        f"materialised {t_ds:.3f}s, count() {t_ds_count:.3f}s, collect() {t_ds_collect:.3f}s "
        f"-> at most {t_pq_1pct / t_ds:.1f}x parquet's 1% read"
    )


def print_sql_routes(spark, ours, pq, it_path: str, runs: int) -> None:
    """spark.sql statements over an indextables view (planned for the index after `register`:
    spark/sql_routes.py) vs the same statements with LIKE over a Parquet view, on the same data:
    ids of the 1% term and of a phrase (SQL, the reader declaring only `id` (option columns=id),
    and the reader declaring every column), count(*) and GROUP BY answered from the index (also
    with the per-split aggregation request cache off). Each result is checked against Parquet's.
    Then the floors measured here: collecting that many ids from any source (spark.range(n)),
    a result answered from the index coming back through Spark (a 16-row local DataFrame built
    from Arrow, as the index aggregate route builds it), and the index alone (IndexTable.count);
    floors are medians of max(runs, 5) runs (they are cheap, and a 3-run median of them is noisy)."""
    import pyarrow as pa

    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW docs USING indextables OPTIONS (path '{it_path}')")
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW docs_nocache USING indextables "
        f"OPTIONS (path '{it_path}', 'aggregate.cache.enabled' 'false')"
    )
    pq.createOrReplaceTempView("pq")

    def sql(text: str):
        return lambda: spark.sql(text).collect()

    def route(text: str) -> str:
        r = getattr(spark.sql(text), "_indextables_route", None)
        return "Spark as written" if r is None else r.name

    print(f"spark.sql over a view of the table (medians of {runs} runs after a warm-up; ratio = parquet / ours):")
    out = {}
    for name, search, query, like in (
        ("1% term ids", MARKER, f"body:{MARKER}", MARKER),
        ("phrase ids", '"data lake"', 'body:"data lake"', "data lake"),
    ):
        stmt = f"SELECT id FROM docs WHERE body TEXTSEARCH '{search}'"
        pq_stmt = f"SELECT id FROM pq WHERE body LIKE '%{like}%'"
        want = sorted(r[0] for r in spark.sql(pq_stmt).collect())
        cases = [
            ("SQL " + stmt, sql(stmt)),
            (f"reader query={query} columns=id .collect()", lambda q=query: ours(query=q, columns="id").collect()),
            (f"reader query={query} (every column) .select(id)", lambda q=query: ours(query=q).select("id").collect()),
        ]
        t_pq = median_time(sql(pq_stmt), runs)
        print(f"  {name}: parquet `{pq_stmt}` {len(want):,} rows {t_pq:.3f}s; route of the SQL: {route(stmt)}")
        for label, fn in cases:
            got = sorted(r[0] for r in fn())
            check = "= parquet" if got == want else f"!= parquet ({len(got):,} rows)"
            t = median_time(fn, runs)
            out[(name, label)] = (t, t_pq, len(got))
            print(f"    {label:<66} {len(got):>8,} rows {check:<12} {t:.3f}s {t_pq / t:>6.1f}x  (target >= 25x)")

    stmt = f"SELECT count(*) FROM docs WHERE body TEXTSEARCH '{MARKER}'"
    pq_stmt = f"SELECT count(*) FROM pq WHERE body LIKE '%{MARKER}%'"
    got, want = spark.sql(stmt).collect()[0][0], spark.sql(pq_stmt).collect()[0][0]
    t, t_pq_count = median_time(sql(stmt), runs), median_time(sql(pq_stmt), runs)
    print(
        f"  count: `{stmt}` ({route(stmt)}) {got:,} {'= parquet' if got == want else f'!= parquet {want:,}'}: "
        f"{t:.3f}s, parquet {t_pq_count:.3f}s -> {t_pq_count / t:.1f}x  (target >= 50x)"
    )

    group = "SELECT region, count(*), avg(views) FROM {} WHERE body {} GROUP BY region"
    pq_stmt = group.format("pq", f"LIKE '%{MARKER}%'")
    want = {r[0]: (r[1], r[2]) for r in spark.sql(pq_stmt).collect()}
    t_pq = median_time(sql(pq_stmt), runs)
    t_pq_group = t_pq
    for view, what in (("docs", "request cache on"), ("docs_nocache", "request cache off")):
        stmt = group.format(view, f"TEXTSEARCH '{MARKER}'")
        got = {r[0]: (r[1], r[2]) for r in spark.sql(stmt).collect()}
        same = got.keys() == want.keys() and all(
            got[k][0] == want[k][0] and abs(got[k][1] - want[k][1]) <= 1e-9 * max(1.0, abs(want[k][1])) for k in want
        )
        t = median_time(sql(stmt), runs)
        print(
            f"  GROUP BY region ({what}; {route(stmt)}): {len(got)} groups "
            f"{'= parquet (counts exact, avg within 1e-9)' if same else '!= parquet'}: "
            f"{t:.3f}s, parquet {t_pq:.3f}s -> {t_pq / t:.1f}x  (target >= 50x)"
        )
    print(f"    `{group.format('docs', f'TEXTSEARCH {MARKER!r}')}`")

    print("  floors measured here:")
    for n in sorted({v[2] for v in out.values()}):
        floor = median_time(lambda: spark.range(n).collect(), max(runs, 5))
        t_pq = max(v[1] for v in out.values() if v[2] == n)
        print(
            f"    spark.range({n}).collect() (any Spark query returning {n:,} rows): {floor:.3f}s "
            f"-> at most {t_pq / floor:.1f}x parquet's {t_pq:.3f}s"
        )
    tiny = pa.table(
        {"region": [f"r{i}" for i in range(16)], "n": list(range(16)), "avg": [float(i) for i in range(16)]}
    )
    t_tiny = median_time(lambda: spark.createDataFrame(tiny).collect(), max(runs, 5))
    print(
        f"    spark.createDataFrame(16-row pyarrow table).collect() (a result answered from the index "
        f"coming back through Spark): {t_tiny:.3f}s -> count at most {t_pq_count / t_tiny:.1f}x parquet's "
        f"{t_pq_count:.3f}s, GROUP BY at most {t_pq_group / t_tiny:.1f}x parquet's {t_pq_group:.3f}s"
    )
    t_index = median_time(lambda: it.IndexTable(it_path).count(f"body:{MARKER}"), max(runs, 5))
    print(
        f"    the index alone (it.IndexTable(path).count('body:{MARKER}'), no Spark): {t_index:.3f}s; "
        f"with the 16-row frame: count at most {t_pq_count / (t_tiny + t_index):.1f}x"
    )


if __name__ == "__main__":
    main()
