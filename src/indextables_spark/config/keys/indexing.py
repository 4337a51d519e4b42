"""The registry's indexing options (config/registry.py joins the families).

How columns are indexed: type maps, tokenizers, fast / stored / index-only fields, vectors, Bloom
filters, statistics, the split writer's memory. Recorded in the table at its creation.
"""

from __future__ import annotations

from indextables_spark.config.keys.spec import MB, OptionSpec

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "indexing.typemap.<col>",
        "str",
        "string",
        "`string`, `text`, `text_and_string` or `ip` for string columns; list form "
        '`indexing.typemap.<type>` = `"a,b"` (a key ending in a type lists columns, as in the reference)',
        reference="indexing.typemap.<field> / indexing.typemap.<type>",
    ),
    OptionSpec(
        "indexing.tokenizer.<col>",
        "str",
        "default",
        "tokenizer of a text column: `default`, `raw`, `whitespace`, "
        "`en_stem`, `<iso>_stem` (ar da de el es fi fr hu it nl no pt ro ru sv ta tr), `cjk`, `ngram`; "
        'list form `indexing.tokenizer.<tokenizer>` = `"a,b"`',
        reference="indexing.tokenizer.<field> / indexing.tokenizer.<tokenizer>",
    ),
    OptionSpec("indexing.ngram.min.<col>", "int", 2, "shortest gram of an `ngram` column (1–20)"),
    OptionSpec("indexing.ngram.max.<col>", "int", 3, "longest gram of an `ngram` column (1–20)"),
    OptionSpec(
        "indexing.indexrecordoption.<col>",
        "str",
        "position",
        '`basic`, `freq` or `position`; list form `indexing.indexrecordoption.<option>` = `"a,b"`',
        reference="indexing.indexrecordoption.<field> / indexing.indexrecordoption.<option>",
    ),
    OptionSpec(
        "indexing.text.indexRecordOption",
        "str",
        "position",
        "record option of text columns without their own",
        reference="indexing.text.indexRecordOption",
    ),
    OptionSpec(
        "indexing.text.maxTokenLength",
        "str",
        "255",
        "tokenized (text, json) fields drop tokens of this many bytes or more: 1–65530, `min` (1), "
        "`legacy` (40), `default` (255), `tantivy_max` (65530), `builtin` (each tokenizer's own: 40, "
        "none for `whitespace`; tables created without this setting recorded keep it); recorded per field, "
        "queries use the same limit",
        reference="indexing.text.maxTokenLength",
    ),
    OptionSpec(
        "indexing.tokenLength.<col>",
        "str",
        None,
        "a column's token length (values as `indexing.text.maxTokenLength`); list form "
        '`indexing.tokenLength.<n or name>` = `"a,b"`',
        reference="indexing.tokenLength.<field> / indexing.tokenLength.<n>",
    ),
    OptionSpec(
        "indexing.fastfields",
        "str",
        None,
        "extra fast fields (comma list; numeric, date, bool, string and struct columns are fast anyway)",
        reference="indexing.fastfields (there: the only fast fields when set)",
    ),
    OptionSpec(
        "indexing.nonfastfields",
        "str",
        None,
        "columns without a fast field (comma list; ip fields stay fast): smaller splits, no aggregation "
        "of them (a clear error; SQL aggregates run in Spark), IS NULL filters evaluated on the rows",
        reference="indexing.nonfastfields",
    ),
    OptionSpec(
        "indexing.storeonly",
        "str",
        None,
        "columns stored but not indexed (comma list)",
        reference="indexing.storeonlyfields",
    ),
    OptionSpec(
        "indexing.storeonlyfields",
        "str",
        None,
        "same as `indexing.storeonly`",
        reference="indexing.storeonlyfields",
    ),
    OptionSpec(
        "indexing.indexonlyfields",
        "str",
        None,
        "columns indexed but not stored (comma list; fixed at creation): they read as NULL, filters on "
        "them are answered by the index alone (see Index-only columns)",
        reference="indexing.indexonlyfields",
    ),
    OptionSpec(
        "indexing.vector.<col>",
        "str",
        None,
        "a vector column (array of float or double): `<dimensions>[,<metric>[,<index kind>[,<name>=<value>...]]]`, "
        "metric `cosine` (the default), `l2` or `dot`; index kind `ivf_pq` (the default: 4-bit codes, parameters "
        "`nlist`, `m`) or `hnsw` (a graph with its own float32 copy: `m`, `ef_construction`); each split keeps "
        "the index and the float32 vectors, the column's one copy (see Vector search)",
    ),
    OptionSpec("indexing.bloomfilter.columns", "str", None, "columns with a per-split Bloom filter (comma list)"),
    OptionSpec("indexing.bloomfilter.fpp", "float", 0.01, "Bloom filter false-positive rate"),
    OptionSpec("indexing.split.targetSize", "size", None, "same as `write.targetSplitSize`", readme=False),
    OptionSpec("indexing.tempDirectoryPath", "str", None, "same as `indexWriter.tempDirectoryPath`", readme=False),
    OptionSpec("indexWriter.heapSize", "size", 512 * MB, "Tantivy indexing memory per split writer (at least 15M)"),
    OptionSpec("indexWriter.tempDirectoryPath", "str", None, "where splits are built (default: the system temp dir)"),
    OptionSpec(
        "dataSkippingNumIndexedCols",
        "int",
        32,
        "min/max statistics for the first N columns (-1: all)",
        reference="dataSkippingNumIndexedCols",
    ),
    OptionSpec(
        "dataSkippingStatsColumns",
        "str",
        None,
        "the columns with min/max statistics (comma list; replaces `dataSkippingNumIndexedCols`; "
        "names that are not data columns are logged and left out, as in the reference)",
        reference="dataSkippingStatsColumns",
    ),
    OptionSpec("stats.truncation.enabled", "bool", True, "truncate long string statistics"),
    OptionSpec("stats.truncation.maxLength", "int", 32, "string statistics truncation"),
)
