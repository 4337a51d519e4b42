"""Column specs (how each column is stored and indexed in a split) and reading Spark type JSON.

Built from a Spark schema and the indexing options by core/split/format/column_specs.py; written to
and read back from a split's doc mapping by core/split/format/doc_mapping.py; Arrow types of Spark types: arrow_types.py.

Works on the JSON dict `StructType.jsonValue()` produces, so pyspark is not needed here.

Column kinds and their Tantivy fields (the doc mapping):

| kind              | Spark types                      | Tantivy field(s)                                       |
|-------------------|----------------------------------|--------------------------------------------------------|
| `string`          | string (default), char, varchar  | text `<col>`, tokenizer `raw`, fast (exact terms)      |
| `text`            | string + typemap `text`          | text `<col>`, tokenizer from options (`default`)       |
| `text_and_string` | string + typemap `text_and_string` | text `<col>` (tokenized) + text `<col>__exact` (raw) |
| `string`          | string + typemap `exact_only`    | u64 `<col>`: the value's xxHash64 (compact_strings.py) |
| `text`            | string + typemap `text_uuid_*` / `text_custom_*` | text `<col>` stripped (+ u64 `<col>__uuids`) |
| `i64`             | byte, short, integer, long       | i64 `<col>`, indexed + fast                            |
| `f64`             | float, double                    | f64 `<col>` (NaN/±inf mapped to ±f64::MAX, see below)  |
| `bool`            | boolean                          | bool `<col>`                                           |
| `date`            | date                             | i64 days since 1970-01-01                              |
| `timestamp`       | timestamp, timestamp_ntz         | i64 microseconds since the epoch (UTC / wall clock)    |
| `decimal`         | decimal(p,s)                     | f64 approximation (narrowing only, never exact)        |
| `binary`          | binary                           | none (stored in the row store only)                    |
| `json`            | array, map, struct               | json `<col>` from the JSON-encoded value               |
| `vector`          | array<float/double> + `indexing.vector.<col>` | none: an ANN index of its own (vector_index.py) |

A hidden fast u64 field `__row` (row position inside the split) is always present. Column names
that are not plain identifiers (spaces, dots, ...) or that collide with generated names get a
sanitised field name; the doc mapping records the column each field belongs to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, TypeAlias

from indextables_spark.errors import InvalidOptionError, SchemaMismatchError, UnsupportedTypeError

# A Spark type as schema JSON (`DataType.jsonValue()`): an atomic type's name ("long",
# "decimal(10,2)"), or an object for array, map, struct and user-defined types.
SparkType: TypeAlias = str | dict[str, Any]

ROW_FIELD = "__row"
EXACT_SUFFIX = "__exact"
KINDS = (
    "string",
    "text",
    "text_and_string",
    "i64",
    "f64",
    "bool",
    "date",
    "timestamp",
    "decimal",
    "binary",
    "json",
    "vector",
)
VECTOR_METRICS = ("cosine", "l2", "dot")
STRING_KINDS = frozenset({"string", "text", "text_and_string"})

_INT_TYPES = frozenset({"byte", "short", "integer", "long"})
_DECIMAL_RE = re.compile(r"^decimal(?:\(\s*(\d+)\s*,\s*(-?\d+)\s*\))?$")
_CHAR_RE = re.compile(r"^(?:var)?char\(\s*\d+\s*\)$")


@dataclass(frozen=True)
class IndexedField:
    """One Tantivy field of a column."""

    name: str  # Tantivy field name
    type: str  # text | i64 | u64 | f64 | bool | json
    tokenizer: str | None = None
    record: str | None = None  # index record option of text/json fields
    fast: bool = False
    indexed: bool = True
    exact: bool = False  # raw-tokenized text: a term is the whole value
    # Tokens of this many UTF-8 bytes or more are dropped (indexing.text.maxTokenLength); None:
    # the tokenizer's own limit (every field of a doc mapping that does not record one).
    token_limit: int | None = None
    # A raw (exact) field that leaves values of this many UTF-8 bytes or more out of the index
    # (a split the reference implementation wrote: its tokenizers drop such a token); None: every
    # value is indexed (ours cut long values to a prefix term instead: write/documents.exact_term).
    max_value_bytes: int | None = None
    # A compact string mode (core/schema/compact_strings.py) on every field of its column: a u64
    # field holds xxHash64s of whole values (exact_only) or of pattern matches (`<col>__uuids`),
    # a text field the value with the pattern's matches stripped.
    string_mode: str | None = None

    @property
    def index_tokenizer(self) -> str | None:
        """The tokenizer name in the Tantivy schema: `<tokenizer>_limit_<n>` with a recorded limit
        (the reference's naming, analyzers.py registers it), else the tokenizer's own name."""
        if self.token_limit is None or self.tokenizer is None:
            return self.tokenizer
        return f"{self.tokenizer}_limit_{self.token_limit}"


@dataclass(frozen=True)
class VectorSpec:
    """A vector column's shape and how its vectors compare (`indexing.vector.<col>`): `cosine`
    (distance 1 - cosine similarity), `l2` (squared Euclidean distance) or `dot` (distance: the
    negated inner product). Smaller distances are nearer for all three. `kind` and `params`: the
    nearest-neighbour index each split builds of it and the parameters given for it
    (core/split/format/vector_kinds.py; None: the default kind)."""

    dims: int
    metric: str = "cosine"
    kind: str | None = None
    params: tuple[tuple[str, int], ...] = ()  # (name, value), sorted by name


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    spark_type: SparkType
    kind: str
    indexed_fields: tuple[IndexedField, ...] = ()
    nullable: bool = True
    partition: bool = False  # partition columns are not stored in splits
    # Set per split by the reader: some raw terms of this column were cut to Tantivy's term
    # length limit, so pattern (regex) narrowing on the exact field would miss rows.
    terms_truncated: bool = False
    # Set per split by the reader: every token of this text column was indexed (none dropped for
    # length), so fragments of a substring pattern may narrow through term regexes (text.py).
    fully_tokenized: bool = False
    # `indexing.indexonlyfields`: indexed but left out of the row store; reads return NULL and
    # filters on it are answered by the index alone (see `index_only_columns`).
    index_only: bool = False
    vector: VectorSpec | None = None  # kind `vector`: its shape and metric

    @property
    def exact_field(self) -> IndexedField | None:
        """The raw (whole value) text field, if any."""
        return next((f for f in self.indexed_fields if f.exact), None)

    @property
    def value_field(self) -> IndexedField | None:
        """The main field: tokenized text, number, bool, json."""
        return next((f for f in self.indexed_fields if not f.exact), self.exact_field)

    @property
    def string_mode(self) -> str | None:
        """The column's compact string mode (compact_strings.py), None for the others."""
        return next((f.string_mode for f in self.indexed_fields if f.string_mode), None)

    @property
    def hash_field(self) -> IndexedField | None:
        """The u64 field of hashes of a compact string column (exact_only: the column's own)."""
        return next((f for f in self.indexed_fields if f.string_mode and f.type == "u64"), None)


# ---------------------------------------------------------------------------------------------
# Spark type JSON helpers (None: a type the JSON lacks, such as a missing elementType: unsupported)


def type_name(spark_type: SparkType | None) -> str:
    """'integer', 'decimal(10,2)', 'array', 'map', 'struct', ... (readable, for messages)."""
    if isinstance(spark_type, dict):
        return str(spark_type.get("type"))
    return str(spark_type)


def decimal_precision_scale(spark_type: SparkType) -> tuple[int, int] | None:
    if not isinstance(spark_type, str):
        return None
    m = _DECIMAL_RE.match(spark_type.strip().lower())
    if not m:
        return None
    if m.group(1) is None:
        return 10, 0  # Spark's DecimalType() default
    return int(m.group(1)), int(m.group(2))


def is_string_type(t: str) -> bool:
    t = t.strip().lower()
    if t == "string" or _CHAR_RE.match(t):
        return True
    # Spark 4 collations: only binary (byte-wise) comparison matches our exact semantics.
    return t in ("string collate utf8_binary",)


def atomic_kind(spark_type: SparkType | None) -> str | None:
    """Kind of an atomic Spark type, 'json' for complex types, None when unsupported."""
    if isinstance(spark_type, dict):
        return "json" if spark_type.get("type") in ("array", "map", "struct") else None
    t = str(spark_type).strip().lower()
    if is_string_type(t):
        return "string"
    if t in _INT_TYPES:
        return "i64"
    if t in ("float", "double"):
        return "f64"
    if t == "boolean":
        return "bool"
    if t == "date":
        return "date"
    if t in ("timestamp", "timestamp_ntz"):
        return "timestamp"
    if t == "binary":
        return "binary"
    if decimal_precision_scale(t) is not None:
        return "decimal"
    return None


def check_nested(column: str, path: str, spark_type: SparkType | None) -> None:
    """Every type inside an array/map/struct must be storable too."""
    if isinstance(spark_type, dict):
        t = spark_type.get("type")
        if t == "array":
            check_nested(column, path + "[]", spark_type.get("elementType"))
            return
        if t == "map":
            check_nested(column, path + ".key", spark_type.get("keyType"))
            check_nested(column, path + ".value", spark_type.get("valueType"))
            return
        if t == "struct":
            for f in spark_type.get("fields") or []:
                check_nested(column, f"{path}.{f.get('name')}", f.get("type"))
            return
        raise UnsupportedTypeError(f"column {column!r}: unsupported type {type_name(spark_type)!r} at {path!r}")
    if atomic_kind(spark_type) is None:
        where = "" if path == column else f" at {path!r}"
        raise UnsupportedTypeError(
            f"column {column!r}{where}: unsupported Spark type {type_name(spark_type)!r} "
            f"(supported: strings, numbers, decimal, boolean, binary, date, timestamp, timestamp_ntz, "
            f"and arrays/maps/structs of those)"
        )


def schema_fields(schema_json: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not isinstance(schema_json, Mapping) or schema_json.get("type") != "struct":
        raise SchemaMismatchError(f"expected a Spark StructType JSON object, got {str(schema_json)[:200]}")
    return list(schema_json.get("fields") or [])


def specs_by_name(specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec]) -> dict[str, ColumnSpec]:
    if isinstance(specs, Mapping):
        return dict(specs)
    return {s.name: s for s in specs}


def row_store_columns(specs: Iterable[ColumnSpec]) -> list[str]:
    """The columns a split's row store holds: the non-partition ones that are not index-only."""
    return [s.name for s in specs if not s.partition and not s.index_only]


def index_only_columns(specs: Iterable[ColumnSpec]) -> frozenset[str]:
    """Lower-cased names of the index-only columns (`indexing.indexonlyfields`)."""
    return frozenset(s.name.lower() for s in specs if s.index_only)


def check_snippet_fields(specs: Iterable[ColumnSpec], fields: Iterable[str], path: str) -> None:
    """InvalidOptionError for snippets asked of a column that has none, naming it: an index-only
    column (no text to cut them from), or one that is not an indexed string column of the splits
    (a number, a partition or stored-only column, a name not in the table). The one check of every
    route (the Spark-free search, Spark reads, the table functions), before a split is opened."""
    specs, fields = list(specs), list(fields)
    unstored = [c for c in fields if any(s.index_only and s.name == c for s in specs)]
    if unstored:
        raise InvalidOptionError(
            f"snippets of {unstored} on {path}: index-only columns (indexing.indexonlyfields) keep no text to "
            f"cut snippets from"
        )
    # (a split cuts snippets from the column's tokenized or raw text field: SplitReader.snippets)
    texts = sorted(s.name for s in specs if s.value_field is not None and s.value_field.type == "text")
    bad = [c for c in fields if c not in texts]
    if bad:
        raise InvalidOptionError(
            f"snippets of {bad} on {path}: not indexed string columns of the splits (string columns: {texts})"
        )


def with_truncated_terms(specs: Iterable[ColumnSpec], columns: Iterable[str]) -> list[ColumnSpec]:
    cols = set(columns)
    return [replace(s, terms_truncated=True) if s.name in cols else s for s in specs]


def with_fully_tokenized(specs: Iterable[ColumnSpec], columns: Iterable[str]) -> list[ColumnSpec]:
    cols = set(columns)
    return [replace(s, fully_tokenized=True) if s.name in cols else s for s in specs]


_SIMPLE_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def spark_type_text(t: SparkType, simple_names: bool = True) -> str:
    """A schema JSON type as one line: Spark's DataType.simpleString() (`bigint`, `array<int>`,
    `struct<a:bigint>`; error messages), or with `simple_names=False` the JSON's own type names
    (`long`, `array<integer>`: DESCRIBE INDEXTABLES TABLE). A UDT shows its SQL type."""

    def text(t: SparkType | None) -> str:
        if isinstance(t, str):
            return _SIMPLE_NAMES.get(t, t) if simple_names else t
        if not isinstance(t, dict):
            return str(t)
        kind = t.get("type")
        if kind == "array":
            return f"array<{text(t.get('elementType'))}>"
        if kind == "map":
            return f"map<{text(t.get('keyType'))},{text(t.get('valueType'))}>"
        if kind == "struct":
            return "struct<" + ",".join(f"{f['name']}:{text(f['type'])}" for f in t.get("fields", [])) + ">"
        if kind == "udt":
            return text(t.get("sqlType"))
        return str(kind)

    return text(t)
