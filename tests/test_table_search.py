"""IndexTable.search / to_arrow / to_batches (Spark-free) against the Spark reader on the same table."""

from __future__ import annotations

import pytest

import indextables_spark as it
from indextables_spark.errors import IndexTablesError, QueryParseError
from search_tables import DOCS_OPTIONS, docs, docs_schema, write_table

pytestmark = pytest.mark.spark

N = 2000
OPTIONS = {**DOCS_OPTIONS, "spark.indextables.indexing.bloomfilter.columns": "tag"}

CASES = [  # (query, where, columns)
    ("body:spark", None, None),
    ("body:spark OR body:lake", "region = 'eu'", None),
    ("body:lake", "views > 5000 AND tag IN ('news', 'blog')", ["id", "views", "tag", "region"]),
    ("body:search", "tag IS NULL OR region = 'us'", ["id", "region", "tag"]),
    ("body:tantivy -body:index", "score >= 50.5", None),
    ('body:"data lake"', None, ["id", "body"]),
    ("title:7 OR body:engine", "day < '2024-03-01'", ["id", "day", "title"]),
    ("body:query", "price > 300.50 AND NOT (tag = 'docs')", ["id", "price", "tag"]),
    ("body:stream", "tag = 'forum'", ["id", "tag"]),  # tag: the Bloom-filtered column
    ("body:sql", "region = 'apac' OR views < 3000", ["region", "id", "views"]),
]


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tsearch") / "t")
    write_table(path, docs(N), docs_schema(), OPTIONS)
    t = it.IndexTable(path)
    assert len(t.files()) >= 6
    before = t.count()
    t.delete("views < 800")  # positional deletes
    t.delete(query="body:quasar", where="region = 'us'")
    assert 0 < t.count() < before
    return path


def spark_rows(spark, path, query, where, columns):
    df = spark.read.format("indextables")
    if query is not None:
        df = df.option("query", query)
    df = df.load(path)
    if where is not None:
        df = df.filter(where)
    cols = columns or [f.name for f in docs_schema().fields]
    return sorted((r.asDict() for r in df.select(*cols).collect()), key=lambda r: r["id"])


def rows(table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def comparable(rs: list[dict]) -> list[dict]:
    # Spark returns timestamps as naive local datetimes; compare them as instants in UTC seconds
    out = []
    for r in rs:
        r = dict(r)
        if r.get("ts") is not None:
            r["ts"] = r["ts"].timestamp()
        out.append(r)
    return out


@pytest.mark.parametrize("query,where,columns", CASES)
def test_search_equals_spark_reader(spark, table, query, where, columns):
    got = it.IndexTable(table).search(query, where=where, columns=columns)
    assert got.schema.names == (columns or [f.name for f in docs_schema().fields])
    want = spark_rows(spark, table, query, where, columns)
    assert comparable(rows(got)) == comparable(want)
    assert len(want) > 0


def test_limit_is_the_global_top_n_by_score(spark, table):
    from pyspark.sql import functions as sf

    t = it.IndexTable(table)
    q = "body:spark OR body:lake OR body:tantivy"
    n = 25
    got = t.search(q, where="region != 'apac'", columns=["id", "region"], limit=n)
    assert got.num_rows == n and got.schema.names == ["id", "region", "_score"]
    scores = got.column("_score").to_pylist()
    assert scores == sorted(scores, reverse=True)
    full = t.search(q, where="region != 'apac'", columns=["id"], limit=10**6)
    assert full.num_rows == t.search(q, where="region != 'apac'").num_rows
    all_scores = full.column("_score").to_pylist()
    cutoff = all_scores[n - 1]
    assert set(got.column("id").to_pylist()) >= {
        i for i, s in zip(full.column("id").to_pylist(), all_scores) if s > cutoff
    }
    # against Spark's scores (the reader's _score for every match)
    df = (
        spark.read.format("indextables")
        .option("query", q)
        .option("withScore", "true")
        .load(table)
        .filter("region != 'apac'")
        .select("id", "_score")
        .orderBy(sf.desc("_score"))
    )
    spark_scores = {r.id: r._score for r in df.collect()}
    assert set(spark_scores) == set(full.column("id").to_pylist())
    for i, s in zip(full.column("id").to_pylist(), all_scores):
        assert spark_scores[i] == pytest.approx(s, rel=1e-6)
    top_spark = sorted(spark_scores.items(), key=lambda kv: -kv[1])
    if top_spark[n - 1][1] > top_spark[n][1]:  # no tie at the cut: the same set
        assert set(got.column("id").to_pylist()) == {i for i, _ in top_spark[:n]}
    # the reader's own top n (options query + limit), no filter
    spark_top = (
        spark.read.format("indextables").option("query", q).option("limit", n).load(table).select("id", "_score")
    )
    spark_top = [(r.id, r._score) for r in spark_top.collect()]
    ours = t.search(q, columns=["id"], limit=n)
    assert [s for _, s in spark_top] == pytest.approx(ours.column("_score").to_pylist(), rel=1e-6)
    if len({s for _, s in spark_top}) == n:  # no ties inside the top n
        assert [i for i, _ in spark_top] == ours.column("id").to_pylist()


def test_snippets(spark, table):
    got = it.IndexTable(table).search("body:lake", columns=["id", "body"], snippets=["body"], limit=5)
    assert got.schema.names == ["id", "body", "_score", "_snippet"]
    for body, snip in zip(got.column("body").to_pylist(), got.column("_snippet").to_pylist()):
        assert snip is not None and "<b>" in snip and "lake" in body.lower()


def test_to_arrow_equals_the_spark_full_read(spark, table):
    t = it.IndexTable(table)
    got = t.to_arrow()
    assert got.num_rows == t.count()
    assert comparable(rows(got)) == comparable(spark_rows(spark, table, None, None, None))
    sub = t.to_arrow(where="views >= 9000 OR tag = 'news'", columns=["id", "views", "tag"])
    assert comparable(rows(sub)) == comparable(
        spark_rows(spark, table, None, "views >= 9000 OR tag = 'news'", ["id", "views", "tag"])
    )


def test_to_batches_streams_the_same_rows(table):
    import pyarrow as pa

    t = it.IndexTable(table)
    reader = t.to_batches("body:spark", where="region = 'eu'", columns=["id", "body"])
    assert isinstance(reader, pa.RecordBatchReader)
    batches = list(reader)
    assert len(batches) >= 2  # split by split
    streamed = pa.Table.from_batches(batches, schema=reader.schema)
    assert rows(streamed) == rows(t.search("body:spark", where="region = 'eu'", columns=["id", "body"]))
    assert rows(pa.Table.from_batches(list(t.to_batches()))) == rows(t.to_arrow())


def test_version_reads_before_the_deletes(table):
    t = it.IndexTable(table)
    old = t.to_arrow(columns=["id"], version=0)
    assert old.num_rows == N and t.to_arrow(columns=["id"]).num_rows < N


def test_errors(table):
    t = it.IndexTable(table)
    with pytest.raises(QueryParseError):
        t.search("body:(unclosed")
    with pytest.raises(IndexTablesError, match="nosuchcol"):
        t.search("body:spark", where="nosuchcol = 3")
    with pytest.raises(IndexTablesError, match="nosuchcol"):
        t.to_arrow(columns=["id", "nosuchcol"])


@pytest.mark.parametrize(
    "query,where",
    [
        (None, "score IS NULL"),
        (None, "tag = 't1' OR day = 'd2'"),
        ("body:alpha", "score > 12"),
        ("body:alpha", None),
    ],
)
def test_splits_written_before_merge_schema_read_nulls_as_spark(spark, tmp_path, query, where):
    from test_reliability_schema import _base, _evolved, _write

    path = str(tmp_path / "t")
    _write(path, _base(range(0, 10)))
    _write(path, _evolved(range(10, 30)), merge=True)
    t = it.IndexTable(path)
    cols = ["id", "body", "day", "score", "tag"]
    got = t.search(query, where=where, columns=cols) if query else t.to_arrow(where=where, columns=cols)
    want = spark_rows(spark, path, query, where, cols)
    assert rows(got) == want and len(want) > 0


def test_and_not_means_and_not(tmp_path):
    """`a AND NOT b` (Lucene/Elasticsearch syntax) excludes b; Tantivy alone would match nothing."""
    import pyarrow as pa

    import indextables_spark as it

    bodies = ["red apple", "red pear", "green apple", "red apple pie", "blue"]
    path = str(tmp_path / "t")
    it.write_table(path, pa.table({"id": list(range(5)), "body": bodies}), options={"indexing.typemap.body": "text"})
    t = it.IndexTable(path)

    def ids(q):
        return sorted(t.search(q, columns=["id"]).column("id").to_pylist())

    assert ids("body:red AND NOT body:apple") == [1]
    assert ids("body:red AND NOT (body:pear OR body:pie)") == [0]
    assert ids('body:red AND NOT "apple pie"') == [0, 1]
    assert ids("body:red NOT body:apple") == [1]
    assert t.count("body:red AND NOT body:apple AND NOT body:pear") == 0
    assert t.count("body:apple AND NOT body:green") == 2


def test_fuzzy_and_prefix_terms(spark, tmp_path):
    """Lucene's `term~N` and `prefix*` (Tantivy alone reads them as a phrase "term N" and the term
    "prefix": no matches); distances above 2 and non-text prefixes are refused with a position."""
    import pyarrow as pa

    import indextables_spark as it
    from indextables_spark.errors import QueryParseError

    bodies = ["kestrel nests", "Kestrels fly high", "a kestral sighting", "falcon", "the KESTREL", "kestrel-like"]
    path = str(tmp_path / "t")
    it.write_table(
        path,
        pa.table({"id": list(range(6)), "body": bodies, "code": ["AB-12", "AB-13", "ab-99", "CD-1", "AB", "xyz"]}),
        options={"indexing.typemap.body": "text"},
    )
    t = it.IndexTable(path)

    def ids(q):
        return sorted(t.search(q, columns=["id"]).column("id").to_pylist())

    assert ids("body:kestral~1") == ids("kestral~1") == [0, 2, 4, 5]  # kestrel, kestral (case folded)
    assert ids("body:kestrel~1") == [0, 1, 2, 4, 5]  # + kestrels
    assert ids("body:kestrel~0") == [0, 4, 5]
    assert ids("body:kestr*") == ids("body:KESTR*") == ids("kestr*") == [0, 1, 2, 4, 5]
    assert ids("kestr* AND fly") == [1] and ids("-kestr* AND body:falcon") == [3]
    assert ids("code:AB*") == [0, 1, 4] and ids("code:ab*") == [2]  # raw strings: case kept
    assert ids('body:"kestrel nests"~1') == [0]  # phrase slop is not fuzziness
    assert t.count("body:kestr*") == 5
    got = sorted(
        r.id
        for r in spark.read.format("indextables").option("query", "body:kestral~1").load(path).select("id").collect()
    )
    assert got == [0, 2, 4, 5]
    # terms of one field with different distances (the parser's fuzziness is per field): regexes
    assert ids("body:kestral~1 AND body:nests") == [0]
    assert ids("body:kestral~1 OR body:falcn~1") == ids("kestral~1 OR body:falcon") == [0, 2, 3, 4, 5]
    assert ids("body:ketsral~1 body:zzz") == [2] and ids("body:kestral~1 AND NOT body:kestrel") == [2]
    for bad, where in [
        ("body:kestrel~3", "edit distance 3"),
        ("id:5*", "prefixes apply to text"),
        ("body:kestral~2 AND body:falcon", "give the field's terms one ~N"),
    ]:
        with pytest.raises(QueryParseError, match=where):
            t.search(bad)


def test_explain(tmp_path):
    """IndexTable.explain: the conditions by where they are decided, the Tantivy query, and the
    splits each pruning step kept — the same numbers a read prunes to."""
    import pyarrow as pa

    import indextables_spark as it

    n = 4000
    path = str(tmp_path / "t")
    it.write_table(
        path,
        pa.table(
            {
                "id": pa.array(range(n), pa.int64()),
                "body": [f"w{i % 9} x" for i in range(n)],
                "score": [i / n for i in range(n)],
                "region": [f"r{i % 4}" for i in range(n)],
            }
        ),
        partition_by=["region"],
        options={"indexing.typemap.body": "text", "write.chunkRows": "1000"},
    )
    t = it.IndexTable(path)
    assert len(t.files()) == 16
    e = t.explain("body:w3", where="region IN ('r1', 'r2') AND id >= 3000 AND body = 'w3 x' AND score <> 0.5")
    d = e.to_dict()
    assert d["partition_filters"] == ["region IN ('r1', 'r2')"]
    assert "id >= 3000" in d["index_answered"] and "body = 'w3 x'" in d["index_narrowed"]
    assert any("score" in f for f in d["index_answered"] + d["index_narrowed"] + d["rows_only"])
    assert (e.splits_total, e.splits_after_partition_pruning, e.splits_after_data_skipping) == (16, 8, 2)
    assert e.splits_after_bloom_filters == 2 and "zephyr" not in (e.tantivy_query or "")
    assert "Term(field=" in e.tantivy_query and '"w3"' in e.tantivy_query
    got = (
        t.search(
            "body:w3", where="region IN ('r1', 'r2') AND id >= 3000 AND body = 'w3 x' AND score <> 0.5", columns=["id"]
        )
        .column("id")
        .to_pylist()
    )
    assert sorted(got) == [i for i in range(3000, n) if i % 9 == 3 and i % 4 in (1, 2) and i / n != 0.5]
    plain = t.explain().to_dict()
    assert plain["tantivy_query"] is None and plain["splits_after_bloom_filters"] == 16
    # what a ranked read weighs terms with (search.statistics): every live split of the version
    assert e.statistics == "table (16 splits)" and plain["statistics"] is None
    own = it.IndexTable(path, options={"search.statistics": "split"}).explain("body:w3")
    assert own.statistics == "split"


def test_explain_a_dataframe_classic(spark, tmp_path):
    import pyarrow as pa

    import indextables_spark as it
    from indextables_spark.errors import InvalidOptionError

    path = str(tmp_path / "t")
    it.write_table(
        path,
        pa.table(
            {
                "id": pa.array(range(90), pa.int64()),
                "body": [f"w{i % 9}" for i in range(90)],
                "region": [f"r{i % 3}" for i in range(90)],
            }
        ),
        partition_by=["region"],
        options={"indexing.typemap.body": "text"},
    )
    df = spark.read.format("indextables").option("query", "body:w3").load(path).filter("region = 'r0' AND id < 50")
    explained = [e for e in it.explain(df) if e["path"] == path]
    assert len(explained) == 1 and explained[0]["splits_after_partition_pruning"] == 1
    assert "id < 50" in explained[0]["index_answered"] and explained[0]["splits_total"] == 3
    assert explained[0]["statistics"] is None  # an unranked read
    from pyspark.sql import functions as sf

    ranked = (
        spark.read.format("indextables")
        .option("query", "body:w3")
        .option("withScore", "true")
        .load(path)
        .orderBy(sf.desc("_score"))
        .limit(3)
    )
    assert [e["statistics"] for e in it.explain(ranked) if e["path"] == path] == ["table (3 splits)"]
    assert sorted(r.id for r in df.collect()) == [i for i in range(50) if i % 9 == 3 and i % 3 == 0]
    with pytest.raises(InvalidOptionError, match="no indextables read"):
        it.explain(spark.range(3))


@pytest.mark.parametrize("threads", ["one", "several"])
def test_many_small_splits_joined_with_their_own_partition_values(tmp_path, monkeypatch, threads):
    """A table of many tiny splits (as a job of many tasks leaves it) is searched in one thread
    (several when its splits are big: forced here), their rows joined across splits before the
    partition values are attached: every row keeps its own split's value, in split order, the
    same rows as reading split by split (to_batches), and the scored and counted paths agree."""
    import pyarrow as pa

    from indextables_spark.core.split.read import split_threads

    path = str(tmp_path / "t")
    for i in range(24):
        it.write_table(
            path,
            pa.table(
                {
                    "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
                    "body": [f"word{k % 3} doc {i}" for k in range(10)],
                    "region": [f"r{i % 5}"] * 10,
                }
            ),
            partition_by=["region"],
            options={"indexing.typemap.body": "text"},
        )
    t = it.IndexTable(path)
    files = t.files()
    assert len(files) == 24 and split_threads.search_threads(files) == 1
    if threads == "several":
        monkeypatch.setattr(split_threads, "SMALL_SPLIT_ROWS", 1)
        monkeypatch.setattr(split_threads.os, "cpu_count", lambda: 4)
        assert split_threads.search_threads(files) == 4
    got = t.search("body:word1", where="region <> 'r3'")
    expected = pa.Table.from_batches(list(t.to_batches("body:word1", where="region <> 'r3'")))
    assert rows(got) == rows(expected)
    assert got.num_rows == sum(1 for i in range(24) if i % 5 != 3 for k in range(10) if k % 3 == 1)
    assert all(r["region"] == f"r{(r['id'] // 10) % 5}" for r in rows(got))
    assert t.count("body:word1") == 24 * 3
    scored = t.search("body:word1 AND body:doc", limit=500)
    assert sorted(r["id"] for r in rows(scored)) == sorted(r["id"] for r in rows(t.search("body:word1")))
    assert rows(t.search("body:nothing")) == [] and t.search("body:nothing").schema == got.schema
