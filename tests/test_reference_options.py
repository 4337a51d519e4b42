"""IndexTables4Spark's indexing option names (#27, criterion 2): the list forms of the per-column
families, token lengths (recorded per field, used by queries, old tables unchanged), nonfastfields,
storeonlyfields, dataSkippingStatsColumns (indexonlyfields: test_index_only_columns.py), and their validation."""

from __future__ import annotations

import dataclasses
import json
import logging

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.errors import InvalidOptionError
from indextables_spark.core.split.aggregate.agg_request import AggregationError

P = "spark.indextables."
LONG = "a" + "b" * 59  # one 60-byte token: dropped at 40 bytes, kept at 255
HUGE = "h" * 300  # dropped at 255 bytes, kept at tantivy_max


def rows() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "title": ["Spark search", f"long {LONG} word", "other", None],
            "body": ["quick brown fox", f"see {LONG} here", f"huge {HUGE}", "lazy dog"],
            "tag": ["a", "b", "a", "b"],
        }
    )


def write(tmp_path, options: dict, name: str = "t", data: pa.Table | None = None) -> it.IndexTable:
    path = str(tmp_path / name)
    it.write_table(path, rows() if data is None else data, options={P + k: v for k, v in options.items()})
    return it.IndexTable(path)


def ids(t: it.IndexTable, query: str, where: str | None = None) -> list[int]:
    return sorted(t.search(query, where=where).column("id").to_pylist())


def mapping(t: it.IndexTable) -> dict[str, dict]:
    """Tantivy field name -> descriptor, of the one doc mapping of the table's splits."""
    snap = t.snapshot()
    refs = {f.doc_mapping_ref for f in snap.files}
    assert len(refs) == 1
    return {d["name"]: d for d in json.loads(snap.doc_mapping(refs.pop()))}


# ---- list forms ------------------------------------------------------------------------------


def test_typemap_list_form_and_per_column_form_agree(tmp_path):
    listed = write(tmp_path, {"indexing.typemap.text": "title, BODY"}, "listed")
    per_col = write(tmp_path, {"indexing.typemap.title": "text", "indexing.typemap.body": "text"}, "percol")
    for t in (listed, per_col):
        m = mapping(t)
        assert m["title"]["kind"] == m["body"]["kind"] == "text" and m["tag"]["kind"] == "string"
        assert ids(t, "title:spark") == [1]
        assert ids(t, "body:fox OR body:dog") == [1, 4]
    assert mapping(listed) == mapping(per_col)


def test_tokenizer_and_record_option_list_forms(tmp_path):
    t = write(
        tmp_path,
        {
            "indexing.typemap.text": "title,body",
            "indexing.tokenizer.whitespace": "title",
            "indexing.tokenizer.en_stem": "body",
            "indexing.indexrecordoption.basic": "title",
            "indexing.text.indexRecordOption": "freq",
        },
    )
    m = mapping(t)
    assert (m["title"]["tokenizer"], m["title"]["record"]) == ("whitespace", "basic")
    assert (m["body"]["tokenizer"], m["body"]["record"]) == ("en_stem", "freq")
    assert ids(t, "title:Spark") == [1]  # whitespace keeps case
    assert ids(t, "title:spark") == []
    assert ids(t, "body:foxes") == [1]  # stemmed


def test_a_key_ending_in_a_type_lists_columns(tmp_path):
    # as in the reference: `typemap.text = "string"` lists a column named `string`
    with pytest.raises(InvalidOptionError, match=r"indexing.typemap.text names 'string'"):
        write(tmp_path, {"indexing.typemap.text": "string"})


def test_two_settings_for_one_column_name_both_keys(tmp_path):
    with pytest.raises(
        InvalidOptionError, match=r"indexing.typemap.text and indexing.typemap.title give column 'title'"
    ):
        write(tmp_path, {"indexing.typemap.text": "title,body", "indexing.typemap.title": "string"})


def test_list_forms_name_existing_columns(tmp_path):
    for opts, key in [
        ({"indexing.typemap.text": "title,bodyy"}, "indexing.typemap.text"),
        ({"indexing.tokenLength.legacy": "titel"}, "indexing.tokenLength.legacy"),
        ({"indexing.nonfastfields": "idd"}, "indexing.nonfastfields"),
        ({"indexing.typemap.text": "title", "indexing.tokenizer.whitespace": "nope"}, "indexing.tokenizer.whitespace"),
    ]:
        with pytest.raises(InvalidOptionError, match=key.replace(".", r"\.")):
            write(tmp_path, opts)


# ---- token length ----------------------------------------------------------------------------


def test_long_tokens_found_with_the_new_default_not_with_legacy(tmp_path):
    new = write(tmp_path, {"indexing.typemap.text": "title,body"}, "new")
    assert {mapping(new)[c]["maxTokenLength"] for c in ("title", "body")} == {255}
    assert ids(new, f"body:{LONG}") == [2]
    assert ids(new, f"title:{LONG}") == [2]
    assert ids(new, f"body:{HUGE}") == []  # 300 bytes: past 255
    # the table records its token length (later appends index the same way)
    assert new.snapshot().metadata_action.configuration[P + "indexing.text.maxtokenlength"] == "255"

    legacy = write(tmp_path, {"indexing.typemap.text": "title,body", "indexing.text.maxTokenLength": "legacy"}, "l")
    assert ids(legacy, f"body:{LONG}") == []
    assert ids(legacy, "body:see AND body:here") == [2]  # the other tokens of the row are indexed

    mixed = write(
        tmp_path,
        {
            "indexing.typemap.text": "title,body",
            "indexing.tokenLength.legacy": "title",  # list form with a name
            "indexing.tokenLength.body": "tantivy_max",  # per-column form with a name
        },
        "m",
    )
    m = mapping(mixed)
    assert (m["title"]["maxTokenLength"], m["body"]["maxTokenLength"]) == (40, 65530)
    assert ids(mixed, f"title:{LONG}") == []
    assert ids(mixed, f"body:{LONG}") == [2]
    assert ids(mixed, f"body:{HUGE}") == [3]

    numeric = write(tmp_path, {"indexing.typemap.text": "body", "indexing.tokenLength.61": "body"}, "n")
    assert mapping(numeric)["body"]["maxTokenLength"] == 61
    assert ids(numeric, f"body:{LONG}") == [2]


def test_filters_narrow_with_the_fields_token_length(tmp_path):
    """Spark-style filters on a text column narrow through terms analysed with the field's limit:
    a 60-byte word is a required term at 255 (the rows still re-check the filter) and no term at
    40, where the index does not hold it (requiring it would lose the row); both find exactly the
    rows."""
    from indextables_spark.expr.text import pattern_terms

    for length in ("default", "legacy"):
        t = write(tmp_path, {"indexing.typemap.text": "body", "indexing.text.maxTokenLength": length}, length)
        assert sorted(t.to_arrow(where=f"body = 'see {LONG} here'").column("id").to_pylist()) == [2]
        assert sorted(t.to_arrow(where=f"body IN ('see {LONG} here', 'x')").column("id").to_pylist()) == [2]
    # the terms a filter requires come from the field's own analyzer
    assert LONG in pattern_terms(f"see {LONG} here", "default", True, True, False, 255).terms
    assert LONG not in pattern_terms(f"see {LONG} here", "default", True, True, False, 40).terms
    assert LONG not in pattern_terms(f"see {LONG} here", "default", True, True, False, None).terms


def test_query_parser_uses_the_limit_of_each_split(tmp_path):
    """A query runs against every split with that split's analyzer: one split at 40, one at 255 (a
    write giving another limit than the table's is refused: the table's recorded one is changed
    between the writes, as a table converted from the reference's splits may mix them)."""
    path = str(tmp_path / "two")
    base = {P + "indexing.typemap.text": "body"}
    it.write_table(path, rows(), options={**base, P + "indexing.text.maxTokenLength": "legacy"})
    with pytest.raises(InvalidOptionError, match="maxTokenLength gives '255', the table's is 'legacy'"):
        it.write_table(path, rows(), options={**base, P + "indexing.text.maxTokenLength": "255"})
    meta = it.IndexTable(path).snapshot().metadata_action
    config = {**meta.configuration, P + "indexing.text.maxtokenlength": "255"}
    it.IndexTable(path).transaction().set_metadata(dataclasses.replace(meta, configuration=config)).commit()
    it.write_table(path, rows(), options={**base, P + "indexing.text.maxTokenLength": "255"})
    t = it.IndexTable(path)
    assert len({f.doc_mapping_ref for f in t.snapshot().files}) == 2
    assert ids(t, f"body:{LONG}") == [2]  # the 255 split only
    assert ids(t, "body:fox") == [1, 1]


def make_old_table(tmp_path) -> it.IndexTable:
    """A table as written before indexing.text.maxTokenLength existed: its doc mapping records no
    token length and its metadata no setting (the `builtin` limits are what the code wrote then)."""
    path = str(tmp_path / "old")
    it.write_table(
        path, rows(), options={P + "indexing.typemap.text": "body", P + "indexing.text.maxTokenLength": "builtin"}
    )
    t = it.IndexTable(path)
    assert "maxTokenLength" not in mapping(t)["body"]
    meta = t.snapshot().metadata_action
    config = {k: v for k, v in meta.configuration.items() if not k.endswith("indexing.text.maxTokenLength")}
    t.transaction().set_metadata(dataclasses.replace(meta, configuration=config)).commit()
    assert not any(k.endswith("maxTokenLength") for k in it.IndexTable(path).snapshot().metadata_action.configuration)
    return it.IndexTable(path)


def test_an_old_table_keeps_its_40_byte_behaviour(tmp_path):
    t = make_old_table(tmp_path)
    assert ids(t, f"body:{LONG}") == []
    # an append without options indexes as the table always did: same doc mapping, still not found
    it.write_table(t.path, rows(), options={})
    t = it.IndexTable(t.path)
    assert len({f.doc_mapping_ref for f in t.snapshot().files}) == 1
    assert ids(t, f"body:{LONG}") == []
    assert ids(t, "body:fox") == [1, 1]
    # MERGE SPLITS still finds the splits mergeable (the table's settings give the same mapping)
    t.maintenance.merge_splits()
    t = it.IndexTable(t.path)
    assert t.snapshot().num_files == 1
    assert ids(t, f"body:{LONG}") == []


# ---- fast fields, stored-only, index-only ----------------------------------------------------


def test_nonfastfields(tmp_path):
    t = write(tmp_path, {"indexing.nonfastfields": "id, tag"})
    m = mapping(t)
    assert not m["id"]["fast"] and not m["tag"]["fast"] and m["title"]["fast"]
    # filters stay exact: ranges and terms on the index, IS NULL on the rows
    assert sorted(t.to_arrow(where="id >= 2 AND id < 4").column("id").to_pylist()) == [2, 3]
    assert sorted(t.to_arrow(where="tag = 'a'").column("id").to_pylist()) == [1, 3]
    assert sorted(t.to_arrow(where="id > 9223372036854775807 OR id < 2").column("id").to_pylist()) == [1]
    assert sorted(t.to_arrow(where="tag IS NOT NULL").column("id").to_pylist()) == [1, 2, 3, 4]
    assert ids(t, "id:[2 TO 3]") == [2, 3]
    # aggregations of them need fast fields: a clear error naming the option
    with pytest.raises(AggregationError, match="indexing.nonfastfields"):
        t.aggregate({"s": {"stats": {"field": "id"}}})
    with pytest.raises(AggregationError, match="indexing.nonfastfields"):
        t.aggregate({"k": {"terms": {"field": "tag"}}})
    # exact aggregations from the row store still run
    assert t.aggregate({"c": {"cardinality": {"field": "tag"}}})["c"]["value"] == 2
    with pytest.raises(InvalidOptionError, match="fastfields and indexing.nonfastfields"):
        write(tmp_path, {"indexing.fastfields": "id", "indexing.nonfastfields": "id"}, "both")


def test_storeonlyfields_is_storeonly(tmp_path):
    a = write(tmp_path, {"indexing.storeonlyfields": "body"}, "a")
    b = write(tmp_path, {"indexing.storeonly": "body"}, "b")
    assert mapping(a) == mapping(b)
    assert mapping(a)["body"]["type"] == "none"
    assert sorted(a.to_arrow(where="body = 'lazy dog'").column("id").to_pylist()) == [4]
    with pytest.raises(InvalidOptionError, match=r"indexing.storeonlyfields names 'nope'"):
        write(tmp_path, {"indexing.storeonlyfields": "nope"}, "c")


# ---- statistics ------------------------------------------------------------------------------


def test_data_skipping_stats_columns(tmp_path, caplog):
    t = write(tmp_path, {"dataSkippingStatsColumns": "tag, ID"})
    (f,) = t.snapshot().files
    assert set(f.min_values) == set(f.max_values) == {"id", "tag"}
    assert (f.min_values["id"], f.max_values["id"]) == ("1", "4")
    assert set(json.loads(f.stats)["nullCount"]) == {"id", "tag"}
    # recorded: an append without the option keeps it
    it.write_table(t.path, rows(), options={})
    assert all(set(f.min_values) == {"id", "tag"} for f in it.IndexTable(t.path).snapshot().files)
    # names that are no data columns are logged and left out, as in the reference
    with caplog.at_level(logging.WARNING):
        u = write(tmp_path, {"dataSkippingStatsColumns": "title,missing"}, "u")
    assert set(u.snapshot().files[0].min_values) == {"title"}
    assert "dataSkippingStatsColumns" in caplog.text and "missing" in caplog.text


# ---- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "opts, key, message",
    [
        ({"indexing.text.maxTokenLength": "0"}, "indexing.text.maxTokenLength", "between 1 and 65530"),
        ({"indexing.text.maxTokenLength": "65531"}, "indexing.text.maxTokenLength", "between 1 and 65530"),
        ({"indexing.text.maxTokenLength": "huge"}, "indexing.text.maxTokenLength", "tantivy_max"),
        ({"indexing.tokenLength.body": "x"}, "indexing.tokenLength.body", "expected an integer"),
        ({"indexing.tokenLength.0": "body"}, "indexing.tokenLength.0", "between 1 and 65530"),
        ({"indexing.text.indexRecordOption": "all"}, "indexing.text.indexRecordOption", "expected one of"),
        ({"indexing.typemap.json": "tag"}, "indexing.typemap.json", "JSON string column"),
        ({"indexing.indexrecordoption.body": "everything"}, "indexing.indexrecordoption.body", "expected one of"),
    ],
)
def test_invalid_values_name_the_option(tmp_path, opts, key, message):
    with pytest.raises(InvalidOptionError) as e:
        write(tmp_path, {"indexing.typemap.text": "body", **opts})
    assert key in str(e.value) and message in str(e.value)


def test_unknown_keys_still_warn_with_the_closest(caplog):
    from indextables_spark.config.option_checks import _warned
    from indextables_spark.config.options import Options

    _warned.discard("indexing.nonfastfeilds")
    with caplog.at_level(logging.WARNING):
        Options.of({P + "indexing.nonfastfeilds": "a"})
    assert "did you mean spark.indextables.indexing.nonfastfields?" in caplog.text
    # the reference's names are known: no warning
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        Options.of(
            {
                P + "indexing.typemap.text": "a",
                P + "indexing.tokenLength.255": "a",
                P + "indexing.text.maxTokenLength": "legacy",
                P + "indexing.storeonlyfields": "a",
                P + "dataSkippingStatsColumns": "a",
            }
        )
    assert "unknown option" not in caplog.text


def test_registry_names_the_reference_keys():
    from indextables_spark.config import registry as reg

    named = {o.key: o.reference for o in reg.OPTIONS if o.reference}
    for key in (
        "indexing.typemap.<col>",
        "indexing.text.maxTokenLength",
        "indexing.tokenLength.<col>",
        "indexing.nonfastfields",
        "indexing.indexonlyfields",
        "indexing.storeonly",
        "dataSkippingStatsColumns",
    ):
        assert key in named
    assert "IndexTables4Spark key" in reg.markdown_table().splitlines()[0]


# ---- Spark ---------------------------------------------------------------------------------------


def test_spark_write_with_the_reference_names(spark, tmp_path):
    path = str(tmp_path / "spark")
    (
        spark.createDataFrame(rows().to_pandas())
        .write.format("indextables")
        .option(P + "indexing.typemap.text", "title,body")
        .option(P + "indexing.tokenLength.legacy", "title")
        .option(P + "indexing.nonfastfields", "tag")
        .option(P + "dataSkippingStatsColumns", "id")
        .mode("append")
        .save(path)
    )
    t = it.IndexTable(path)
    m = mapping(t)
    assert (m["title"]["maxTokenLength"], m["body"]["maxTokenLength"], m["tag"]["fast"]) == (40, 255, False)
    assert set(t.snapshot().files[0].min_values) == {"id"}

    def query(q: str) -> list[int]:
        df = spark.read.format("indextables").option("query", q).load(path)
        return sorted(r.id for r in df.select("id").collect())

    assert query(f"body:{LONG}") == [2]
    assert query(f"title:{LONG}") == []
    df = spark.read.format("indextables").load(path)
    assert sorted(r.id for r in df.filter("tag = 'a' and id >= 2").select("id").collect()) == [3]
    assert sorted((r.tag, r.n) for r in df.groupBy("tag").count().withColumnRenamed("count", "n").collect()) == [
        ("a", 2),
        ("b", 2),
    ]
