"""Language analyzers (core/schema/analyzers.py): Snowball stemmers, CJK, ngrams — written through
write_table and Spark, read through Spark and the Spark-free API, kept in the table so appends and
merges analyze the same way."""

from __future__ import annotations

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.errors import InvalidOptionError

OPTIONS = {
    "indexing.typemap.de": "text",
    "indexing.tokenizer.de": "de_stem",
    "indexing.typemap.fr": "text",
    "indexing.tokenizer.fr": "fr_stem",
    "indexing.typemap.ja": "text",
    "indexing.tokenizer.ja": "cjk",
    "indexing.typemap.code": "text",
    "indexing.tokenizer.code": "ngram",
    "indexing.ngram.min.code": "2",
    "indexing.ngram.max.code": "3",
}


def data(start: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + 6), pa.int64()),
            "de": ["Die Häuser sind alt", "Ein Haus", "Hausboot", "Mäuse", None, "das HAUS"],
            "fr": ["Les élèves", "un élève", "Eleve", "école", "", None],
            "ja": ["東京都に住んでいます", "京東の話", "大阪", "tokyo 東京", "東京と京都", "東"],
            "code": ["AB-1234", "XY-99", "ab-12", "CD-1", "zz", None],
        }
    )


@pytest.fixture
def table(tmp_path) -> it.IndexTable:
    path = str(tmp_path / "t")
    it.write_table(path, data(), options=OPTIONS)
    return it.IndexTable(path)


def ids(t: it.IndexTable, q: str) -> list[int]:
    return sorted(i % 100 for i in t.search(q, columns=["id"]).column("id").to_pylist())


def test_stemmers_cjk_and_ngrams(table):
    assert ids(table, "de:haus") == ids(table, "de:Häuser") == ids(table, "de:hauser") == [0, 1, 5]
    assert ids(table, "fr:eleve") == ids(table, "fr:élèves") == [0, 1, 2]
    # overlapping bigrams, as Elasticsearch's cjk analyzer: 東京都 is indexed as 東京, 京都
    assert ids(table, "ja:東京") == [0, 3, 4]
    assert ids(table, "ja:京東") == [1] and ids(table, "ja:TOKYO") == [3]
    assert ids(table, "ja:東京都") == [0]  # the phrase 東京 京都: not "東京と京都"
    assert ids(table, 'ja:"都に住んで"') == [0] and ids(table, "ja:京都") == [0, 4]
    assert ids(table, "ja:東") == [5]  # a lone character is a unigram (as in ES)
    assert ids(table, "東京都") == [0]  # unfielded: the cjk default field analyzes it alike
    assert ids(table, "code:b-12") == [0, 2] and ids(table, "code:1234") == [0]
    assert ids(table, "de:hau*") == [0, 1, 2, 5]  # prefixes are analyzed (lowercased) too
    assert [r["_snippet"] for r in table.search("de:haus", columns=["id"], snippets=["de"]).to_pylist()][:2] == [
        "Die <b>Häuser</b> sind alt",
        "Ein <b>Haus</b>",
    ]


def test_appends_and_merges_analyze_alike(table):
    it.write_table(table.path, data(100))  # no options: the table's settings apply
    assert len({f.doc_mapping_ref for f in table.files()}) == 1
    assert ids(table, "de:haus") == [0, 0, 1, 1, 5, 5]
    table.maintenance.merge_splits()
    assert len(table.files()) == 1 and ids(table, "ja:東京") == [0, 0, 3, 3, 4, 4]


def test_spark_reads_and_writes_them(spark, tmp_path):
    path = str(tmp_path / "s")
    w = spark.createDataFrame(data().to_pandas()).write.format("indextables")
    for k, v in OPTIONS.items():
        w = w.option(f"spark.indextables.{k}", v)
    w.save(path)
    rows = spark.read.format("indextables").option("query", "de:haus AND NOT ja:東京").load(path).collect()
    assert sorted(r.id for r in rows) == [1, 5]
    assert sorted(
        r.id for r in spark.read.format("indextables").option("query", "code:b-12").load(path).select("id").collect()
    ) == [0, 2]
    # LIKE stays exact on these columns (no term narrowing from an analyzer it cannot mirror)
    df = spark.read.format("indextables").load(path)
    assert sorted(r.id for r in df.filter("de like '%äuse%' or ja like '%京東%'").select("id").collect()) == [0, 1, 3]


def test_bad_analyzer_options(tmp_path):
    for bad, msg in [
        ({"indexing.typemap.de": "text", "indexing.tokenizer.de": "xx_stem"}, "unknown tokenizer"),
        (
            {
                "indexing.typemap.code": "text",
                "indexing.tokenizer.code": "ngram",
                "indexing.ngram.min.code": "4",
                "indexing.ngram.max.code": "2",
            },
            "min <= max",
        ),
        (
            {"indexing.typemap.code": "text", "indexing.tokenizer.code": "ngram", "indexing.ngram.max.code": "x"},
            "expected an integer",
        ),
    ]:
        with pytest.raises(InvalidOptionError, match=msg):
            it.write_table(str(tmp_path / "bad"), data(), options=bad)
