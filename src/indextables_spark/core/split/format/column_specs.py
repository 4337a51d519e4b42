"""A Spark schema (StructType JSON) and the indexing options → the table's column specs: each
column's kind and Tantivy fields, every option checked before anything is written."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from indextables_spark.config.options import Options
from indextables_spark.core.schema import analyzers, compact_strings
from indextables_spark.core.schema.types import (
    EXACT_SUFFIX,
    ROW_FIELD,
    ColumnSpec,
    IndexedField,
    SparkType,
    VectorSpec,
    atomic_kind,
    check_nested,
    schema_fields,
    type_name,
)
from indextables_spark.core.split.format.indexing import (
    BUILTIN_TOKENIZERS,
    RECORD_OPTIONS,
    TYPEMAP_VALUES,
    IndexingConfig,
    Setting,
    recorded_settings,
)
from indextables_spark.errors import InvalidOptionError, SchemaMismatchError, UnsupportedTypeError

if TYPE_CHECKING:
    from indextables_spark.core.log.read.snapshot import Snapshot

_SAFE_NAME = re.compile(r"^[^\W\d]\w*$")


# ---------------------------------------------------------------------------------------------
# Options


def _column_option(table: dict[str, str], column: str) -> str | None:
    # Option keys arrive lower-cased (Spark lower-cases data source options).
    return table.get(column.lower())


# `indexing.storeonly` (the reference's `indexing.storeonlyfields`): columns kept in the row store
# only (no index, no fast field), as Elasticsearch's `"index": false`. Filters on them are exact
# but evaluated on the rows (no narrowing), they cannot be queried by field or aggregated; writing
# them costs nothing but the row store.


def _kind_for(column: str, spark_type: SparkType, typemap: Mapping[str, Setting]) -> str:
    kind = atomic_kind(spark_type)
    if kind is None:
        check_nested(column, column, spark_type)
        raise UnsupportedTypeError(f"column {column!r}: unsupported Spark type {type_name(spark_type)!r}")
    if kind == "json":
        check_nested(column, column, spark_type)
    setting = typemap.get(column.lower())
    if setting is None:
        return kind
    req = setting.value
    where = f"option {setting.key}" + ("" if setting.listed else f"={req!r}")
    if kind != "string":
        raise InvalidOptionError(
            f"{where}: column {column!r} has Spark type {type_name(spark_type)!r}; only string "
            f"columns take a typemap (string, text, text_and_string, ip, {compact_strings.MODES_DESCRIPTION})"
        )
    if compact_strings.is_compact_mode(req):
        mode = compact_strings.parse_mode(req, f"{where}: ")
        return "string" if mode.hashed_whole else "text"
    if req not in TYPEMAP_VALUES:
        raise InvalidOptionError(
            f"{where}: column {column!r} cannot be {req!r}: expected one of {sorted(TYPEMAP_VALUES)} or a "
            f"compact string mode ({compact_strings.MODES_DESCRIPTION})"
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

    setting = cfg.typemap.get(lower)
    if setting is not None and compact_strings.is_compact_mode(setting.value):
        return _compact_fields(column, compact_strings.parse_mode(setting.value), tokenized, names, lower in cfg.fast)
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


def _compact_fields(
    column: str, mode: compact_strings.StringMode, tokenized: Callable[[str], IndexedField], names: _Names, fast: bool
) -> tuple[IndexedField, ...]:
    """The fields of a column in a compact string mode (compact_strings.py): exact_only a u64 of
    whole-value hashes (fast only when indexing.fastfields names it: IS [NOT] NULL then narrows
    exactly); the text modes a stripped tokenized field, plus `<col>__uuids` for *_exactonly."""
    if mode.hashed_whole:
        return (IndexedField(names.take(column), "u64", fast=fast, string_mode=mode.mode),)
    text = replace(tokenized("text"), string_mode=mode.mode)
    if not mode.keeps_matches:
        return (text,)
    hashes = IndexedField(names.take(text.name + compact_strings.COMPANION_SUFFIX), "u64", string_mode=mode.mode)
    return (text, hashes)


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


def _vector_spec(column: str, spark_type: SparkType, cfg: IndexingConfig) -> VectorSpec | None:
    """The column's `indexing.vector.<col>` setting, checked against its type and other settings."""
    setting = cfg.vectors.get(column.lower())
    if setting is None:
        return None
    spec, key = setting
    element = (
        spark_type.get("elementType") if isinstance(spark_type, dict) and spark_type.get("type") == "array" else None
    )
    if element not in ("float", "double"):
        raise UnsupportedTypeError(
            f"option {key}: column {column!r} has Spark type {type_name(spark_type)!r}; a vector column is an "
            f"array of float or double"
        )
    for what, keyed in (("indexing.indexonlyfields", cfg.index_only), ("indexing.storeonly", cfg.store_only)):
        if column.lower() in keyed:
            raise InvalidOptionError(
                f"options {key} and {keyed[column.lower()]} both name {column!r}: a vector column is stored "
                f"(its vectors re-rank what its index finds) and indexed"
            )
    if column.lower() in cfg.typemap:
        raise InvalidOptionError(f"option {cfg.typemap[column.lower()].key}: {column!r} is a vector column ({key})")
    return spec


def validate_schema(
    schema_json: Mapping[str, Any], partition_columns: Sequence[str], options: Options | Mapping[str, str] | None = None
) -> list[ColumnSpec]:
    """Check every column and indexing option before anything is written; returns the specs.

    Raises UnsupportedTypeError (naming column and type), InvalidOptionError or SchemaMismatchError.
    """
    opts = options if isinstance(options, Options) else Options.of(options)
    fields = schema_fields(schema_json)
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
        vector = _vector_spec(col, t, cfg)
        if vector is not None:
            specs.append(ColumnSpec(col, t, "vector", (), nullable, vector=vector))
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


def table_options(snapshot: Snapshot, options: Options | None) -> Options:
    """The table's recorded settings (typemap, fast fields, ...) overlaid with these options."""

    return Options.of(recorded_settings(snapshot.metadata_action.configuration), options)
