"""Hostile input: paths in actions that escape the table root are refused on read and on write;
parsers fuzzed with hypothesis raise nothing but IndexTablesError; tantivy panics become
TantivyError. Examples per property: INDEXTABLES_FUZZ_EXAMPLES (default 150)."""

from __future__ import annotations

import gzip
import json
import os
import sys

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import indextables_spark as it
from indextables_spark.errors import IndexTablesError, PathEscapeError
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.expr.search_query import SearchQuery

sys.path.insert(0, os.path.dirname(__file__))
import crash_harness as ch  # noqa: E402

EXAMPLES = int(os.environ.get("INDEXTABLES_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

ESCAPING = [
    "../outside.split",
    "../../outside.split",
    "splits/../../outside.split",
    "./../outside.split",
    "/etc/passwd",
    "//evil-host/share/x.split",
    "s3://other-bucket/t/splits/x.split",
    "s3a://other-bucket/x.split",
    "az://otheraccount/container/x.split",
    "abfss://c@other.dfs.core.windows.net/x.split",
    "file:///etc/passwd",
    "..\\outside.split",
    "splits\\..\\..\\outside.split",
    "splits/\x00/x.split",
    "",
]
# URL-encoded tricks: never decoded, so they name files *inside* the root (which do not exist).
ENCODED = ["%2e%2e/outside.split", "%2E%2E%2Foutside.split", "..%2foutside.split", "%252e%252e/outside.split"]


def _table(tmp_path):
    root = str(tmp_path / "root" / "t")
    t = it.IndexTable(root, ch.TABLE_OPTIONS)
    ch.create_table(t, list(range(6)))
    with open(tmp_path / "root" / "outside.split", "wb") as f:  # a sentinel next to the table
        f.write(b"not yours")
    return it.IndexTable(root, {**ch.TABLE_OPTIONS, "spark.indextables.cache.disk.path": str(tmp_path / "cache")})


def _forge_version(t, path: str) -> None:
    """A crafted version file (written by someone else) adding a split at `path`."""
    good = t.snapshot().files[0]
    add = AddFile.from_json({**good.to_json(), "path": path})
    v = t.version() + 1
    line = (
        json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}})
        + "\n"
        + json.dumps({"add": add.to_json()})
        + "\n"
    )
    with open(os.path.join(t.path, "_transaction_log", f"{v:020d}.json"), "wb") as f:
        f.write(gzip.compress(line.encode()))


@pytest.mark.parametrize("path", ESCAPING, ids=[repr(p) for p in ESCAPING])
def test_escaping_paths_are_refused_on_write(tmp_path, path):
    t = _table(tmp_path)
    good = t.snapshot().files[0]
    before = t.version()
    with pytest.raises(PathEscapeError) as e:
        t.transaction().add_files([AddFile.from_json({**good.to_json(), "path": path})]).commit()
    assert repr(path)[1:-1][:20] in str(e.value) or path in str(e.value) or not path
    with pytest.raises(PathEscapeError):
        t.transaction().remove_files([path]).commit()
    assert t.version() == before  # nothing committed


@pytest.mark.parametrize("path", ESCAPING + ENCODED, ids=[repr(p) for p in ESCAPING + ENCODED])
def test_escaping_paths_in_a_crafted_log_are_refused_on_read(tmp_path, path):
    t = _table(tmp_path)
    sentinel = tmp_path / "root" / "outside.split"
    _forge_version(t, path)
    t = it.IndexTable(t.path, t.options)
    # Queries open every split: the crafted one is refused (escaping) or not found (encoded: the
    # literal name inside the root), never read from outside.
    with pytest.raises(IndexTablesError) as e:
        t.count(query="word1 OR word2")
    if path in ESCAPING:
        assert isinstance(e.value, PathEscapeError), e.value
    else:
        assert "not found" in str(e.value) and path in str(e.value)
    # Maintenance never touches the outside: merge (skips the bad source), purge, drop.
    try:
        t.maintenance.merge_splits()
    except IndexTablesError:
        pass
    t.maintenance.purge(older_than_hours=0)
    assert sentinel.read_bytes() == b"not yours"
    assert os.path.exists("/etc/passwd")


def test_escaping_paths_are_refused_by_every_storage_call(storage_backend):
    s = storage_backend.open()
    s.put("inside/x", b"1")
    for path in ESCAPING:
        for call in (
            lambda: s.read(path),
            lambda: s.read_range(path, 0, 1),
            lambda: s.put(path, b"x"),
            lambda: s.put_if_absent(path, b"x"),
            lambda: s.stat(path),
            lambda: s.delete([path, "inside/x"]),
        ):
            with pytest.raises(PathEscapeError):
                call()
    assert s.read("inside/x") == b"1"  # a batch with one bad key deletes nothing


# ---- fuzzing: only our error types ------------------------------------------------------------------------


def _only_ours(fn, *args):
    try:
        fn(*args)
    except IndexTablesError:
        pass
    except BaseException as e:  # noqa: BLE001 - the point of the test
        raise AssertionError(f"{fn.__module__}.{fn.__qualname__}{args!r:.300} raised {type(e).__name__}: {e}") from e


json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.text(max_size=12)
)
json_values = st.recursive(
    json_leaf,
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=8), c, max_size=4)),
    max_leaves=12,
)
TYPE_NAMES = [
    "string",
    "long",
    "integer",
    "short",
    "byte",
    "double",
    "float",
    "boolean",
    "binary",
    "date",
    "timestamp",
    "timestamp_ntz",
    "decimal(10,2)",
    "decimal(40,2)",
    "decimal(x)",
    "interval",
    "void",
    "variant",
    "char(3)",
    "varchar(4)",
    "struct",
    "array",
    "map",
    "",
]
spark_types = st.recursive(
    st.sampled_from(TYPE_NAMES) | json_values,
    lambda c: st.one_of(
        st.fixed_dictionaries({"type": st.just("array"), "elementType": c, "containsNull": st.booleans()}),
        st.fixed_dictionaries({"type": st.just("map"), "keyType": c, "valueType": c}),
        st.fixed_dictionaries(
            {
                "type": st.just("struct"),
                "fields": st.lists(
                    st.fixed_dictionaries({"name": st.text(max_size=6), "type": c, "nullable": st.booleans()}),
                    max_size=3,
                ),
            }
        ),
    ),
    max_leaves=6,
)
schemas = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {
            "type": st.just("struct"),
            "fields": st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.text(max_size=8),
                        "type": spark_types,
                        "nullable": st.booleans(),
                        "metadata": st.just({}),
                    }
                ),
                max_size=5,
            ),
        }
    ),
)
option_maps = st.dictionaries(
    st.sampled_from(
        [
            "indexing.typemap.a",
            "indexing.tokenizer.a",
            "indexing.indexrecordoption.a",
            "indexing.fastfields",
            "dataSkippingNumIndexedCols",
            "stats.truncation.maxLength",
            "indexing.typemap.b",
            "indexWriter.heapSize",
            "indexing.primaryKey",
        ]
    ),
    st.text(max_size=10)
    | st.sampled_from(
        [
            "text",
            "string",
            "text_and_string",
            "json",
            "raw",
            "default",
            "en_stem",
            "position",
            "freq",
            "basic",
            "a",
            "-1",
            "1e99",
            "10G",
        ]
    ),
    max_size=4,
)


@FUZZ
@given(schema=schemas, parts=st.lists(st.text(max_size=4), max_size=2), opts=option_maps)
def test_fuzz_schema_strings_and_settings(schema, parts, opts):
    from indextables_spark.config.options import Options
    from indextables_spark.core.schema.arrow_types import arrow_schema
    from indextables_spark.core.split.format.column_specs import validate_schema
    from indextables_spark.core.split.format.doc_mapping import doc_mapping_json

    o = Options.of(opts)

    def run():
        validate_schema(schema, parts, o)
        doc_mapping_json(schema, parts, o)
        arrow_schema(schema)

    _only_ours(run)


@FUZZ
@given(
    mapping=st.one_of(
        st.text(max_size=60),
        json_values.map(json.dumps),
        st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.text(max_size=5),
                    "type": st.text(max_size=8)
                    | st.sampled_from(["text", "i64", "f64", "bool", "json", "bytes", "datetime"]),
                },
                optional={
                    "tokenizer": st.text(max_size=6),
                    "record": st.text(max_size=6),
                    "fast": json_leaf,
                    "indexed": json_leaf,
                    "stored": json_leaf,
                },
            ),
            max_size=4,
        ).map(json.dumps),
    )
)
def test_fuzz_doc_mappings(mapping):
    from indextables_spark.core.split.format.doc_mapping import specs_from_doc_mapping, tantivy_schema

    _only_ours(lambda: tantivy_schema(specs_from_doc_mapping(mapping)))


@FUZZ
@given(
    value=st.one_of(
        st.none(),
        st.text(max_size=20),
        st.sampled_from(
            ["NaN", "-0", "1e400", "2024-02-30", "9999999999999999999999", "__HIVE_DEFAULT_PARTITION__", "%zz", "a/b=c"]
        ),
    ),
    spark_type=st.sampled_from(
        [
            "string",
            "long",
            "integer",
            "short",
            "byte",
            "double",
            "float",
            "boolean",
            "date",
            "timestamp",
            "timestamp_ntz",
            "decimal(10,2)",
            "binary",
            "decimal(38,38)",
        ]
    ),
)
def test_fuzz_partition_values(value, spark_type):
    from indextables_spark.core.schema.partitions import (
        parse_partition_value,
        partition_path,
        partition_value_array,
        unescape_path_name,
    )
    from indextables_spark.core.schema.arrow_types import arrow_type

    def run():
        parse_partition_value(value, spark_type)
        partition_path(["c"], {"c": value})
        if value is not None:
            unescape_path_name(value)
        partition_value_array(value, arrow_type(spark_type), 2)

    _only_ours(run)


@FUZZ
@given(
    text=st.one_of(
        st.text(max_size=40),
        st.lists(
            st.sampled_from(
                [
                    "day",
                    "id",
                    "=",
                    "<>",
                    "!=",
                    "<",
                    ">=",
                    "IN",
                    "(",
                    ")",
                    ",",
                    "'x'",
                    "'2024-01-01'",
                    "1",
                    "-1e309",
                    "NULL",
                    "IS",
                    "NOT",
                    "AND",
                    "OR",
                    "BETWEEN",
                    "LIKE",
                    "''''",
                    "`day`",
                    '"',
                    "TRUE",
                    "9" * 30,
                ]
            ),
            max_size=10,
        ).map(" ".join),
    )
)
def test_fuzz_partition_filters_and_commands(text):
    from indextables_spark.frontends.sql_parser import parse_command
    from indextables_spark.expr.partition_filter import parse_partition_filter, parse_predicate

    types = {"day": "string", "id": "long"}
    _only_ours(parse_partition_filter, text, types)
    _only_ours(parse_predicate, text, {**types, "body": "string", "views": "double"})
    _only_ours(parse_command, f"MERGE SPLITS '/t' WHERE {text}")
    _only_ours(parse_command, f"PURGE INDEXTABLE '/t' OLDER THAN {text}")
    _only_ours(parse_command, text)


@FUZZ
@given(
    key=st.sampled_from(
        [
            "checkpoint.interval",
            "purge.defaultRetentionHours",
            "write.targetSplitSize",
            "transaction.retry.maxAttempts",
            "transaction.retry.timeBudgetMs",
            "state.compressionLevel",
            "read.batchSize",
            "state.format",
            "state.compression",
            "merge.targetSize",
            "cache.disk.maxSize",
            "storage.retry.maxAttempts",
            "s3.pathStyleAccess",
            "aws.region",
            "s3.endpoint",
            "limit",
            "versionAsOf",
            "timestampAsOf",
            "query",
        ]
    ),
    value=st.text(max_size=16)
    | st.sampled_from(["-1", "0", "1e308", "nan", "inf", "10X", "5G", "true ", "99999999999999999999"]),
)
def test_fuzz_option_values(key, value):
    from indextables_spark.ops.maintenance.merge_plan import MergeConfig
    from indextables_spark.ops.maintenance.purge import PurgeConfig
    from indextables_spark.core.log.commit.policy import CommitPolicy
    from indextables_spark.core.log.state.state_config import StateConfig
    from indextables_spark.core.log.read.table_log import parse_timestamp
    from indextables_spark.config.options import Options
    from indextables_spark.spark.read_options import read_options
    from indextables_spark.core.storage import open_storage

    o = Options.of({f"spark.indextables.{key}": value})
    for getter in (o.get_int, o.get_float, o.get_bool, o.get_size):
        _only_ours(getter, key, 1)
    _only_ours(lambda: StateConfig.from_options(o))
    _only_ours(lambda: CommitPolicy.from_options(o))
    _only_ours(lambda: PurgeConfig.from_options(o))
    _only_ours(lambda: MergeConfig.from_options(o, None, None, None))
    _only_ours(lambda: read_options(Options.of({key: value})))
    _only_ours(parse_timestamp, value)
    _only_ours(lambda: open_storage(f"s3://bucket/{value}", o))


@FUZZ
@given(
    obj=st.dictionaries(
        st.sampled_from(
            [
                "add",
                "remove",
                "metaData",
                "protocol",
                "commitInfo",
                "mergeskip",
                "deleteLog",
                "statsFiles",
                "txn",
                "cdc",
            ]
        ),
        json_values,
        min_size=1,
        max_size=1,
    )
)
def test_fuzz_action_json(obj):
    from indextables_spark.core.log.model.action_wire import action_from_json
    from indextables_spark.core.log.model.codec import decode_actions

    _only_ours(action_from_json, obj, "fuzz.json")
    _only_ours(decode_actions, json.dumps(obj).encode(), "fuzz.json")
    _only_ours(decode_actions, gzip.compress(json.dumps(obj).encode())[:-3], "fuzz.json")


@pytest.fixture(scope="module")
def split_reader(tmp_path_factory):
    from indextables_spark.core.split.cache.cache import get_cache
    from indextables_spark.core.split.read.reader import SplitReader

    root = str(tmp_path_factory.mktemp("q") / "t")
    t = it.IndexTable(root, ch.TABLE_OPTIONS)
    ch.create_table(t, list(range(20)))
    add = t.snapshot().files[0]
    return SplitReader(get_cache({"cache.disk.path": str(tmp_path_factory.mktemp("qc"))}).local_dir(t.storage, add))


QUERY_PIECES = [
    "body:",
    "id:",
    "p:",
    "doc",
    "word1",
    "*",
    "?",
    "~",
    "^",
    '"',
    "'",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "TO",
    "AND",
    "OR",
    "NOT",
    "-",
    "+",
    ":",
    "\\",
    "/",
    "IN",
    "[1 TO 5]",
    "{* TO 3}",
    "id:>3",
    "id:<=-9e99",
    'body:"doc 1"~2',
    "nosuch:x",
    "_indexall:",
    "*:*",
    "body:/re[/",
    "id:abc",
    "2" * 25,
    "\x00",
    "é",
]


@FUZZ
@given(
    query=st.one_of(st.text(max_size=30), st.lists(st.sampled_from(QUERY_PIECES), max_size=8).map(" ".join)),
    limit=st.integers(-1, 3),
)
def test_fuzz_query_strings(split_reader, query, limit):
    def run():
        split_reader.count(query=SearchQuery(query))
        list(split_reader.read(query=SearchQuery(query), columns=["id"]))
        if limit >= 0:
            split_reader.search_scored(SearchQuery(query), limit=limit)

    _only_ours(run)


def test_tantivy_panics_become_our_errors(split_reader):
    """A real pyo3 PanicException (search with limit 0 panics in tantivy) is converted."""
    from indextables_spark.core.split.format._tantivy import TantivyError, tantivy_call

    query = split_reader.index.parse_query("*", ["body"])
    with pytest.raises(TantivyError, match="panicked"):
        with tantivy_call("searching split x"):
            split_reader.index.searcher().search(query, 0)
    # The public path asks for zero hits without reaching the panic.
    try:
        split_reader.search_scored("doc", limit=0)
    except IndexTablesError:
        pass


def test_fuzz_write_rows_through_the_split_writer(tmp_path):
    """Hostile values in rows (huge tokens, NUL, invalid surrogates replaced, extreme numbers)."""
    from indextables_spark.core.split.write.builder import SplitWriter

    t = it.IndexTable(str(tmp_path / "t"))
    values = ["", "\x00", "a" * 100_000, "é" * 5000, "\ud7ff", " ".join(["x"] * 20000), "NaN", "\\u0000", None]
    ids = list(range(len(values)))
    data = pa.table(
        {
            "id": pa.array([-(2**63), 2**63 - 1, 0, 1, 2, 3, 4, 5, None], pa.int64()),
            "body": pa.array(values, pa.string()),
            "p": pa.array(["a/b", "..", "%2e", "x=y", "", "\n", "é", None, "/"]),
        }
    )
    w = SplitWriter(t.storage, ch.SCHEMA, ch.PARTITIONS, t.options)
    w.write_batch(data)
    adds = w.finish()
    for a in adds:
        from indextables_spark.core.storage.base import check_key

        assert check_key(a.path) == a.path and not a.path.startswith("..")
    assert sum(a.num_records for a in adds) == len(ids)
