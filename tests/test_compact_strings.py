"""IndexTables4Spark's compact string indexing (issue #39 part 5) and BUILD COMPANION's column
selection (part 2): `exact_only`, `text_uuid_exactonly`, `text_uuid_strip`,
`text_custom_exactonly:<re>`, `text_custom_strip:<re>` on normal writes and companion builds;
filters return exactly the rows pyarrow computes (hashes only narrow), queries route or are refused
naming the column and mode; INCLUDE / EXCLUDE COLUMNS and HASHED FASTFIELDS as the reference checks
them."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import indextables_spark as it
from indextables_spark.core.schema import compact_strings
from indextables_spark.core.split.aggregate.agg_request import AggregationError
from indextables_spark.core.split.format.column_specs import column_specs
from indextables_spark.core.split.format.doc_mapping import tantivy_schema
from indextables_spark.core.split.read.tantivy_query import build_query
from indextables_spark.errors import InvalidOptionError, QueryParseError
from indextables_spark.expr.model import EqualTo, In
from indextables_spark.frontends.sql_parser import parse_command

P = "spark.indextables."
MODES = {
    P + "indexing.typemap.trace_id": "exact_only",
    P + "indexing.typemap.message": "text_uuid_exactonly",
    P + "indexing.typemap.raw": "text_uuid_strip",
    P + "indexing.typemap.audit": r"text_custom_exactonly:ORD-\d{4}",
    P + "indexing.typemap.notes": r"text_custom_strip:ORD-\d{4}",
}
U = [str(uuid.UUID(int=i * 7919 + 1)) for i in range(6)]


def rows() -> pa.Table:
    return pa.table(
        {
            "id": [1, 2, 3, 4, 5, 6],
            "trace_id": [U[0], U[1], U[0], None, "plain", "Plain"],
            "message": [
                f"error timeout for {U[2]}",
                f"ok request {U[3]} done",
                "error disk full",
                None,
                f"retry {U[2]} and {U[4]}",
                "error timeout",
            ],
            "raw": [f"GET /a/{U[0]}", "GET /b", None, f"PUT /a/{U[1]}", "GET /a", "x"],
            "audit": ["order ORD-1234 shipped", "order ORD-9999 lost", "none", None, "ORD-1234", "order"],
            "notes": ["see ORD-1234", "see ORD-1234 again", "nothing", "ORD-5555", None, "see"],
        }
    )


def table(tmp_path, options=MODES, name="t") -> it.IndexTable:
    path = str(tmp_path / name)
    it.write_table(path, rows(), options=options)
    return it.IndexTable(path)


def ids(t: it.IndexTable, where: str | None = None, query: str | None = None) -> list[int]:
    if query is not None:
        return sorted(t.search(query, columns=["id"], where=where).column("id").to_pylist())
    return sorted(t.to_arrow(where=where, columns=["id"]).column("id").to_pylist())


def test_the_hash_is_the_references_xxhash64():
    # xxh64("", seed 0) and xxh64("a", seed 0): the published test vectors
    assert compact_strings.string_hash("") == 0xEF46DB3751D8E999
    assert compact_strings.string_hash("a") == 0xD24EC4F1A98C6E5B
    assert compact_strings.strip(compact_strings.parse_mode("text_uuid_strip"), f"a {U[0]}b") == "a  b"


def test_modes_index_hashes_and_stripped_text(tmp_path):
    t = table(tmp_path)
    specs = {s.name: s for s in column_specs(t.snapshot().schema_json, [], MODES)}
    assert [(f.name, f.type) for f in specs["trace_id"].indexed_fields] == [("trace_id", "u64")]
    assert [(f.name, f.type) for f in specs["message"].indexed_fields] == [
        ("message", "text"),
        ("message__uuids", "u64"),
    ]
    assert [(f.name, f.type) for f in specs["raw"].indexed_fields] == [("raw", "text")]
    assert specs["audit"].string_mode == r"text_custom_exactonly:ORD-\d{4}"  # the regex keeps its case
    # the rows keep the original values
    assert t.to_arrow().sort_by("id").to_pylist() == rows().to_pylist()


# (where, the rows it keeps: a Python predicate, the oracle)
FILTERS = [
    (f"trace_id = '{U[0]}'", lambda r: r["trace_id"] == U[0]),
    ("trace_id = 'plain'", lambda r: r["trace_id"] == "plain"),
    (f"trace_id IN ('{U[1]}', 'Plain', 'nothing')", lambda r: r["trace_id"] in (U[1], "Plain")),
    ("trace_id IS NULL", lambda r: r["trace_id"] is None),
    ("trace_id IS NOT NULL", lambda r: r["trace_id"] is not None),
    ("trace_id > 'P'", lambda r: r["trace_id"] is not None and r["trace_id"] > "P"),
    ("NOT (trace_id = 'plain')", lambda r: r["trace_id"] is not None and r["trace_id"] != "plain"),
    (f"message = 'error timeout for {U[2]}'", lambda r: r["message"] == f"error timeout for {U[2]}"),
    ("message = 'error timeout'", lambda r: r["message"] == "error timeout"),
    (f"message IN ('retry {U[2]} and {U[4]}', 'x')", lambda r: r["message"] == f"retry {U[2]} and {U[4]}"),
    (f"raw = 'GET /a/{U[0]}'", lambda r: r["raw"] == f"GET /a/{U[0]}"),
    ("raw = 'GET /a'", lambda r: r["raw"] == "GET /a"),
    ("audit = 'ORD-1234'", lambda r: r["audit"] == "ORD-1234"),
    ("notes = 'see ORD-1234'", lambda r: r["notes"] == "see ORD-1234"),
]


@pytest.mark.parametrize("where,keep", FILTERS, ids=[w for w, _ in FILTERS])
def test_filters_return_exactly_the_rows(tmp_path, where, keep):
    t = table(tmp_path)
    assert ids(t, where) == sorted(r["id"] for r in rows().to_pylist() if keep(r))


def test_hashes_only_narrow_rows_recheck_collisions(tmp_path, monkeypatch):
    # every value hashed alike: the index keeps every row, the rows decide
    monkeypatch.setattr(compact_strings, "string_hash", lambda value: 7)
    t = table(tmp_path)
    assert ids(t, f"trace_id = '{U[0]}'") == [1, 3]
    assert ids(t, "trace_id = 'plain'") == [5]
    assert ids(t, query=f'message:"{U[3]}"') == [1, 2, 5]  # a query is the index's answer (documented)


def test_equality_narrows_through_the_index(tmp_path):
    t = table(tmp_path)
    specs = column_specs(t.snapshot().schema_json, [], MODES)
    schema = tantivy_schema(specs)
    for f in (EqualTo("trace_id", U[0]), In("trace_id", (U[0], "x")), EqualTo("message", f"a {U[2]}")):
        q, exact = build_query(schema, [f], specs)
        assert q is not None and not exact, f  # narrowed, re-checked on the rows


def test_queries_route_to_hashes_or_are_refused(tmp_path):
    t = table(tmp_path)
    assert ids(t, query=f"trace_id:{U[0]}") == [1, 3]
    assert ids(t, query=f'trace_id:"{U[0]}"') == [1, 3]
    assert ids(t, query="trace_id:plain") == [5]  # whole values, case kept
    assert ids(t, query=f"message:{U[2]}") == [1, 5]  # a UUID: the hash field
    assert ids(t, query=f'message:"timeout for {U[2]}"') == [1]  # stripped phrase AND the UUID's hash
    assert ids(t, query="message:timeout") == [1, 6]
    assert ids(t, query="audit:ORD-1234") == [1, 5]
    assert ids(t, query="raw:get AND raw:a") == [1, 5]
    # the `col:( … )` groups FIELDMATCH / TEXTSEARCH / indexquery on a column are written as
    assert ids(t, query=f"trace_id:({U[1]} OR plain)") == [2, 5]
    assert ids(t, query=f"message:(error AND {U[2]})") == [1]
    assert ids(t, query=f'message:(ok AND "request {U[3]} done")') == [2]
    for query, words in [
        ("trace_id:pla*", ["trace_id", "exact_only", "wildcard"]),
        ("trace_id:/pl.*/", ["exact_only", "regex"]),
        ("trace_id:plain~1", ["exact_only", "fuzzy"]),
        ('trace_id:"pla"*', ["exact_only", "phrase prefix"]),
        ("trace_id:[a TO b]", ["exact_only", "range"]),
        (f"raw:{U[0]}", ["raw", "text_uuid_strip", "stripped"]),
        (f"raw:(get {U[0]})", ["raw", "text_uuid_strip", "stripped"]),
        ("trace_id:(pla*)", ["trace_id", "exact_only", "wildcard"]),
        ('notes:"see ORD-1234"', ["notes", "text_custom_strip", "stripped"]),
    ]:
        with pytest.raises(QueryParseError) as e:
            t.search(query, columns=["id"])
        for w in words:
            assert w in str(e.value), (query, str(e.value))


def test_aggregations_from_hashes_are_refused(tmp_path):
    t = table(tmp_path)
    with pytest.raises(AggregationError, match="exact_only"):
        t.aggregate({"by": {"terms": {"field": "trace_id"}}})
    assert t.count() == 6


def test_invalid_modes_are_refused(tmp_path):
    with pytest.raises(InvalidOptionError, match="invalid regex"):
        table(tmp_path, {P + "indexing.typemap.notes": "text_custom_strip:("})
    with pytest.raises(InvalidOptionError, match="empty"):
        table(tmp_path, {P + "indexing.typemap.notes": "text_custom_exactonly:"}, name="u")
    with pytest.raises(InvalidOptionError, match="only string"):
        table(tmp_path, {P + "indexing.typemap.id": "exact_only"}, name="v")


def test_list_form_and_appends_keep_the_mode(tmp_path):
    path = str(tmp_path / "t")
    opts = {P + "indexing.typemap.exact_only": "trace_id", P + "indexing.typemap.text_uuid_strip": "raw"}
    it.write_table(path, rows(), options=opts)
    it.write_table(path, rows(), mode="append")
    t = it.IndexTable(path)
    assert ids(t, "trace_id = 'plain'") == [5, 5]
    with pytest.raises(QueryParseError, match="text_uuid_strip"):
        t.search(f"raw:{U[0]}", columns=["id"])
    t.maintenance.merge_splits()  # re-indexed from the rows with the same modes
    t = it.IndexTable(path)
    assert len(t.snapshot().files) == 1
    assert ids(t, "trace_id = 'plain'") == [5, 5]
    assert ids(t, query="trace_id:Plain") == [6, 6]


# -- companion builds ---------------------------------------------------------------------------


def source(tmp_path) -> str:
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(rows(), str(src / "part-0.parquet"))
    return str(src)


def test_companion_modes_and_column_selection(tmp_path):
    src, loc = source(tmp_path), str(tmp_path / "idx")
    it.build_companion(
        src,
        loc,
        format="parquet",
        indexing={"trace_id": "exact_only", "message": "text_uuid_exactonly"},
        include_columns=["id", "trace_id", "message"],
        hashed_fastfields_include=["trace_id"],
    )
    t = it.IndexTable(loc)
    assert t.to_arrow().sort_by("id").to_pylist() == rows().to_pylist()  # every column read from the source
    assert ids(t, f"trace_id = '{U[0]}'") == [1, 3]
    assert ids(t, "raw = 'GET /b'") == [2]  # not indexed: decided on the source's rows
    assert ids(t, query=f"message:{U[2]}") == [1, 5]
    with pytest.raises(QueryParseError):
        t.search("raw:get", columns=["id"])  # stored only: no such field
    conf = t.snapshot().metadata_action.configuration
    assert conf[P + "companion.includeColumns"] == "id,trace_id,message"
    assert conf[P + "companion.hashedFastfieldsInclude"] == "trace_id"
    # a later build without the clause keeps the selection
    pq.write_table(rows(), str(tmp_path / "src" / "part-1.parquet"))
    it.build_companion(src, loc, format="parquet")
    t = it.IndexTable(loc)
    assert ids(t, "trace_id = 'plain'") == [5, 5]
    with pytest.raises(QueryParseError):
        t.search("raw:get", columns=["id"])


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"include_columns": ["id"], "exclude_columns": ["raw"]}, "mutually exclusive"),
        ({"include_columns": ["id", "ID"]}, "Duplicate column 'ID' in INCLUDE COLUMNS"),
        ({"exclude_columns": ["nope"]}, "Column 'nope' in EXCLUDE COLUMNS does not exist in source schema"),
        ({"include_columns": ["id"], "indexing": {"raw": "text"}}, "Field 'raw' in INDEXING MODES is not in INCLUDE"),
        ({"exclude_columns": ["raw"], "indexing": {"raw": "text"}}, "Field 'raw' in INDEXING MODES is in EXCLUDE"),
        ({"include_columns": ["id"], "hashed_fastfields_include": ["raw"]}, "in HASHED FASTFIELDS is not in INCLUDE"),
        ({"hashed_fastfields_exclude": ["id"]}, "Hashed fast fields require string type"),
        ({"hashed_fastfields_include": ["raw"], "indexing": {"raw": "text"}}, "both HASHED FASTFIELDS and INDEXING"),
        (
            {"exclude_columns": ["id", "trace_id", "message", "raw", "audit", "notes"]},
            "results in zero indexed columns",
        ),
    ],
)
def test_companion_column_selection_is_checked_as_the_reference(tmp_path, kwargs, message):
    with pytest.raises(InvalidOptionError, match=message):
        it.build_companion(source(tmp_path), str(tmp_path / "idx"), format="parquet", **kwargs)


def test_companion_sql_clauses_parse():
    cmd = parse_command(
        "BUILD INDEXTABLES COMPANION FOR PARQUET 's3://b/logs' INCLUDE COLUMNS ('trace_id', 'message') "
        "INDEXING MODES ('trace_id':'exact_only', 'message':'text_custom_exactonly:ORD-\\d{8}') "
        "HASHED FASTFIELDS INCLUDE ('trace_id') AT LOCATION 's3://b/idx'"
    )
    assert cmd.include_columns == ("trace_id", "message")
    assert cmd.hashed_fastfields_include == ("trace_id",)
    assert dict(cmd.indexing)["message"].startswith("text_custom_exactonly:ORD-")
    with pytest.raises(Exception, match="mutually exclusive"):
        parse_command(
            "BUILD INDEXTABLES COMPANION FOR PARQUET 'p' INCLUDE COLUMNS ('a') EXCLUDE COLUMNS ('b') AT LOCATION 'x'"
        )


def test_companion_build_through_spark_sql(spark, tmp_path):
    it.register(spark)
    src, loc = source(tmp_path), str(tmp_path / "idx")
    spark.sql(
        f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' EXCLUDE COLUMNS ('notes') "
        f"INDEXING MODES ('trace_id':'exact_only', 'raw':'text_uuid_strip') "
        f"HASHED FASTFIELDS EXCLUDE ('audit') AT LOCATION '{loc}'"
    ).collect()
    df = spark.read.format("indextables").load(loc)
    assert sorted(r.id for r in df.filter(f"trace_id = '{U[0]}'").collect()) == [1, 3]
    assert sorted(r.id for r in df.filter("notes = 'nothing'").collect()) == [3]
    assert sorted(r.id for r in df.filter("trace_id > 'P'").collect()) == [5, 6]
    # LIKE on hashed / stripped columns: decided on the source's rows
    assert sorted(r.id for r in df.filter("trace_id LIKE 'pla%'").collect()) == [5]
    assert sorted(r.id for r in df.filter(f"raw LIKE '%{U[1][-12:]}%'").collect()) == [4]
    assert sorted(r.id for r in df.filter("raw LIKE 'GET /a%'").collect()) == [1, 5]
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW compact_logs USING indextables OPTIONS (path '{loc}')")
    assert [r.id for r in spark.sql("SELECT id FROM compact_logs WHERE trace_id FIELDMATCH 'plain'").collect()] == [5]
    with pytest.raises(Exception, match="TEXTSEARCH"):
        spark.sql("SELECT id FROM compact_logs WHERE trace_id TEXTSEARCH 'plain'").collect()


def test_sql_group_by_a_hashed_column_reads_the_values(spark, tmp_path):
    it.register(spark)
    opts = {**MODES, P + "indexing.fastfields": "trace_id"}  # a fast field of hashes: not used for values
    t = table(tmp_path, opts)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW compact_group USING indextables OPTIONS (path '{t.path}')")
    got = spark.sql("SELECT trace_id, count(*) AS n FROM compact_group GROUP BY trace_id").collect()
    assert sorted((r.trace_id or "", r.n) for r in got) == sorted(
        [(U[0], 2), (U[1], 1), ("", 1), ("plain", 1), ("Plain", 1)]
    )
    assert ids(t, "trace_id IS NULL") == [4] and ids(t, "trace_id IS NOT NULL") == [1, 2, 3, 5, 6]


def test_companion_command_line_flags(tmp_path, capsys):
    from indextables_spark.frontends.cli import main

    src, loc = source(tmp_path), str(tmp_path / "idx")
    args = ["build-companion", src, loc, "--format", "parquet", "--exclude-columns", "notes, audit"]
    args += ["--indexing", "trace_id=exact_only", "--hashed-fastfields-include", "raw", "--json"]
    assert main(args) == 0
    capsys.readouterr()
    t = it.IndexTable(loc)
    assert t.snapshot().metadata_action.configuration[P + "companion.excludeColumns"] == "notes,audit"
    assert ids(t, "notes = 'nothing'") == [3] and ids(t, "trace_id = 'plain'") == [5]
