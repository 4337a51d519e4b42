"""A split the reference implementation wrote, opened natively: its bundle's index files extracted
into the split cache as they are, the term dictionaries a read needs transcoded from SSTable to FST
(transcode.py), the index opened by tantivy-py with the reference's own field configuration.

What this module decides (the cache and the readers call it; docstore.py serves the rows):
- `extract`: the bundle's files (quickwit.extract_bundle: framing and every file's CRC-32 checked)
  and `reference.json`, which marks the directory as a reference split and records what types its
  rows (the table schema and partition columns of the log, where the split came from);
- which term dictionaries a read needs (`needed_fields`: the fields of a query text's leaves; every
  field without one) and which a directory still lacks (`satisfies`, `ensure`). A dictionary's kind
  is read from the `.term` file itself (each field's section ends in a u32: 1 = FST, 2 = SSTable;
  tantivy checks it per field when it opens that field's dictionary), so the file is the state: no
  bookkeeping can disagree with it. Transcoding rewrites the `.term` file (renamed into place) and
  `reference.json` (its new inode tells every process that has the index open to reopen it, as
  cache.SplitCache.local_dir does for a directory made anew);
- the column specs of such a split (`native_specs`): the reference's fields as they are (a `raw`
  string is an exact string field, a tokenized one keeps its tokenizer and the reference's token
  length, index-only fields are queryable but not stored), from meta.json when the split is open,
  from the doc mapping the log records before (`mapping_fields`).
"""

from __future__ import annotations

import json
import os
import struct
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, Sequence

from indextables_spark.core.schema import analyzers
from indextables_spark.core.schema.types import ColumnSpec, IndexedField, atomic_kind
from indextables_spark.core.split.format.composite import (
    DICT_TYPE_FST,
    DICT_TYPE_SSTABLE,
    composite_sections,
    read_tail,
)
from indextables_spark.core.split.reference.quickwit import extract_bundle
from indextables_spark.errors import IndexTablesError, SplitFormatError
from indextables_spark.expr.search_query import SearchQuery

if TYPE_CHECKING:
    import tantivy

REFERENCE_FILE = "reference.json"  # marks an extracted reference split (see the module docstring)
# the document store decoded into the split's cache directory by the first scan (docstore.py)
DECODED_ROWS = "docs.arrow"
# split footer key of a converted reference split (rewrite.py): its tokenizer names -> our analyzers
ANALYZERS_KEY = "referenceAnalyzers"
# The reference's searcher analyses query text with Quickwit's tokenizers, which drop tokens of 255
# bytes or more (`default`, `whitespace`, ...; `<tokenizer>_limit_<n>` names another limit). Its
# writers index with other limits (indextables/tantivy4java: the Arrow write path uses tantivy's own
# tokenizers, `default` dropping tokens at 40 bytes; the older path registered them at 255), which
# a split does not record: a query for a 40-254-byte token finds what that split's writer kept.
REFERENCE_TOKEN_LIMIT = 255
# Both writers index `raw` values with tantivy's bare RawTokenizer: tantivy leaves only a token over
# MAX_TOKEN_LEN = 65,530 bytes out of the postings (src/postings/postings_writer.rs).
RAW_VALUE_LIMIT = 65_531
# What a read asks of the index besides a query promise: (its SearchQuery with the struct-field
# narrowing, columns); see cache.SplitCache.local_dir, which names the same type (this layer comes first)
Reads = tuple["SearchQuery | None", tuple[str, ...]]


@dataclass(frozen=True)
class NativeField:
    """One Tantivy field of a reference split (meta.json's schema entry, or the doc mapping's)."""

    id: int  # position in the Tantivy schema
    name: str
    type: str  # meta.json's type names: text, i64, u64, f64, bool, date, bytes, json_object, ip_addr, facet
    tokenizer: str | None = None
    record: str | None = None
    stored: bool = True
    indexed: bool = True
    fast: bool = False


@dataclass(frozen=True)
class ReferenceInfo:
    """reference.json: what types the rows of an extracted reference split."""

    where: str  # the split's URI (errors name it)
    schema_json: dict[str, Any]  # the table's Spark schema
    partition_columns: tuple[str, ...]
    footer_start: int


# ---- fields and specs -----------------------------------------------------------------------------


def meta_fields(meta: Mapping[str, Any]) -> list[NativeField]:
    """The fields of a meta.json (tantivy's IndexMeta), in field id order."""
    out = []
    for i, d in enumerate(meta["schema"]):
        o = d.get("options") or {}
        t = str(d["type"])
        indexing = o.get("indexing") if t in ("text", "json_object") else None
        indexed = bool(indexing) if t in ("text", "json_object") else bool(o.get("indexed", False))
        out.append(
            NativeField(
                i,
                str(d["name"]),
                t,
                tokenizer=(indexing or {}).get("tokenizer"),
                record=(indexing or {}).get("record"),
                stored=bool(o.get("stored", False)),
                indexed=indexed,
                fast=bool(o.get("fast", False)),
            )
        )
    return out


_MAPPING_TYPES = {"datetime": "date", "object": "json_object", "ip": "ip_addr"}


def mapping_fields(doc_mapping: str) -> list[NativeField]:
    """The fields of a reference doc mapping (docMappingJson: sorted by name, so `id` is not the
    field id; the record option is not in it: the reference indexes strings with positions)."""
    out = []
    for i, d in enumerate(json.loads(doc_mapping)):
        t = str(d.get("type"))
        t = _MAPPING_TYPES.get(t, t)
        text = t in ("text", "json_object")
        out.append(
            NativeField(
                i,
                str(d["name"]),
                t,
                tokenizer=(d.get("tokenizer") or "raw") if text else None,
                record=("position" if t == "text" else "basic") if text else None,
                stored=bool(d.get("stored", True)),
                indexed=bool(d.get("indexed", True)),
                fast=bool(d.get("fast", False)),
            )
        )
    return out


def reference_tokenizer(name: str) -> tuple[str, int]:
    """(tokenizer, token length) of a tokenizer name in a reference split: tantivy4java names a
    field's analyzer `<tokenizer>_limit_<n>` when its token length is not 255, and registers its
    plain tokenizers (`default`, `whitespace`, ...) with a 255-byte limit."""
    base, sep, n = name.rpartition("_limit_")
    if sep and n.isdigit():
        return base, int(n)
    return name, REFERENCE_TOKEN_LIMIT


def _indexed_fields(kind: str, f: NativeField) -> tuple[IndexedField, ...]:
    """Our description of a reference field a column of this kind reads through, () when the
    index cannot answer for it exactly the way our readers assume (its rows decide instead)."""
    if not f.indexed:
        return ()
    if kind == "string" and f.type == "text":
        tok = f.tokenizer or "raw"
        if tok == "raw":
            return (
                IndexedField(
                    f.name,
                    "text",
                    tokenizer="raw",
                    record=f.record,
                    fast=f.fast,
                    exact=True,
                    max_value_bytes=RAW_VALUE_LIMIT,
                ),
            )
        base, limit = reference_tokenizer(tok)
        # (a string column's filters never narrow by a tokenized field's terms: kind `string`
        # reads through an exact field only, so what a writer dropped cannot lose rows)
        return (IndexedField(f.name, "text", tokenizer=base, record=f.record, token_limit=limit),)
    plain = {"i64": "i64", "f64": "f64", "bool": "bool", "decimal": "f64"}
    if plain.get(kind) == f.type:
        return (IndexedField(f.name, f.type, fast=f.fast),)
    if kind == "json" and f.type == "json_object":
        return (IndexedField(f.name, "json", tokenizer=f.tokenizer or "raw", record=f.record or "basic", fast=f.fast),)
    # dates and timestamps (Tantivy date fields, microseconds), binary (bytes), IP addresses: read
    # from the rows, filters decided on them
    return ()


def native_specs(
    fields: Sequence[NativeField], schema_json: Mapping[str, Any], partition_columns: Sequence[str]
) -> list[ColumnSpec]:
    """The column specs of a reference split: the table's data columns, each read through its
    field of the split (by name) as the reference indexed it. A column the split lacks has none."""
    by_name = {f.name: f for f in fields}
    parts = set(partition_columns)
    out = []
    for c in schema_json.get("fields", []):
        name = c["name"]
        if name in parts:
            continue
        kind = atomic_kind(c["type"]) or "binary"
        f = by_name.get(name)
        indexed = _indexed_fields(kind, f) if f is not None else ()
        # not stored: reads NULL, as in the reference; its filters are the index's, or refused
        # (tantivy_query.index_only_message) where we do not query that field type
        index_only = f is not None and not f.stored
        out.append(ColumnSpec(name, c["type"], kind, indexed, bool(c.get("nullable", True)), index_only=index_only))
    return out


def stored_columns(
    fields: Sequence[NativeField], schema_json: Mapping[str, Any], partition_columns: Sequence[str]
) -> list[dict[str, Any]]:
    """The table's data columns (Spark field JSONs, in table order) the split's document store holds."""
    stored = {f.name for f in fields if f.stored}
    parts = set(partition_columns)
    return [c for c in schema_json.get("fields", []) if c["name"] in stored and c["name"] not in parts]


def fast_columns(fields: Sequence[NativeField], columns: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The stored columns whose fast field holds the stored value itself: integers, floats and
    booleans (Tantivy keeps i64/f64/bool fast values losslessly; strings' fast columns hold the
    fast tokenizer's terms, dates their precision: those come from the document store)."""
    by_name = {f.name: f for f in fields}
    same = {"i64": "i64", "f64": "f64", "bool": "bool"}
    out = set()
    for c in columns:
        f = by_name.get(c["name"])
        kind = atomic_kind(c["type"])
        if f is not None and f.fast and f.stored and kind is not None and same.get(kind) == f.type:
            out.add(c["name"])
    return frozenset(out)


# ---- the extracted directory ---------------------------------------------------------------------


def is_reference_dir(local_dir: str) -> bool:
    return os.path.exists(os.path.join(local_dir, REFERENCE_FILE))


def load_info(local_dir: str) -> ReferenceInfo:
    try:
        with open(os.path.join(local_dir, REFERENCE_FILE), "rb") as f:
            d = json.loads(f.read())
        return ReferenceInfo(
            str(d["where"]), dict(d["schema"]), tuple(d["partitionColumns"]), int(d["footerStartOffset"])
        )
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SplitFormatError(f"split directory {local_dir}: unreadable {REFERENCE_FILE} ({e})") from None


def _save_info(local_dir: str, info: ReferenceInfo) -> None:
    """Written anew (renamed into place): its inode names one state of the `.term` files."""
    path = os.path.join(local_dir, REFERENCE_FILE)
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    d = {
        "where": info.where,
        "schema": info.schema_json,
        "partitionColumns": list(info.partition_columns),
        "footerStartOffset": info.footer_start,
    }
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(d, f, ensure_ascii=False)
    os.replace(tmp, path)


def load_meta(local_dir: str, where: str) -> dict[str, Any]:
    try:
        with open(os.path.join(local_dir, "meta.json"), "rb") as f:
            meta: dict[str, Any] = json.loads(f.read().decode("utf-8"))
        meta["schema"]  # noqa: B018 - checked here, used by meta_fields
        return meta
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SplitFormatError(f"split {where}: unreadable meta.json in the bundle ({type(e).__name__}: {e})") from None


# The table's (Spark schema JSON, partition columns) covering a split's field names
TableSchema = Callable[[Collection[str]], tuple[Mapping[str, Any], Sequence[str]]]


def extract(
    path: str,
    dest_dir: str,
    where: str,
    table_schema: TableSchema,
    *,
    footer_start: int | None = None,
    size: int | None = None,
    query: SearchQuery | None = None,
    postings: bool = True,
    reads: Reads | None = None,
) -> None:
    """The reference split at local `path` extracted into `dest_dir` to be opened natively, with
    the term dictionaries `query` and `reads` read transcoded (needed_fields; every one without
    either). footer_start / size: what the log records, checked against the file."""
    bundle = extract_bundle(path, dest_dir, where)
    if size is not None and size != bundle.size:
        raise SplitFormatError(f"split {where}: the log records {size} bytes but the file has {bundle.size}")
    if footer_start is not None and footer_start != bundle.footer_start:
        raise SplitFormatError(
            f"split {where}: the log records footerStartOffset {footer_start} but the bundle's "
            f"file offsets start at {bundle.footer_start}"
        )
    meta = load_meta(dest_dir, where)  # a bundle without a readable schema fails here, naming the split
    schema_json, partition_columns = table_schema([f.name for f in meta_fields(meta)])
    info = ReferenceInfo(where, dict(schema_json), tuple(partition_columns), bundle.footer_start)
    _save_info(dest_dir, info)
    ensure(dest_dir, query, postings, reads)


# ---- term dictionaries ---------------------------------------------------------------------------


def _term_files(local_dir: str) -> list[str]:
    return sorted(n for n in os.listdir(local_dir) if n.endswith(".term"))


def dictionary_kinds(path: str, num_fields: int) -> dict[int, int]:
    """Field id -> the kind of its dictionary (DICT_TYPE_FST, DICT_TYPE_SSTABLE) in a `.term` composite file."""
    length = os.path.getsize(path)
    with open(path, "rb") as f:
        sections = composite_sections(length, read_tail(f, length), num_fields)
        kinds = {}
        for field, (start, end) in sections.items():
            if end - start < 4:
                continue  # no dictionary (a field without terms): nothing to open
            f.seek(end - 4)
            kinds[field] = int(struct.unpack("<I", f.read(4))[0])
    return kinds


_kinds_seen: dict[tuple[str, int, int], frozenset[int]] = {}
_kinds_lock = threading.Lock()


def sstable_fields(local_dir: str, num_fields: int, where: str) -> frozenset[int]:
    """Field ids whose dictionary is still an SSTable in some `.term` file of the directory (kept
    per file state: a `.term` file is only ever replaced, never written in place)."""
    out: set[int] = set()
    for name in _term_files(local_dir):
        path = os.path.join(local_dir, name)
        st = os.stat(path)
        key = (path, st.st_ino, st.st_mtime_ns)
        with _kinds_lock:
            got = _kinds_seen.get(key)
        if got is None:
            try:
                kinds = dictionary_kinds(path, num_fields)
            except (ValueError, struct.error, OSError) as e:
                raise SplitFormatError(f"split {where}: unreadable term dictionary file {name} ({e})") from None
            unknown = sorted(f for f, k in kinds.items() if k not in (DICT_TYPE_FST, DICT_TYPE_SSTABLE))
            if unknown:
                raise SplitFormatError(
                    f"split {where}: term dictionary file {name}: fields {unknown} have an unknown dictionary kind"
                )
            got = frozenset(f for f, k in kinds.items() if k == DICT_TYPE_SSTABLE)
            with _kinds_lock:
                if len(_kinds_seen) > 4096:
                    _kinds_seen.clear()
                _kinds_seen[key] = got
        out |= got
    return frozenset(out)


def needed_fields(
    local_dir: str, query: SearchQuery | None, postings: bool = True, reads: Reads | None = None
) -> frozenset[int] | None:
    """Field ids whose term dictionaries a read opens (None: every field, also when a query's fields
    cannot be told): the fields of `query`'s leaves (only the scored ones' with `postings` False:
    the term lookups of corpus statistics), of the query of `reads` (with its narrowing) and its
    columns' fields (a column reads through the reference field of its name), from their analyses
    for this split (expr/search_query.py). Neither `query` nor `reads`: None."""
    if query is None and reads is None:
        return None
    info = load_info(local_dir)
    fields = meta_fields(load_meta(local_dir, info.where))
    specs = native_specs(fields, info.schema_json, info.partition_columns)
    ids = {f.name: f.id for f in fields}
    asked = [(query, postings)] if query is not None else []
    asked += [(reads[0], True)] if reads is not None and reads[0] is not None else []
    out = {ids[c] for c in (reads[1] if reads is not None else ()) if c in ids}
    for value, full in asked:
        try:
            names = value.analysis(specs).read_fields(full)
        except (IndexTablesError, ValueError):
            return None
        if names is None or not names <= set(ids):
            return None
        out |= {ids[n] for n in names}
    return frozenset(out)


def satisfies(local_dir: str, query: SearchQuery | None, postings: bool = True, reads: Reads | None = None) -> bool:
    """Whether every term dictionary a read (needed_fields) opens is an FST (True for our splits)."""
    if not is_reference_dir(local_dir):
        return True
    info = load_info(local_dir)
    fields = meta_fields(load_meta(local_dir, info.where))
    left = sstable_fields(local_dir, len(fields), info.where)
    if not left:
        return True
    need = needed_fields(local_dir, query, postings, reads)
    return not (left if need is None else left & need)


def ensure(local_dir: str, query: SearchQuery | None, postings: bool = True, reads: Reads | None = None) -> bool:
    """Transcode the term dictionaries a read opens (needed_fields: every one without `query` or
    `reads`) that are still SSTables; the caller holds the split's locks. Returns whether a file
    changed (then reference.json is written anew: indexes open on the old files must be reopened)."""
    if not is_reference_dir(local_dir):
        return False
    info = load_info(local_dir)
    fields = meta_fields(load_meta(local_dir, info.where))
    left = sstable_fields(local_dir, len(fields), info.where)
    need = needed_fields(local_dir, query, postings, reads)
    todo = left if need is None else left & need
    if not todo:
        return False
    from indextables_spark.core.split.reference.transcode import (
        transcode_index,  # lazy: the FST builder loads only when a reference split needs it
    )

    transcode_index(local_dir, {f.name for f in fields if f.id in todo}, info.where)
    _save_info(local_dir, info)
    return True


# ---- opening ---------------------------------------------------------------------------------------


def reference_analyzers(fields: Sequence[NativeField]) -> dict[str, str]:
    """The tokenizer names the fields use -> our analyzer of the reference's searcher for each
    (`<tokenizer>_limit_<n>`, analyzers.py): its `default` keeps tokens up to 255 bytes, tantivy-py's
    built-in one drops them at 40, and a query must be analysed as the reference's searcher does.
    A tokenizer we do not know is left out: tantivy fails naming it when a query needs it."""
    out = {}
    for name in sorted({f.tokenizer for f in fields if f.tokenizer and f.tokenizer != "raw"}):
        base, limit = reference_tokenizer(name)
        if base in analyzers.BUILTIN_LIMITS or analyzers.is_custom(base):
            out[name] = f"{base}_limit_{limit}"
    return out


def register_analyzers(index: tantivy.Index, names: Mapping[str, str]) -> None:
    """Register each analyzer (reference_analyzers' values) under its tokenizer name on an opened index."""
    for name, analyzer in names.items():
        index.register_tokenizer(name, analyzers.analyzer(analyzer))
