"""Reading the reference implementation's splits: re-indexed into our split format when they enter
the split cache.

IndexTables4Spark's splits (quickwit.py) hold a Tantivy index whose term dictionaries are
SSTables (tantivy's `quickwit` feature); tantivy-py is built with FST dictionaries and refuses
them ("compiled tantivy with Fst, but got SSTable"), while it still opens the index, its document
store and fast fields. So a reference split is converted once per split cache:

1. the bundle's index files are extracted and opened with tantivy-py;
2. every live document is read from the document store (the reference stores every field; its
   rows come from there too: tantivy4java `streaming_doc_retrieval.rs`), typed by the table schema;
3. the rows are indexed by our SplitWriter with the reference's field configuration (a `raw`
   text field is our exact `string` kind, another tokenizer a `text` column with that tokenizer,
   `ip_addr` our `ip`), and the resulting split is extracted into the cache as any of ours.

From then on every reader (Spark, Spark-free search, aggregations, streaming) sees one of our
splits. Transcoding the SSTable dictionaries to FSTs in place was the alternative; it needs an FST
builder bit-compatible with tantivy's and would still leave the rows in the document store, which
tantivy-py reads at ~100k rows/s, while the re-index costs ~25 µs a row once (docs/guide/
indextables4spark-tables.md has the measurement).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import os
import shutil
import tempfile
from typing import Any, Mapping, Sequence

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core.log.doc_mapping import is_reference_doc_mapping
from indextables_spark.core.schema.arrow_types import arrow_type
from indextables_spark.core.split.format._tantivy import tantivy_call
from indextables_spark.core.split.format.bundle import FOOTER_FILE, SplitFooter, extract
from indextables_spark.core.split.format.column_specs import validate_schema
from indextables_spark.core.split.format.doc_mapping import specs_from_doc_mapping
from indextables_spark.core.split.reference.quickwit import extract_bundle
from indextables_spark.core.storage.local import LocalStorage
from indextables_spark.errors import IndexTablesError, SplitFormatError

REFERENCE_KEY = "referenceSplit"  # key added to the converted split's local footer.json
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
# Spark types whose stored values tantivy-py returns as the Python value Arrow takes (int, float,
# str, bool, bytes); Arrow checks each one (a str in a long column fails, naming the column).
_PLAIN_KINDS = frozenset({"integer", "long", "short", "byte", "float", "double", "string", "boolean", "binary"})


def written_by_reference(snapshot: Any, add_file: Any) -> bool:
    """Is this live split one the reference wrote (judged by the doc mapping the log records)?"""
    mapping = getattr(add_file, "doc_mapping_json", None) or (
        snapshot.doc_mapping(add_file.doc_mapping_ref) if add_file.doc_mapping_ref else None
    )
    return is_reference_doc_mapping(mapping)


# ---- the reference's field configuration ---------------------------------------------------------


def _meta_fields(index_dir: str, where: str) -> dict[str, tuple[str, str | None, bool]]:
    """meta.json's schema (the split's own description): field name -> (type, tokenizer, stored)."""
    try:
        with open(os.path.join(index_dir, "meta.json"), "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
        out: dict[str, tuple[str, str | None, bool]] = {}
        for d in meta["schema"]:
            options = d.get("options") or {}
            indexing = options.get("indexing") or {}
            out[d["name"]] = (str(d["type"]), indexing.get("tokenizer"), bool(options.get("stored", True)))
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise SplitFormatError(f"split {where}: unreadable meta.json in the bundle ({type(e).__name__}: {e})") from None


def _mapping_fields(doc_mapping: str) -> dict[str, tuple[str, str | None]]:
    """A reference doc mapping (docMappingJson): field name -> (type, tokenizer), in meta.json's
    type names (the doc mapping says `ip` where meta.json says `ip_addr`)."""
    out: dict[str, tuple[str, str | None]] = {}
    for d in json.loads(doc_mapping):
        t = str(d.get("type"))
        out[str(d["name"])] = ("ip_addr" if t == "ip" else t, d.get("tokenizer"))
    return out


def reference_tokenizer(name: str) -> tuple[str, int]:
    """(tokenizer, token length) of a tokenizer name in a reference split: tantivy4java names a
    field's analyzer `<tokenizer>_limit_<n>` when its token length is not 255, and registers its
    plain tokenizers (`default`, `whitespace`, ...) with a 255-byte limit."""
    base, sep, n = name.rpartition("_limit_")
    if sep and n.isdigit():
        return base, int(n)
    return name, 255


def writer_options(fields: Mapping[str, tuple[str, str | None]], string_columns: Sequence[str]) -> dict[str, str]:
    """Our indexing options reproducing the reference's field configuration for string columns."""
    out: dict[str, str] = {}
    for col in string_columns:
        field = fields.get(col)
        if field is None:
            continue
        ftype, tokenizer = field
        if ftype == "ip_addr":
            out[f"indexing.typemap.{col}"] = "ip"
        elif ftype == "text":
            if (tokenizer or "raw") == "raw":
                out[f"indexing.typemap.{col}"] = "string"
            else:
                base, limit = reference_tokenizer(str(tokenizer))
                out[f"indexing.typemap.{col}"] = "text"
                out[f"indexing.tokenizer.{col}"] = base
                out[f"indexing.tokenLength.{col}"] = str(limit)
    return out


def _data_columns(schema_json: Mapping[str, Any], partition_columns: Sequence[str]) -> list[dict[str, Any]]:
    parts = set(partition_columns)
    return [c for c in schema_json.get("fields", []) if c["name"] not in parts]


def mapping_options(
    doc_mapping: str, schema_json: Mapping[str, Any], partition_columns: Sequence[str]
) -> dict[str, str]:
    """Our indexing options (short keys) reproducing a reference doc mapping's string fields."""
    columns = _data_columns(schema_json, partition_columns)
    strings = [c["name"] for c in columns if _kind(c["type"]) == "string"]
    return writer_options(_mapping_fields(doc_mapping), strings)


def mapping_specs(doc_mapping: str, schema_json: Mapping[str, Any], partition_columns: Sequence[str]) -> list[Any]:
    """The column specs a reference split has once converted (what queries are checked against
    before any split is opened): the table's data columns with the doc mapping's tokenizers."""
    return list(_mapping_specs(doc_mapping, json.dumps(schema_json, sort_keys=True), tuple(partition_columns)))


@functools.lru_cache(maxsize=64)
def _mapping_specs(doc_mapping: str, schema_text: str, partition_columns: tuple[str, ...]) -> tuple[Any, ...]:
    """Worked out once per process and mapping: every query of a table asks for the same."""

    schema_json = json.loads(schema_text)
    columns = _data_columns(schema_json, partition_columns)
    opts = mapping_options(doc_mapping, schema_json, partition_columns)
    return tuple(validate_schema({"type": "struct", "fields": columns}, [], Options.of(opts)))


def specs_for_doc_mapping(
    doc_mapping: str, schema_json: Mapping[str, Any], partition_columns: Sequence[str]
) -> list[Any]:
    """Specs of a split from the doc mapping the log records for it: ours, or the reference's."""

    if is_reference_doc_mapping(doc_mapping):
        return mapping_specs(doc_mapping, schema_json, partition_columns)
    return specs_from_doc_mapping(doc_mapping)


# ---- documents -> Arrow --------------------------------------------------------------------------


def _kind(spark_type: Any) -> str:
    if isinstance(spark_type, dict):
        return str(spark_type.get("type"))
    t = str(spark_type)
    return "decimal" if t.startswith("decimal") else t


def _to_datetime(v: Any) -> dt.datetime:
    if isinstance(v, dt.datetime):
        return v if v.tzinfo else v.replace(tzinfo=dt.timezone.utc)
    if isinstance(v, (int, float)):  # microseconds (the reference's datetime precision)
        return _EPOCH + dt.timedelta(microseconds=int(v))
    if isinstance(v, str):
        return _to_datetime(dt.datetime.fromisoformat(v.replace("Z", "+00:00")))
    raise TypeError(f"not a date/time value: {v!r}")


def to_python(v: Any, spark_type: Any) -> Any:
    """A stored value (tantivy-py's Python form; JSON for complex columns) as the Spark type's value."""
    if v is None:
        return None
    k = _kind(spark_type)
    if k in ("integer", "long", "short", "byte"):
        return int(v)
    if k in ("float", "double"):
        return float(v)
    if k == "boolean":
        return bool(v)
    if k in ("string", "varchar", "char") or k.startswith(("varchar", "char")):
        return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
    if k == "binary":
        return bytes(v)
    if k == "decimal":
        return decimal.Decimal(str(v))
    if k == "date":
        return v if isinstance(v, dt.date) and not isinstance(v, dt.datetime) else _to_datetime(v).date()
    if k == "timestamp":
        return _to_datetime(v)
    if k == "timestamp_ntz":
        return _to_datetime(v).replace(tzinfo=None)
    if k == "struct":
        fields = spark_type.get("fields") or []
        if not isinstance(v, dict):
            raise TypeError(f"expected a JSON object for a struct, got {type(v).__name__}")
        return {f["name"]: to_python(v.get(f["name"]), f["type"]) for f in fields}
    if k == "array":
        if not isinstance(v, list):
            raise TypeError(f"expected a JSON array, got {type(v).__name__}")
        return [to_python(x, spark_type.get("elementType")) for x in v]
    if k == "map":
        if not isinstance(v, dict):
            raise TypeError(f"expected a JSON object for a map, got {type(v).__name__}")
        kt, vt = spark_type.get("keyType"), spark_type.get("valueType")
        return [(to_python(_map_key(key, kt), kt), to_python(val, vt)) for key, val in v.items()]
    raise TypeError(f"unsupported Spark type {spark_type!r}")


def _map_key(key: str, key_type: Any) -> Any:
    """Map keys are stringified in the reference's JSON; to_python turns numeric text back into
    numbers, a boolean's text needs reading here (`bool("false")` is True)."""
    return key == "true" if _kind(key_type) == "boolean" else key


def _column_value(doc: Mapping[str, list[Any]], name: str, spark_type: Any) -> Any:
    values = doc.get(name)
    if not values:
        return None  # the reference omits nulls
    k = _kind(spark_type)
    v = values[0]
    if k == "array" and isinstance(v, dict) and set(v) == {name}:
        v = v[name]  # arrays are stored wrapped: {"<col>": [...]}
    elif k == "array" and len(values) > 1:
        v = values
    return to_python(v, spark_type)


def documents_table(
    docs: Sequence[Mapping[str, list[Any]]], columns: Sequence[Mapping[str, Any]], where: str
) -> pa.Table:
    """The documents as an Arrow table of the table's data columns (Spark schema field JSONs)."""
    arrays = []
    for c in columns:
        name, spark_type = c["name"], c["type"]
        try:
            if _kind(spark_type) in _PLAIN_KINDS:  # tantivy-py's values are already the right Python type
                values = [v[0] if (v := d.get(name)) else None for d in docs]
            else:
                values = [_column_value(d, name, spark_type) for d in docs]
            arrays.append(pa.array(values, type=arrow_type(spark_type)))
        except (TypeError, ValueError, ArithmeticError, pa.ArrowException) as e:
            raise SplitFormatError(
                f"split {where}: column {name!r} cannot be read as the table's type {spark_type!r} "
                f"({type(e).__name__}: {e})"
            ) from None
    return pa.Table.from_arrays(arrays, names=[c["name"] for c in columns])


def read_documents(index_dir: str, where: str) -> list[dict[str, list[Any]]]:
    """Every live document of the index, in document order (segment, then doc id)."""
    import tantivy  # lazy: keeps `import indextables_spark.core.split.reference.reference` free of tantivy

    with tantivy_call(f"opening the reference split {where}"):
        index = tantivy.Index.open(index_dir)
        searcher = index.searcher()
        n = searcher.num_docs
        if n == 0:
            return []
        hits = searcher.search(tantivy.Query.all_query(), n).hits
        addrs = sorted((a for _s, a in hits), key=lambda a: (a.segment_ord, a.doc))
        return [searcher.doc(a).to_dict() for a in addrs]


# ---- conversion ---------------------------------------------------------------------------------


def convert(
    path: str,
    dest_dir: str,
    where: str,
    schema_json: Mapping[str, Any],
    partition_columns: Sequence[str],
    *,
    footer_start: int | None = None,
    size: int | None = None,
    options: Options | None = None,
) -> SplitFooter:
    """Re-index the reference split at local `path` into `dest_dir` as one of ours (extracted, as
    bundle.extract leaves it); `where` names the split in errors. footer_start / size: what the
    log records for the split, checked against the file."""
    from indextables_spark.core.split.write.builder import (
        SplitWriter,  # lazy: keeps `import indextables_spark.core.split.reference.reference` free of numpy
    )

    work = tempfile.mkdtemp(
        prefix="indextables-convert-", dir=(options or Options()).get_str("indexing.tempDirectoryPath") or None
    )
    try:
        index_dir = os.path.join(work, "index")
        bundle = extract_bundle(path, index_dir, where)
        if size is not None and size != bundle.size:
            raise SplitFormatError(f"split {where}: the log records {size} bytes but the file has {bundle.size}")
        if footer_start is not None and footer_start != bundle.footer_start:
            raise SplitFormatError(
                f"split {where}: the log records footerStartOffset {footer_start} but the bundle's "
                f"file offsets start at {bundle.footer_start}"
            )
        meta_fields = _meta_fields(index_dir, where)
        fields = {name: (t, tok) for name, (t, tok, _stored) in meta_fields.items()}
        columns = _data_columns(schema_json, partition_columns)
        # index-only fields (the reference's indexing.indexonlyfields) are not in the document
        # store, and tantivy-py cannot read the SSTable term dictionaries that hold them: their
        # values are lost to the conversion (they read NULL, as in the reference; filters refused)
        lost = [c["name"] for c in columns if c["name"] in meta_fields and not meta_fields[c["name"]][2]]
        if not columns:
            raise SplitFormatError(f"split {where}: the table has no data columns to read")
        docs = read_documents(index_dir, where)
        table = documents_table(docs, columns, where)
        strings = [c["name"] for c in columns if _kind(c["type"]) == "string"]
        data_schema = {"type": "struct", "fields": columns}
        opts = Options.of(writer_options(fields, strings))
        out = LocalStorage(os.path.join(work, "out"))
        writer = SplitWriter(out, data_schema, [], opts, lost_columns=lost)
        try:
            writer.ensure_split()  # a split with no live documents is still a split
            writer.write_batch(table)
            adds = writer.finish()
        except IndexTablesError as e:
            raise SplitFormatError(f"split {where}: re-indexing the reference split failed: {e}") from e
        if len(adds) != 1:
            raise SplitFormatError(f"split {where}: re-indexing produced {len(adds)} splits, expected 1")
        footer = extract(out.local_path(adds[0].path), dest_dir, where)
        _mark(dest_dir, {"format": "quickwit-bundle", "docs": len(docs), "footerStartOffset": bundle.footer_start})
        return footer
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _mark(dest_dir: str, info: dict[str, Any]) -> None:
    """Record in the local footer.json that this directory holds a converted reference split."""
    path = os.path.join(dest_dir, FOOTER_FILE)
    with open(path, encoding="utf-8") as f:
        footer = json.load(f)
    footer[REFERENCE_KEY] = info
    with open(path, "w", encoding="utf-8") as f:
        json.dump(footer, f, ensure_ascii=False)
