"""Options that cannot silently change a table (#49): an indexing option naming a column the table
lacks is refused with close matches; a write whose indexing options differ from what the table
recorded is refused naming the column, the option, the table's value and the write's (a vector
column declared later, and the settings of a column a write adds, are recorded); an unknown read or
write option, with or without the prefix, is logged once with "did you mean"; the reference's
option names stay accepted (config/option_checks.py, core/split/format/setting_changes.py)."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.config import option_checks, registry
from indextables_spark.errors import InvalidOptionError

P = "spark.indextables."
TEXT = {P + "indexing.typemap.body": "text"}


def docs(start: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([start, start + 1], pa.int64()),
            "body": ["a lake in the hills", "the lake shore"],
            "tag": ["x", "y"],
        }
    )


def created(tmp_path, options=TEXT) -> it.IndexTable:
    path = str(tmp_path / "t")
    it.write_table(path, docs(), options=options)
    return it.IndexTable(path)


def unknown_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "unknown option" in r.getMessage()]


@pytest.fixture
def fresh_warnings():
    """Warnings are logged once per process: the keys these tests mistype are forgotten first."""
    option_checks._warned.difference_update({"qurey", "limt", "indexing.typmap.body", "writ.parallelism"})


# ---- columns the table lacks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, named",
    [
        ({P + "indexing.typemap.bdy": "text"}, "indexing.typemap.bdy names 'bdy' (did you mean 'body'?)"),
        ({"indexing.typemap.text": "bdy"}, "indexing.typemap.text names 'bdy' (did you mean 'body'?)"),
        ({P + "indexing.tokenizer.bod": "en_stem"}, "indexing.tokenizer.bod names 'bod' (did you mean 'body'?)"),
        ({P + "indexing.fastfields": "tags"}, "indexing.fastfields names 'tags' (did you mean 'tag'?)"),
        ({P + "indexing.ngram.min.boddy": "2"}, "indexing.ngram.min.boddy names 'boddy' (did you mean 'body'?)"),
        ({P + "indexing.tokenLength.bdy": "40"}, "indexing.tokenLength.bdy names 'bdy' (did you mean 'body'?)"),
    ],
)
def test_an_option_naming_a_missing_column_is_refused_with_close_matches(tmp_path, options, named):
    path = str(tmp_path / "new")
    with pytest.raises(InvalidOptionError, match="name columns the table does not have") as e:
        it.write_table(path, docs(), options=options)
    assert named in str(e.value)
    assert not it.IndexTable(path).exists()
    # an append is checked alike, and commits nothing
    t = created(tmp_path)
    with pytest.raises(InvalidOptionError) as e:
        it.write_table(t.path, docs(2), options={**TEXT, **options})
    assert named in str(e.value)
    assert it.IndexTable(t.path).version() == 0


def test_a_recorded_setting_of_a_dropped_column_is_left_alone(tmp_path):
    """Only the write's own options are checked: the table's may outlive a column (overwriteSchema)."""
    t = created(tmp_path)
    it.write_table(t.path, docs().drop_columns(["body"]), mode="overwrite", options={"overwriteSchema": "true"})
    it.write_table(t.path, docs(2).drop_columns(["body"]))
    assert it.IndexTable(t.path).count() == 4


# ---- a table's recorded settings ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, parts",
    [
        # the case: a text column appended as whole strings
        (
            {P + "indexing.typemap.body": "string"},
            ["column 'body'", "option indexing.typemap.body gives 'string'", "the table's is 'text'"],
        ),
        # the list form is the same setting
        ({"indexing.typemap.string": "body"}, ["option indexing.typemap.string gives 'string'", "'text'"]),
        # a setting the table does not record has its default
        (
            {**TEXT, P + "indexing.tokenizer.body": "en_stem"},
            ["indexing.tokenizer.body gives 'en_stem'", "the table's is 'default' (the default"],
        ),
        ({**TEXT, P + "indexing.text.maxTokenLength": "legacy"}, ["maxTokenLength gives 'legacy'", "'255'"]),
        ({**TEXT, P + "indexing.fastfields": "body"}, ["indexing.fastfields gives 'body'", "names no column"]),
        ({**TEXT, "indexing.storeonly": "tag"}, ["indexing.storeonly gives 'tag'", "names no column"]),
        ({**TEXT, P + "indexing.indexrecordoption.body": "basic"}, ["gives 'basic'", "the table's is 'position'"]),
    ],
)
def test_an_append_with_other_indexing_options_is_refused(tmp_path, options, parts):
    t = created(tmp_path)
    with pytest.raises(InvalidOptionError, match="differ from the table's") as e:
        it.write_table(t.path, docs(2), options=options)
    for part in parts:
        assert part in str(e.value)
    assert "leave the option out to write the table's setting" in str(e.value)
    t = it.IndexTable(t.path)
    assert t.version() == 0 and t.count() == 2 and t.count("body:lake") == 2


def test_an_overwrite_keeps_the_table_settings_too(tmp_path):
    t = created(tmp_path)
    with pytest.raises(InvalidOptionError, match="typemap.body gives 'string'"):
        it.write_table(t.path, docs(2), mode="overwrite", options={P + "indexing.typemap.body": "string"})


def test_appends_repeating_or_leaving_out_the_settings_index_the_table_way(tmp_path):
    t = created(tmp_path, {**TEXT, P + "indexing.tokenizer.body": "en_stem", P + "indexing.fastfields": "body"})
    same = {"indexing.typemap.text": "body", "indexing.tokenizer.en_stem": "body", "indexing.fastfields": "BODY"}
    it.write_table(t.path, docs(2), options=same)  # the list forms, short keys, another case
    it.write_table(t.path, docs(4))  # no options: the recorded ones
    it.write_table(t.path, docs(6), options={**TEXT, P + "indexing.text.maxTokenLength": "default"})  # = 255
    t = it.IndexTable(t.path)
    assert t.count() == 8 and t.count("body:lakes") == 8  # tokenized and stemmed in every split
    assert len({f.doc_mapping_ref for f in t.files()}) == 1


def test_merge_splits_keeps_the_table_settings(tmp_path):
    """MERGE SPLITS indexes the merged rows again: with the table's settings, never the options'."""
    t = created(tmp_path)
    it.write_table(t.path, docs(2))
    other = it.IndexTable(t.path, {P + "indexing.typemap.body": "string"})
    with pytest.raises(InvalidOptionError, match="indexing options of this MERGE SPLITS differ.*gives 'string'"):
        other.maintenance.merge_splits()
    it.IndexTable(t.path, TEXT).maintenance.merge_splits()
    t = it.IndexTable(t.path)
    assert len(t.files()) == 1 and t.count("body:lake") == 4


def test_settings_of_an_added_column_are_recorded(tmp_path):
    t = created(tmp_path)
    more = docs(2).append_column("title", pa.array(["lake view", "hill view"]))
    it.write_table(t.path, more, options={"mergeSchema": "true", "indexing.typemap.text": "title,body"})
    config = it.IndexTable(t.path).snapshot().metadata_action.configuration
    assert config[P + "indexing.typemap.text"] == "title"  # body keeps its own key
    it.write_table(t.path, docs(4).append_column("title", pa.array(["lake", "x"])))  # no options
    t = it.IndexTable(t.path)
    since = [{(f.path, f.doc_mapping_ref) for f in t.changes_since(v).adds} for v in (-1, 0, 1, 2)]
    mappings = [{ref for _, ref in since[v] - since[v + 1]} for v in (0, 1, 2)]  # each version's adds
    assert mappings[0] != mappings[1] == mappings[2]  # title tokenized by both appends
    assert t.count("body:lake") == 6
    with pytest.raises(InvalidOptionError, match="column 'title': option indexing.typemap.title gives 'string'"):
        it.write_table(t.path, more, options={P + "indexing.typemap.title": "string"})


def test_a_vector_column_declared_later_is_recorded(tmp_path):
    def rows(start: int) -> pa.Table:
        emb = pa.array([[1.0, 0.0, 0.0, float(i)] for i in range(start, start + 2)], pa.list_(pa.float32()))
        return docs(start).append_column("emb", emb)

    path = str(tmp_path / "v")
    it.write_table(path, rows(0), options=TEXT)
    it.write_table(path, rows(2), options={**TEXT, P + "indexing.vector.emb": "4,l2"})
    t = it.IndexTable(path)
    assert t.snapshot().metadata_action.configuration[P + "indexing.vector.emb"] == "4,l2"
    it.write_table(path, rows(4))  # recorded: this append indexes it too
    assert t.search(vector=[1.0, 0.0, 0.0, 4.0], limit=1).column("id").to_pylist() == [4]
    with pytest.raises(InvalidOptionError, match="the table declares '4,l2'"):
        it.write_table(path, rows(6), options={P + "indexing.vector.emb": "4,cosine"})


# ---- unknown options --------------------------------------------------------------------------------


def test_unknown_options_are_logged_once_with_the_closest(tmp_path, caplog, fresh_warnings):
    t = created(tmp_path)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            it.IndexTable(t.path, {"qurey": "lake", P + "limt": "1", "path": t.path})
            it.IndexTable(t.path, {P + "qurey": "lake"})  # the same key with the prefix
        it.write_table(t.path, docs(2), options={**TEXT, "writ.parallelism": "2", P + "indexing.typmap.body": "x"})
    got = unknown_warnings(caplog)
    assert len(got) == 4, got
    assert any("option qurey (did you mean query?)" in m for m in got)
    assert any(f"option {P}limt (did you mean {P}limit?)" in m for m in got)
    assert any("option writ.parallelism (did you mean write.parallelism?)" in m for m in got)
    assert any(f"did you mean {P}indexing.typemap.body?" in m for m in got)


def test_a_catalog_tables_reserved_properties_are_not_unknown_options(tmp_path, caplog, fresh_warnings):
    """CREATE TABLE ... USING indextables hands the reader Spark's reserved table properties with
    its options (`owner` always, `location`, `provider`, `comment`, ...): not typos to warn about."""
    t = created(tmp_path)
    reserved = ("owner", "provider", "location", "comment", "external", "is_managed_location", "collation")
    with caplog.at_level(logging.WARNING):
        it.IndexTable(t.path, {k: "x" for k in reserved})
    assert unknown_warnings(caplog) == []


def test_the_command_line_options_are_checked(tmp_path, caplog, capsys, fresh_warnings):
    from indextables_spark.frontends import cli

    t = created(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert cli.main(["search", t.path, "body:lake", "-o", "writ.parallelism=2", "--json"]) == 0
    assert [m for m in unknown_warnings(caplog) if "did you mean write.parallelism?" in m]
    capsys.readouterr()


def test_close_matches():
    assert option_checks.close_matches("bdy", ["id", "Body", "tag"]) == ["Body"]
    assert option_checks.did_you_mean("zzz", ["id"]) == ""
    assert registry.closest("indexing.tokenzer.title") == "indexing.tokenizer.title"


def _reference_keys() -> list[str]:
    """Every IndexTables4Spark key the registry names, families given a column or a value."""
    keys = []
    for o in registry.OPTIONS:
        for part in o.reference.split(" / ") if o.reference else []:
            key = part.partition(" (")[0]
            keys.append(key[: key.index("<")] + "body" if "<" in key else key)
    return keys


def test_reference_names_are_accepted_without_a_warning(tmp_path, caplog):
    keys = _reference_keys()
    assert {"indexing.storeonlyfields", "indexing.text.maxTokenLength", "indexing.tokenLength.body"} <= set(keys)
    with caplog.at_level(logging.WARNING):
        it.IndexTable(str(tmp_path / "none"), {P + k: "1" for k in keys})
        it.IndexTable(str(tmp_path / "none"), {k: "1" for k in keys})
        # the reference's names for a table's settings, given again on an append
        reference = {
            P + "indexing.typemap.text": "body",
            P + "indexing.tokenLength.legacy": "body",
            P + "indexing.storeonlyfields": "tag",
            P + "dataSkippingStatsColumns": "id",
        }
        t = created(tmp_path, reference)
        it.write_table(t.path, docs(2), options=reference)
    assert unknown_warnings(caplog) == []
    assert it.IndexTable(t.path).count("body:lake") == 4


# ---- Spark ------------------------------------------------------------------------------------------


def test_options_the_driver_checked_are_not_logged_again(caplog, fresh_warnings):
    """After `register`, the driver logs a read's unknown keys and marks its options; the Python
    workers that resolve them (spark/options.py) log nothing again: one warning per job."""
    from indextables_spark.spark.options import resolve_options

    given = {"qurey": "body:lake", P + "limt": "1", "path": "/t"}
    with caplog.at_level(logging.WARNING):
        resolve_options({**given, option_checks.CHECKED: "true"})
    assert unknown_warnings(caplog) == []
    with caplog.at_level(logging.WARNING):
        resolve_options(given)  # without `register`: the worker is the only one to tell
    assert len(unknown_warnings(caplog)) == 2


def test_spark_writes_and_reads(spark, tmp_path, caplog, fresh_warnings):
    """The DataFrame writer refuses what the Spark-free write refuses (the error comes wrapped);
    a read's mistyped options are logged once on the driver, with the closest."""
    path = str(tmp_path / "s")
    df = spark.createDataFrame(docs().to_pandas())
    df.write.format("indextables").mode("append").option(P + "indexing.typemap.body", "text").save(path)
    with pytest.raises(Exception) as e:
        df.write.format("indextables").mode("append").option(P + "indexing.typemap.body", "string").save(path)
    assert "option indexing.typemap.body gives 'string', the table's is 'text'" in str(e.value)
    with pytest.raises(Exception) as e:
        df.write.format("indextables").mode("append").option(P + "indexing.typemap.bdy", "text").save(path)
    assert "indexing.typemap.bdy names 'bdy' (did you mean 'body'?)" in str(e.value)
    df.write.format("indextables").mode("append").option("indexing.typemap.text", "body").save(path)
    df.write.format("indextables").mode("append").save(path)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            read = spark.read.format("indextables").option("qurey", "body:lake").option(P + "limt", "1").load(path)
            assert read.count() == 6  # ignored, as the warning says
    got = unknown_warnings(caplog)
    assert len(got) == 2, got
    assert any("qurey (did you mean query?)" in m for m in got)
    assert any(f"{P}limt (did you mean {P}limit?)" in m for m in got)
    assert spark.read.format("indextables").option("query", "body:lake").load(path).count() == 6
