"""An invalid full-text query is an error naming the query and the position of the fault (no Spark)."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
import tantivy

from indextables_spark.errors import IndexTablesError, QueryParseError
from indextables_spark.config.options import Options
from indextables_spark.core.split.write.builder import SplitWriter
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.expr.query_errors import format_query_error, locate_query_error
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.storage.local import LocalStorage
from indextables_spark.expr.search_query import SearchQuery

FIELD_TYPES = {"body": "text", "tag": "text", "n": "i64", "u": "u64", "score": "f64", "flag": "bool", "attrs": "json"}
DEFAULT = ["body"]


@pytest.fixture(scope="module")
def index():
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", stored=False)
    sb.add_text_field("tag", stored=False, tokenizer_name="raw")
    sb.add_integer_field("n", stored=False, indexed=True, fast=True)
    sb.add_unsigned_field("u", stored=False, indexed=True, fast=True)
    sb.add_float_field("score", stored=False, indexed=True, fast=True)
    sb.add_boolean_field("flag", stored=False, indexed=True, fast=True)
    sb.add_json_field("attrs", stored=False)
    return tantivy.Index(sb.build())


def locate(index, query):
    with pytest.raises(ValueError) as e:
        index.parse_query(query, DEFAULT)
    return locate_query_error(index, query, DEFAULT, e.value, FIELD_TYPES)


@pytest.mark.parametrize(
    "query, position, reason",
    [
        # unclosed parenthesis / quote: the lenient parser's position (the end of the query)
        ("body:(a", 7, "expected ')'"),
        ("(a OR b", 7, "expected ')'"),
        ('body:"abc', 9, 'missing closing " (opened at position 5)'),
        ("x 'a b", 6, "missing closing ' (opened at position 2)"),
        # stray ")"
        ("a b)", 3, "unmatched ')'"),
        ("(a) b) c", 5, "unmatched ')'"),
        # leading operator (Tantivy reports the end of the next term; the operator is named instead)
        ("AND a", 0, "'AND' has no term before it"),
        ("x AND (OR b)", 7, "'OR' has no term before it"),
        # trailing operator (the lenient parser sees nothing wrong)
        ("a AND", 2, "'AND' has no term after it"),
        ("body:a OR ", 7, "'OR' has no term after it"),
        ("body:a AND NOT", 11, "'NOT' has no term after it"),
        ("(a AND) b", 3, "'AND' has no term after it"),
        # two operators in a row: the second one
        ("body:a OR OR b", 10, "'OR' right after 'OR'"),
        ("a AND OR b", 6, "'OR' right after 'AND'"),
        ("a NOT AND b", 6, "'AND' right after 'NOT'"),
        # unknown field: its "name:", not an earlier occurrence inside a quoted phrase
        ("foo:x", 0, "unknown field 'foo'"),
        ('"foo:x" foo:y', 8, "unknown field 'foo'"),
        ("body:'see foo:x' AND -foo:(a OR b)", 22, "unknown field 'foo'"),
        ("body:a foo :b", 7, "unknown field 'foo'"),
        # a value that is not of its field's type
        ("n:abc", 2, "'abc' is not an integer (field 'n' is i64)"),
        ("n:1 body:abc n:abc", 15, "'abc' is not an integer (field 'n' is i64)"),
        ("n:>=x", 4, "'x' is not an integer (field 'n' is i64)"),
        ("n:(1 OR (2 AND x))", 15, "'x' is not an integer (field 'n' is i64)"),
        ("n:IN [1 2 x]", 10, "'x' is not an integer (field 'n' is i64)"),
        ("n:99999999999999999999", 2, "'99999999999999999999' is out of range for field 'n' (i64)"),
        ("score:abc", 6, "'abc' is not a number (field 'score' is f64)"),
        ("flag:TRUE", 5, "'TRUE' is not true or false (field 'flag' is bool)"),
        # a bad range bound
        ("n:[1 TO x]", 8, "'x' is not an integer (field 'n' is i64)"),
        ("n:{x TO 5]", 3, "'x' is not an integer (field 'n' is i64)"),
        ("score:[1.5 TO 2,5]", 14, "'2,5' is not a number (field 'score' is f64)"),
        # non-ASCII text before the fault: character positions, not UTF-8 byte offsets
        ("héllo body:(a", 13, "expected ')'"),
        ("ééé)", 3, "unmatched ')'"),
        ("漢字 n:[1 TO x]", 11, "'x' is not an integer (field 'n' is i64)"),
        ('"ünknown" ünknown:x', 10, "unknown field 'ünknown'"),
        ("naïve OR OR b", 9, "'OR' right after 'OR'"),
        # quotes inside a word, a lone "-", a range without a field
        ("body:don't", 8, "quote inside a word (quote the whole term, or escape it with \\)"),
        ("a - b", 2, "'-' must be attached to a term (-term)"),
        ("a [1 TO 2]", 2, "a range needs a field (field:[a TO b])"),
    ],
)
def test_locates_the_fault(index, query, position, reason):
    assert locate(index, query) == (position, reason)


@pytest.mark.parametrize("query", ["NOT a", "-a", "-a -b"])
def test_only_excluded_terms_is_a_fault_of_the_whole_query(index, query):
    with pytest.raises(ValueError) as e:
        index.parse_query(query, DEFAULT)
    assert locate_query_error(index, query, DEFAULT, e.value, FIELD_TYPES) == (
        0,
        "every term is excluded (NOT/-); add one that must match, e.g. '* AND NOT a'",
    )


def test_without_field_types_a_bad_value_has_no_position(index):
    with pytest.raises(ValueError) as e:
        index.parse_query("n:abc", DEFAULT)
    assert locate_query_error(index, "n:abc", DEFAULT, e.value) == (None, str(e.value))


def test_format_names_the_query_and_puts_a_caret_under_the_fault():
    msg = format_query_error(
        "body:(a", 7, "expected ')'", "Syntax Error: body:(a", "(searchable fields: body, n; default fields: body)"
    )
    assert msg == (
        "invalid query 'body:(a' at position 7 (expected ')'):\n"
        "  body:(a\n"
        "         ^\n"
        "Syntax Error: body:(a (searchable fields: body, n; default fields: body)"
    )
    # wide characters take two columns, a tab is shown as one space: the caret stays under the fault
    lines = format_query_error("漢字\tb)", 4, "unmatched ')'", "Syntax Error").split("\n")
    assert lines[1:3] == ["  漢字 b)", "        ^"]
    # no position: the message of before
    assert (
        format_query_error("NOT a", None, "x", "Invalid query", "(note)")
        == "invalid query 'NOT a': Invalid query (note)"
    )


# -- through SplitReader.parse_query ------------------------------------------------------------


def field(name, t):
    return {"name": name, "type": t, "nullable": True, "metadata": {}}


SCHEMA = {
    "type": "struct",
    "fields": [
        field("id", "long"),
        field("body", "string"),
        field("tag", "string"),
        field("year", "integer"),
        field("score", "double"),
    ],
}


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    root = tmp_path_factory.mktemp("qe")
    storage = LocalStorage(str(root / "t"))
    rows = [
        {
            "id": i,
            "body": ["apache spark", "tantivy search", "naïve café"][i % 3],
            "tag": "red",
            "year": 2000 + i,
            "score": i / 2,
        }
        for i in range(6)
    ]
    w = SplitWriter(storage, SCHEMA, [], Options.of({"indexing.typemap.body": "text"}))
    w.write_batch(pa.Table.from_pylist(rows, schema=arrow_schema(SCHEMA)))
    (add,) = w.finish()
    return SplitReader(get_cache(Options.of({"cache.disk.path": str(root / "cache")})).local_dir(storage, add))


@pytest.mark.parametrize(
    "query, position",
    [
        ("body:(spark", 11),
        ('body:"spark', 11),
        ("spark)", 5),
        ("AND spark", 0),
        ("spark AND", 6),
        ("spark OR OR search", 9),
        ('"nosuch:x" nosuch:x', 11),
        ("year:abc", 5),
        ("year:[2000 TO x]", 14),
        ("café naïve OR", 11),
    ],
)
def test_reader_error_names_query_and_position(reader, query, position):
    with pytest.raises(QueryParseError) as e:
        reader.tantivy_query(SearchQuery(query))
    err = e.value
    assert isinstance(err, IndexTablesError)
    assert (err.query, err.position) == (query, position)
    first, shown, caret, rest = str(err).split("\n")
    assert first.startswith(f"invalid query {query!r} at position {position} (") and first.endswith("):")
    assert shown == "  " + query and caret == "  " + " " * position + "^"
    assert rest.endswith("(searchable fields: body, id, score, tag, year; default fields: body)")
    # searching raises the same error
    with pytest.raises(QueryParseError, match="at position"):
        reader.count(query=SearchQuery(query))


def test_reader_error_attributes_and_pickling(reader):
    with pytest.raises(QueryParseError) as e:
        reader.tantivy_query(SearchQuery("NOT spark"))
    assert e.value.position == 0 and e.value.query == "NOT spark"
    assert str(e.value).startswith("invalid query 'NOT spark' at position 0 (every term is excluded")
    with pytest.raises(QueryParseError) as e:
        reader.tantivy_query(SearchQuery("year:>=x"))
    back = pickle.loads(pickle.dumps(e.value))
    assert (str(back), back.query, back.position, back.reason) == (
        str(e.value),
        "year:>=x",
        7,
        "'x' is not an integer (field 'year' is i64)",
    )
    assert str(QueryParseError("plain")) == "plain" and QueryParseError("plain").position is None
