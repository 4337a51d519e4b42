"""Spark schema (StructType JSON) → how each column is stored and indexed in a split.

Works on the JSON dict `StructType.jsonValue()` produces, so pyspark is not needed here.

Column kinds and their Tantivy fields (the doc mapping):

| kind              | Spark types                      | Tantivy field(s)                                       |
|-------------------|----------------------------------|--------------------------------------------------------|
| `string`          | string (default), char, varchar  | text `<col>`, tokenizer `raw`, fast (exact terms)      |
| `text`            | string + typemap `text`          | text `<col>`, tokenizer from options (`default`)       |
| `text_and_string` | string + typemap `text_and_string` | text `<col>` (tokenized) + text `<col>__exact` (raw) |
| `i64`             | byte, short, integer, long       | i64 `<col>`, indexed + fast                            |
| `f64`             | float, double                    | f64 `<col>` (NaN/±inf mapped to ±f64::MAX, see below)  |
| `bool`            | boolean                          | bool `<col>`                                           |
| `date`            | date                             | i64 days since 1970-01-01                              |
| `timestamp`       | timestamp, timestamp_ntz         | i64 microseconds since the epoch (UTC / wall clock)    |
| `decimal`         | decimal(p,s)                     | f64 approximation (narrowing only, never exact)        |
| `binary`          | binary                           | none (stored in the row store only)                    |
| `json`            | array, map, struct               | json `<col>` from the JSON-encoded value               |

A hidden fast u64 field `__row` (row position inside the split) is always present. Column names
that are not plain identifiers (spaces, dots, ...) or that collide with generated names get a
sanitised field name; the doc mapping records the column each field belongs to.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import pyarrow as pa

from indextables_spark.errors import InvalidOptionError, SchemaMismatchError, UnsupportedTypeError
from indextables_spark.config.options import Options
from indextables_spark.core.split.indexing import (
    BUILTIN_TOKENIZERS,
    RECORD_OPTIONS,
    TYPEMAP_VALUES,
    IndexingConfig,
    Setting,
)

if TYPE_CHECKING:
    import tantivy

ROW_FIELD = "__row"
EXACT_SUFFIX = "__exact"
KINDS = ("string", "text", "text_and_string", "i64", "f64", "bool", "date", "timestamp", "decimal", "binary", "json")
STRING_KINDS = frozenset({"string", "text", "text_and_string"})

_INT_TYPES = frozenset({"byte", "short", "integer", "long"})
_DECIMAL_RE = re.compile(r"^decimal(?:\(\s*(\d+)\s*,\s*(-?\d+)\s*\))?$")
_CHAR_RE = re.compile(r"^(?:var)?char\(\s*\d+\s*\)$")
_SAFE_NAME = re.compile(r"^[^\W\d]\w*$")


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

    @property
    def index_tokenizer(self) -> str | None:
        """The tokenizer name in the Tantivy schema: `<tokenizer>_limit_<n>` with a recorded limit
        (the reference's naming, analyzers.py registers it), else the tokenizer's own name."""
        if self.token_limit is None or self.tokenizer is None:
            return self.tokenizer
        return f"{self.tokenizer}_limit_{self.token_limit}"


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    spark_type: Any  # the Spark type JSON (str for atomic types, dict for complex)
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

    @property
    def exact_field(self) -> IndexedField | None:
        """The raw (whole value) text field, if any."""
        return next((f for f in self.indexed_fields if f.exact), None)

    @property
    def value_field(self) -> IndexedField | None:
        """The main field: tokenized text, number, bool, json."""
        return next((f for f in self.indexed_fields if not f.exact), self.exact_field)


# ---------------------------------------------------------------------------------------------
# Spark type JSON helpers


def type_name(spark_type: Any) -> str:
    """'integer', 'decimal(10,2)', 'array', 'map', 'struct', ... (readable, for messages)."""
    if isinstance(spark_type, dict):
        return str(spark_type.get("type"))
    return str(spark_type)


def decimal_precision_scale(spark_type: Any) -> tuple[int, int] | None:
    if not isinstance(spark_type, str):
        return None
    m = _DECIMAL_RE.match(spark_type.strip().lower())
    if not m:
        return None
    if m.group(1) is None:
        return 10, 0  # Spark's DecimalType() default
    return int(m.group(1)), int(m.group(2))


def _is_string_type(t: str) -> bool:
    t = t.strip().lower()
    if t == "string" or _CHAR_RE.match(t):
        return True
    # Spark 4 collations: only binary (byte-wise) comparison matches our exact semantics.
    return t in ("string collate utf8_binary",)


def atomic_kind(spark_type: Any) -> str | None:
    """Kind of an atomic Spark type, 'json' for complex types, None when unsupported."""
    if isinstance(spark_type, dict):
        return "json" if spark_type.get("type") in ("array", "map", "struct") else None
    t = str(spark_type).strip().lower()
    if _is_string_type(t):
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


def _check_nested(column: str, path: str, spark_type: Any) -> None:
    """Every type inside an array/map/struct must be storable too."""
    if isinstance(spark_type, dict):
        t = spark_type.get("type")
        if t == "array":
            _check_nested(column, path + "[]", spark_type.get("elementType"))
            return
        if t == "map":
            _check_nested(column, path + ".key", spark_type.get("keyType"))
            _check_nested(column, path + ".value", spark_type.get("valueType"))
            return
        if t == "struct":
            for f in spark_type.get("fields") or []:
                _check_nested(column, f"{path}.{f.get('name')}", f.get("type"))
            return
        raise UnsupportedTypeError(f"column {column!r}: unsupported type {type_name(spark_type)!r} at {path!r}")
    if atomic_kind(spark_type) is None:
        where = "" if path == column else f" at {path!r}"
        raise UnsupportedTypeError(
            f"column {column!r}{where}: unsupported Spark type {type_name(spark_type)!r} "
            f"(supported: strings, numbers, decimal, boolean, binary, date, timestamp, timestamp_ntz, "
            f"and arrays/maps/structs of those)"
        )


def _fields(schema_json: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not isinstance(schema_json, Mapping) or schema_json.get("type") != "struct":
        raise SchemaMismatchError(f"expected a Spark StructType JSON object, got {str(schema_json)[:200]}")
    return list(schema_json.get("fields") or [])


# ---------------------------------------------------------------------------------------------
# Options


def _column_option(table: dict[str, str], column: str) -> str | None:
    # Option keys arrive lower-cased (Spark lower-cases data source options).
    return table.get(column.lower())


# `indexing.storeonly` (the reference's `indexing.storeonlyfields`): columns kept in the row store
# only (no index, no fast field), as Elasticsearch's `"index": false`. Filters on them are exact
# but evaluated on the rows (no narrowing), they cannot be queried by field or aggregated; writing
# them costs nothing but the row store.


def _kind_for(column: str, spark_type: Any, typemap: Mapping[str, Setting]) -> str:
    kind = atomic_kind(spark_type)
    if kind is None:
        _check_nested(column, column, spark_type)
        raise UnsupportedTypeError(f"column {column!r}: unsupported Spark type {type_name(spark_type)!r}")
    if kind == "json":
        _check_nested(column, column, spark_type)
    setting = typemap.get(column.lower())
    if setting is None:
        return kind
    req = setting.value
    where = f"option {setting.key}" + ("" if setting.listed else f"={req!r}")
    if kind != "string":
        raise InvalidOptionError(
            f"{where}: column {column!r} has Spark type {type_name(spark_type)!r}; only string "
            f"columns take a typemap (string, text, text_and_string, ip)"
        )
    if req not in TYPEMAP_VALUES:
        raise InvalidOptionError(
            f"{where}: column {column!r} cannot be {req!r}: expected one of {sorted(TYPEMAP_VALUES)}"
            + (
                " (a JSON string column is not supported here; a struct, array or map column is indexed as JSON)"
                if req == "json"
                else ""
            )
        )
    return req


def _tokenizer(column: str, options: Options, cfg: IndexingConfig, default: str) -> str:
    """The tokenizer name recorded in the doc mapping: a built-in one, `<iso>_stem`, `cjk`, or
    `ngram_<min>_<max>` for `ngram` (bounds from indexing.ngram.min/max.<col>); see analyzers.py."""
    from indextables_spark.core.split import analyzers

    setting = cfg.tokenizer.get(column.lower())
    if setting is None:
        return default
    tok = setting.value
    if tok == "ngram":

        def bound(which: str, default_: int) -> int:
            raw = _column_option(options.with_prefix(f"indexing.ngram.{which}"), column)
            try:
                return int(raw) if raw is not None else default_
            except ValueError:
                raise InvalidOptionError(
                    f"option indexing.ngram.{which}.{column}={raw!r}: expected an integer"
                ) from None

        lo, hi = bound("min", 2), bound("max", 3)
        if not 1 <= lo <= hi <= analyzers.MAX_NGRAM:
            raise InvalidOptionError(
                f"options indexing.ngram.min/max.{column} = {lo}/{hi}: expected "
                f"1 <= min <= max <= {analyzers.MAX_NGRAM}"
            )
        return f"ngram_{lo}_{hi}"
    if tok == "cjk":
        return analyzers.CJK_BIGRAM  # Elasticsearch's overlapping bigrams (analyzers.py)
    if tok not in BUILTIN_TOKENIZERS and not analyzers.is_custom(tok):
        raise InvalidOptionError(
            f"option {setting.key}={tok!r}: unknown tokenizer (available: "
            f"{', '.join(sorted(BUILTIN_TOKENIZERS) + [n for n in analyzers.custom_names() if n != 'ngram_<min>_<max>'])}, "
            f"ngram with indexing.ngram.min/max.{column})"
        )
    return tok


def _record(column: str, cfg: IndexingConfig) -> str:
    setting = cfg.record.get(column.lower())
    if setting is None:
        return cfg.default_record
    if setting.value not in RECORD_OPTIONS:
        raise InvalidOptionError(f"option {setting.key}={setting.value!r}: expected one of {sorted(RECORD_OPTIONS)}")
    return setting.value


# ---------------------------------------------------------------------------------------------
# Column specs


class _Names:
    """Allocates unique, query-safe Tantivy field names."""

    def __init__(self, taken: Iterable[str] = ()):
        self.used: set[str] = set(taken)

    def take(self, wanted: str) -> str:
        name = wanted if _SAFE_NAME.match(wanted) and not wanted.startswith("__") else self._sanitise(wanted)
        base, i = name, 1
        while name in self.used:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        return name

    @staticmethod
    def _sanitise(wanted: str) -> str:
        s = re.sub(r"\W", "_", wanted).strip("_") or "col"
        if s[0].isdigit():
            s = "c_" + s
        return "c_" + s if s.startswith("__") else s


def _indexed_fields(
    column: str, kind: str, options: Options, names: _Names, cfg: IndexingConfig, struct: bool = False
) -> tuple[IndexedField, ...]:
    lower = column.lower()
    extra_fast = lower in cfg.fast or (struct and lower not in cfg.non_fast)
    fast = lower not in cfg.non_fast  # `indexing.nonfastfields`: no fast field for the column

    def tokenized(kind_: str) -> IndexedField:
        tok = _tokenizer(column, options, cfg, "default")
        return IndexedField(
            names.take(column),
            kind_,
            tokenizer=tok,
            record=_record(column, cfg),
            fast=extra_fast if kind_ == "json" or kind == "text" else False,
            token_limit=cfg.token_limit(column, tok),
        )

    if kind == "string":
        return (IndexedField(names.take(column), "text", tokenizer="raw", record="basic", fast=fast, exact=True),)
    if kind == "text":
        return (tokenized("text"),)
    if kind == "ip":
        # IPv4/IPv6 addresses: the column's name is an IP field (query syntax: ip:10.0.0.1,
        # ip:[10.2.0.0 TO 10.2.255.255], CIDR); filters keep exact string semantics (Spark compares
        # strings) through the raw <col>__exact field, as for a string column.
        # (the IP field stays fast, as the reference keeps it: its range queries need it)
        ip = IndexedField(names.take(column), "ip", fast=True)
        exact = IndexedField(
            names.take(ip.name + EXACT_SUFFIX), "text", tokenizer="raw", record="basic", fast=fast, exact=True
        )
        return (ip, exact)
    if kind == "text_and_string":
        text = tokenized("text")
        exact = IndexedField(
            names.take(text.name + EXACT_SUFFIX), "text", tokenizer="raw", record="basic", fast=fast, exact=True
        )
        return (text, exact)
    if kind in ("i64", "date", "timestamp"):
        return (IndexedField(names.take(column), "i64", fast=fast),)
    if kind in ("f64", "decimal"):
        return (IndexedField(names.take(column), "f64", fast=fast),)
    if kind == "bool":
        return (IndexedField(names.take(column), "bool", fast=fast),)
    if kind == "json":
        return (tokenized("json"),)
    return ()  # binary: row store only


def _check_indexing(cfg: IndexingConfig, by_name: Mapping[str, Any], partition_columns: Sequence[str]) -> None:
    """Options naming columns: the columns exist, and no column is given settings that exclude
    each other (stored only and typed/fast, fast and not fast)."""
    cfg.check_columns(by_name)
    lower = {n.lower(): n for n in by_name}

    def data_column(c: str, key: str, missing: str) -> str:
        """The column option `key` names as `c`: a whole column (InvalidOptionError `missing`
        otherwise) that is no partition column."""
        if c not in lower:
            raise InvalidOptionError(missing)
        col = lower[c]
        if col in partition_columns:
            raise InvalidOptionError(
                f"option {key}: {col!r} is a partition column (partition values live in the log, not in splits)"
            )
        return col

    for c, key in sorted(cfg.index_only.items()):
        # (check_columns let a struct field through)
        col = data_column(c, key, f"option {key} names {c!r}: index-only applies to whole columns ({list(by_name)})")
        if c in cfg.store_only:
            raise InvalidOptionError(
                f"options {key} and {cfg.store_only[c]} both name {col!r}: a column cannot be both "
                f"index-only (not stored) and stored-only (not indexed)"
            )
    for c, key in sorted(cfg.store_only.items()):
        col = data_column(c, key, f"option {key} names {c!r}, not a column of the table (columns: {list(by_name)})")
        if c in cfg.fast:
            raise InvalidOptionError(
                f"options {key} and indexing.fastfields both name {col!r}: a stored-only column has no fast field"
            )
        if c in cfg.typemap:
            raise InvalidOptionError(
                f"option {cfg.typemap[c].key} types {col!r}, but {key} keeps it stored only (not indexed)"
            )
    for c in sorted(set(cfg.fast) & set(cfg.non_fast)):
        raise InvalidOptionError(f"options indexing.fastfields and indexing.nonfastfields both name {c!r}")


def validate_schema(
    schema_json: Mapping[str, Any], partition_columns: Sequence[str], options: Options | Mapping[str, str] | None = None
) -> list[ColumnSpec]:
    """Check every column and indexing option before anything is written; returns the specs.

    Raises UnsupportedTypeError (naming column and type), InvalidOptionError or SchemaMismatchError.
    """
    opts = options if isinstance(options, Options) else Options.of(options)
    fields = _fields(schema_json)
    seen: dict[str, str] = {}
    for f in fields:
        name = f.get("name")
        if not isinstance(name, str) or not name:
            raise SchemaMismatchError(f"schema field without a name: {str(f)[:200]}")
        if name.lower() in seen:
            raise SchemaMismatchError(
                f"duplicate column {name!r} (also {seen[name.lower()]!r}; names are case-insensitive)"
            )
        seen[name.lower()] = name
    by_name = {f["name"]: f for f in fields}
    for p in partition_columns:
        if p not in by_name:
            raise SchemaMismatchError(
                f"partition column {p!r} is not a column of the schema (columns: {list(by_name)})"
            )
        kind = atomic_kind(by_name[p]["type"])
        if kind not in ("string", "i64", "f64", "bool", "date", "timestamp", "decimal"):
            raise UnsupportedTypeError(
                f"partition column {p!r}: type {type_name(by_name[p]['type'])!r} cannot be a partition column"
            )
    cfg = IndexingConfig.of(opts, by_name)
    _check_indexing(cfg, by_name, partition_columns)
    store_only = cfg.store_only
    names = _Names([ROW_FIELD])
    specs: list[ColumnSpec] = []
    parts = set(partition_columns)
    for f in fields:
        col, t = f["name"], f["type"]
        nullable = bool(f.get("nullable", True))
        if col in parts:
            specs.append(ColumnSpec(col, t, atomic_kind(t) or "string", (), nullable, partition=True))
            continue
        kind = _kind_for(col, t, cfg.typemap)
        # struct columns' json fields are fast: Tantivy searches json ranges (`user.age > 50`) only there
        struct = isinstance(t, dict) and t.get("type") == "struct"
        fields_ = () if col.lower() in store_only else _indexed_fields(col, kind, opts, names, cfg, struct)
        index_only = col.lower() in cfg.index_only
        if index_only and not fields_:
            raise InvalidOptionError(
                f"option {cfg.index_only[col.lower()]}: {col!r} ({type_name(t)}) has no index to keep "
                f"(binary columns are only stored)"
            )
        specs.append(ColumnSpec(col, t, "string" if kind == "ip" else kind, fields_, nullable, index_only=index_only))
    return specs


def column_specs(
    schema_json: Mapping[str, Any], partition_columns: Sequence[str], options: Options | Mapping[str, str] | None = None
) -> list[ColumnSpec]:
    """The per-column specs of a table (partition columns included, flagged `partition`)."""
    return validate_schema(schema_json, partition_columns, options)


def specs_by_name(specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec]) -> dict[str, ColumnSpec]:
    if isinstance(specs, Mapping):
        return dict(specs)
    return {s.name: s for s in specs}


# ---------------------------------------------------------------------------------------------
# Doc mapping (what docMappingRef hashes)


def _descriptors(specs: Iterable[ColumnSpec]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in specs:
        if s.partition:
            continue
        base = {"column": s.name, "kind": s.kind, "sparkType": s.spark_type, "nullable": s.nullable}
        if not s.indexed_fields:  # stored only (binary); with indexOnly: values lost (SplitWriter's lost_columns)
            d0 = {"name": s.name, "type": "none", "indexed": False, "fast": False, "stored": False, **base}
            out.append({**d0, "indexOnly": True} if s.index_only else d0)
        for f in s.indexed_fields:
            d: dict[str, Any] = {
                "name": f.name,
                "type": f.type,
                "indexed": f.indexed,
                "fast": f.fast,
                "stored": False,
                **base,
            }
            if f.type in ("text", "json"):
                d["tokenizer"] = f.tokenizer
                d["record"] = f.record
                if f.token_limit is not None:  # absent in doc mappings written before the option
                    d["maxTokenLength"] = f.token_limit
            if f.exact:
                d["exact"] = True
            if s.index_only:  # absent otherwise: doc mappings (and their hashes) written before stay as they were
                d["indexOnly"] = True
            out.append(d)
    out.append({"name": ROW_FIELD, "type": "u64", "indexed": False, "fast": True, "stored": False, "hidden": True})
    return out


def doc_mapping_json(
    schema_json: Mapping[str, Any], partition_columns: Sequence[str], options: Options | Mapping[str, str] | None = None
) -> str:
    """JSON array of Tantivy field descriptors (what gets hashed into docMappingRef)."""
    specs = validate_schema(schema_json, partition_columns, options)
    return doc_mapping_from_specs(specs)


def doc_mapping_from_specs(specs: Iterable[ColumnSpec]) -> str:
    return json.dumps(_descriptors(specs), separators=(",", ":"), ensure_ascii=False)


def specs_from_doc_mapping(doc_mapping: str | list[dict[str, Any]]) -> list[ColumnSpec]:
    """Rebuild the stored columns' specs from a split's doc mapping (column order kept)."""
    try:
        if isinstance(doc_mapping, str):
            return list(_specs_of_text(doc_mapping))
        return _specs_from_doc_mapping(doc_mapping)
    except (ValueError, TypeError, KeyError, AttributeError) as e:  # a crafted or damaged doc mapping
        from indextables_spark.errors import SplitFormatError

        raise SplitFormatError(f"invalid doc mapping ({type(e).__name__}: {e}): {str(doc_mapping)[:200]!r}") from None


@functools.lru_cache(maxsize=64)
def _specs_of_text(doc_mapping: str) -> tuple[ColumnSpec, ...]:
    """Parsed once per process: every split read and query check of a table asks for the same text."""
    return tuple(_specs_from_doc_mapping(doc_mapping))


def _specs_from_doc_mapping(doc_mapping: str | list[dict[str, Any]]) -> list[ColumnSpec]:
    items = json.loads(doc_mapping) if isinstance(doc_mapping, str) else doc_mapping
    cols: dict[str, dict[str, Any]] = {}
    for d in items:
        if d.get("hidden") or "column" not in d:
            continue
        c = cols.setdefault(
            d["column"],
            {"kind": d["kind"], "sparkType": d["sparkType"], "nullable": d.get("nullable", True), "fields": []},
        )
        if d.get("indexOnly"):
            c["indexOnly"] = True
        if d.get("type") != "none":
            c["fields"].append(
                IndexedField(
                    name=d["name"],
                    type=d["type"],
                    tokenizer=d.get("tokenizer"),
                    record=d.get("record"),
                    fast=bool(d.get("fast")),
                    indexed=bool(d.get("indexed", True)),
                    exact=bool(d.get("exact")),
                    token_limit=int(d["maxTokenLength"]) if d.get("maxTokenLength") is not None else None,
                )
            )
    return [
        ColumnSpec(
            name, c["sparkType"], c["kind"], tuple(c["fields"]), c["nullable"], index_only=bool(c.get("indexOnly"))
        )
        for name, c in cols.items()
    ]


def row_store_columns(specs: Iterable[ColumnSpec]) -> list[str]:
    """The columns a split's row store holds: the non-partition ones that are not index-only."""
    return [s.name for s in specs if not s.partition and not s.index_only]


def index_only_columns(specs: Iterable[ColumnSpec]) -> frozenset[str]:
    """Lower-cased names of the index-only columns (`indexing.indexonlyfields`)."""
    return frozenset(s.name.lower() for s in specs if s.index_only)


def tantivy_schema(specs: Iterable[ColumnSpec]) -> tantivy.Schema:
    """The Tantivy schema of a split (no stored fields: rows live in the Arrow row store)."""
    import tantivy

    sb = tantivy.SchemaBuilder()
    for s in specs:
        for f in s.indexed_fields:
            if f.type == "text":
                sb.add_text_field(
                    f.name,
                    stored=False,
                    fast=f.fast,
                    tokenizer_name=f.index_tokenizer or "default",
                    index_option=f.record or "position",
                )
            elif f.type == "json":
                sb.add_json_field(
                    f.name,
                    stored=False,
                    fast=f.fast,
                    tokenizer_name=f.index_tokenizer or "default",
                    index_option=f.record or "position",
                )
            elif f.type == "i64":
                sb.add_integer_field(f.name, stored=False, indexed=f.indexed, fast=f.fast)
            elif f.type == "f64":
                sb.add_float_field(f.name, stored=False, indexed=f.indexed, fast=f.fast)
            elif f.type == "bool":
                sb.add_boolean_field(f.name, stored=False, indexed=f.indexed, fast=f.fast)
            elif f.type == "ip":
                sb.add_ip_addr_field(f.name, stored=False, indexed=f.indexed, fast=f.fast)
            else:
                raise UnsupportedTypeError(f"column {s.name!r}: unknown Tantivy field type {f.type!r}")
    sb.add_unsigned_field(ROW_FIELD, stored=False, indexed=False, fast=True)
    return sb.build()


def with_truncated_terms(specs: Iterable[ColumnSpec], columns: Iterable[str]) -> list[ColumnSpec]:
    cols = set(columns)
    return [replace(s, terms_truncated=True) if s.name in cols else s for s in specs]


def with_fully_tokenized(specs: Iterable[ColumnSpec], columns: Iterable[str]) -> list[ColumnSpec]:
    cols = set(columns)
    return [replace(s, fully_tokenized=True) if s.name in cols else s for s in specs]


# ---------------------------------------------------------------------------------------------
# Arrow


# Spark's key for a field's metadata in Arrow field metadata (ArrowUtils.metadataKey).
SPARK_METADATA_KEY = b"SPARK::metadata::json"
# Where a field's string collations live in the schema JSON; PySpark moves them into the type
# (a StructField's metadata never has them), so Arrow never carries them.
_COLLATIONS_KEY = "__COLLATIONS"


def _arrow_field_metadata(field_json: Mapping[str, Any]) -> dict[bytes, bytes] | None:
    md = {k: v for k, v in (field_json.get("metadata") or {}).items() if k != _COLLATIONS_KEY}
    return {SPARK_METADATA_KEY: json.dumps(md).encode("utf-8")} if md else None


def _arrow_field(field_json: Mapping[str, Any], field_metadata: bool) -> pa.Field:
    return pa.field(
        field_json["name"],
        arrow_type(field_json["type"], field_metadata=field_metadata),
        nullable=bool(field_json.get("nullable", True)),
        metadata=_arrow_field_metadata(field_json) if field_metadata else None,
    )


def arrow_type(spark_type: Any, *, field_metadata: bool = False) -> pa.DataType:
    """Arrow type of a Spark type JSON, as PySpark converts it with timezone "UTC": string/binary
    are the 32-bit-offset kinds, timestamp is timestamp("us", "UTC"), timestamp_ntz
    timestamp("us"), arrays hold "element", maps "key" (never null) and "value".
    With `field_metadata`, struct fields carry their Spark metadata as PySpark puts it."""
    if isinstance(spark_type, dict):
        t = spark_type.get("type")
        if t == "array":
            return pa.list_(
                pa.field(
                    "element",
                    arrow_type(spark_type["elementType"], field_metadata=field_metadata),
                    nullable=bool(spark_type.get("containsNull", True)),
                )
            )
        if t == "map":
            return pa.map_(
                pa.field("key", arrow_type(spark_type["keyType"], field_metadata=field_metadata), nullable=False),
                pa.field(
                    "value",
                    arrow_type(spark_type["valueType"], field_metadata=field_metadata),
                    nullable=bool(spark_type.get("valueContainsNull", True)),
                ),
            )
        if t == "struct":
            return pa.struct([_arrow_field(f, field_metadata) for f in spark_type.get("fields") or []])
        raise UnsupportedTypeError(f"unsupported Spark type {type_name(spark_type)!r}")
    t = str(spark_type).strip().lower()
    simple = {
        "byte": pa.int8(),
        "short": pa.int16(),
        "integer": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "boolean": pa.bool_(),
        "binary": pa.binary(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_ntz": pa.timestamp("us"),
    }
    if t in simple:
        return simple[t]
    if _is_string_type(t):
        return pa.string()
    ps = decimal_precision_scale(t)
    if ps is not None:
        return pa.decimal128(*ps)
    raise UnsupportedTypeError(f"unsupported Spark type {type_name(spark_type)!r}")


def arrow_schema(
    schema_json: Mapping[str, Any], columns: Sequence[str] | None = None, *, field_metadata: bool = False
) -> pa.Schema:
    """Arrow schema of (some of) the columns, nullability from the Spark schema.

    With `field_metadata` it is exactly what PySpark's `to_arrow_schema(schema, timezone="UTC")`
    returns (field metadata included): the schema Spark expects of a Python data source's batches.
    """
    fields = _fields(schema_json)
    by_name = {f["name"]: f for f in fields}
    if columns is None:
        chosen = fields
    else:
        missing = [c for c in columns if c not in by_name]
        if missing:
            raise SchemaMismatchError(f"columns {missing} are not in the schema (columns: {list(by_name)})")
        chosen = [by_name[c] for c in columns]
    out = []
    for f in chosen:
        try:
            out.append(_arrow_field(f, field_metadata))
        except UnsupportedTypeError:
            _check_nested(f["name"], f["name"], f["type"])
            raise
    return pa.schema(out)


def _spark_field_json(f: pa.Field) -> dict[str, Any]:
    md = (f.metadata or {}).get(SPARK_METADATA_KEY)
    return {
        "name": f.name,
        "type": spark_type_json(f.type),
        "nullable": f.nullable,
        "metadata": json.loads(md.decode("utf-8")) if md else {},
    }


def spark_type_json(t: pa.DataType) -> Any:
    """Spark type JSON of an Arrow type, as PySpark's `from_arrow_type` maps it (the timestamp unit
    is ignored; a timestamp without time zone is timestamp_ntz; dictionaries map to their values)."""
    types = pa.types
    if types.is_boolean(t):
        return "boolean"
    simple = (
        (types.is_int8, "byte"),
        (types.is_int16, "short"),
        (types.is_int32, "integer"),
        (types.is_int64, "long"),
        (types.is_float32, "float"),
        (types.is_float64, "double"),
        (types.is_date32, "date"),
        (types.is_null, "void"),
    )
    for test, name in simple:
        if test(t):
            return name
    if types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if types.is_string(t) or types.is_large_string(t):
        return "string"
    if types.is_binary(t) or types.is_large_binary(t) or types.is_fixed_size_binary(t):
        return "binary"
    if types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        return {"type": "array", "elementType": spark_type_json(t.value_type), "containsNull": t.value_field.nullable}
    if types.is_map(t):
        return {
            "type": "map",
            "keyType": spark_type_json(t.key_type),
            "valueType": spark_type_json(t.item_type),
            "valueContainsNull": t.item_field.nullable,
        }
    if types.is_struct(t):
        return {"type": "struct", "fields": [_spark_field_json(t.field(i)) for i in range(t.num_fields)]}
    if types.is_dictionary(t):
        return spark_type_json(t.value_type)
    raise UnsupportedTypeError(f"Arrow type {t} has no Spark type here")


def spark_schema_json(schema: pa.Schema) -> dict[str, Any]:
    """Spark StructType JSON of an Arrow schema (what `StructType.fromJson` takes), as PySpark's
    `from_arrow_schema` maps it."""
    return {"type": "struct", "fields": [_spark_field_json(f) for f in schema]}


# Partition value helpers live in partitions.py; re-exported for the Spark layer.
from indextables_spark.core.split.partitions import (  # noqa: E402
    format_partition_value,
    parse_partition_value,
    partition_path,
    partition_value_array,
)

__all__ = [
    "ColumnSpec",
    "IndexedField",
    "index_only_columns",
    "row_store_columns",
    "ROW_FIELD",
    "EXACT_SUFFIX",
    "KINDS",
    "STRING_KINDS",
    "validate_schema",
    "column_specs",
    "doc_mapping_json",
    "doc_mapping_from_specs",
    "specs_from_doc_mapping",
    "tantivy_schema",
    "table_options",
    "arrow_type",
    "arrow_schema",
    "spark_type_json",
    "spark_schema_json",
    "atomic_kind",
    "type_name",
    "decimal_precision_scale",
    "format_partition_value",
    "parse_partition_value",
    "partition_path",
    "partition_value_array",
    "specs_by_name",
    "with_truncated_terms",
    "with_fully_tokenized",
]


def table_options(snapshot: Any, options: Options | None) -> Options:
    """The table's recorded settings (typemap, fast fields, ...) overlaid with these options."""
    from indextables_spark.core.split.indexing import recorded_settings

    return Options.of(recorded_settings(snapshot.metadata_action.configuration), options)
