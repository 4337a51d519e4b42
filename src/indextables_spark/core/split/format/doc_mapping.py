"""A split's doc mapping (the JSON field descriptors docMappingRef hashes) ↔ column specs, and the
Tantivy schema of a split's specs."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from indextables_spark.config.options import Options
from indextables_spark.core.schema.types import ROW_FIELD, ColumnSpec, IndexedField, VectorSpec
from indextables_spark.core.split.format.column_specs import validate_schema
from indextables_spark.errors import SplitFormatError, UnsupportedTypeError

if TYPE_CHECKING:
    import tantivy


# The hidden row id field's descriptor says where a split's index came from when it is not ours
# (reference/rewrite.py: IndexTables4Spark's index kept by CONVERT); MERGE SPLITS re-indexes such
# splits with the table's settings.
ORIGIN_KEY = "origin"


def _descriptors(specs: Iterable[ColumnSpec], origin: str | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in specs:
        if s.partition:
            continue
        base = {"column": s.name, "kind": s.kind, "sparkType": s.spark_type, "nullable": s.nullable}
        if not s.indexed_fields:  # stored only (binary); with indexOnly: values lost (SplitWriter's lost_columns)
            d0 = {"name": s.name, "type": "none", "indexed": False, "fast": False, "stored": False, **base}
            if s.vector is not None:  # its own nearest-neighbour index (vector_index.py)
                d0["vector"] = {"dims": s.vector.dims, "metric": s.vector.metric}
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
            if f.max_value_bytes is not None:  # a converted reference split's raw field (reference/native.py)
                d["maxValueBytes"] = f.max_value_bytes
            if f.string_mode is not None:  # a compact string mode (core/schema/compact_strings.py)
                d["stringMode"] = f.string_mode
            if s.index_only:  # absent otherwise: doc mappings (and their hashes) written before stay as they were
                d["indexOnly"] = True
            out.append(d)
    row = {"name": ROW_FIELD, "type": "u64", "indexed": False, "fast": True, "stored": False, "hidden": True}
    out.append({**row, ORIGIN_KEY: origin} if origin is not None else row)
    return out


def doc_mapping_json(
    schema_json: Mapping[str, Any], partition_columns: Sequence[str], options: Options | Mapping[str, str] | None = None
) -> str:
    """JSON array of Tantivy field descriptors (what gets hashed into docMappingRef)."""
    specs = validate_schema(schema_json, partition_columns, options)
    return doc_mapping_from_specs(specs)


def doc_mapping_from_specs(specs: Iterable[ColumnSpec], origin: str | None = None) -> str:
    """origin: who built the index, when not us (see ORIGIN_KEY)."""
    return json.dumps(_descriptors(specs, origin), separators=(",", ":"), ensure_ascii=False)


def doc_mapping_origin(doc_mapping: str | None) -> str | None:
    """Who built the index of splits with this doc mapping, when not us (ORIGIN_KEY); None for ours
    and for a mapping that does not parse (its splits fail when read, naming the split)."""
    if not doc_mapping or ORIGIN_KEY not in doc_mapping:
        return None
    try:
        items = json.loads(doc_mapping)
    except ValueError:
        return None
    if not isinstance(items, list):
        return None
    for d in items:
        if isinstance(d, dict) and d.get("hidden") and isinstance(d.get(ORIGIN_KEY), str):
            return str(d[ORIGIN_KEY])
    return None


def specs_from_doc_mapping(doc_mapping: str | list[dict[str, Any]]) -> list[ColumnSpec]:
    """Rebuild the stored columns' specs from a split's doc mapping (column order kept)."""
    try:
        if isinstance(doc_mapping, str):
            return list(_specs_of_text(doc_mapping))
        return _specs_from_doc_mapping(doc_mapping)
    except (ValueError, TypeError, KeyError, AttributeError) as e:  # a crafted or damaged doc mapping
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
        if isinstance(d.get("vector"), dict):
            c["vector"] = VectorSpec(int(d["vector"]["dims"]), str(d["vector"].get("metric", "cosine")))
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
                    max_value_bytes=int(d["maxValueBytes"]) if d.get("maxValueBytes") is not None else None,
                    string_mode=str(d["stringMode"]) if d.get("stringMode") is not None else None,
                )
            )
    return [
        ColumnSpec(
            name,
            c["sparkType"],
            c["kind"],
            tuple(c["fields"]),
            c["nullable"],
            index_only=bool(c.get("indexOnly")),
            vector=c.get("vector"),
        )
        for name, c in cols.items()
    ]


def tantivy_schema(specs: Iterable[ColumnSpec]) -> tantivy.Schema:
    """The Tantivy schema of a split (no stored fields: rows live in the Arrow row store)."""
    import tantivy  # lazy: keeps `import indextables_spark.core.split.format.doc_mapping` free of tantivy

    sb = tantivy.SchemaBuilder()
    tokenized = {"text": sb.add_text_field, "json": sb.add_json_field}
    plain = {
        "i64": sb.add_integer_field,
        "f64": sb.add_float_field,
        "bool": sb.add_boolean_field,
        "ip": sb.add_ip_addr_field,
        "u64": sb.add_unsigned_field,  # the hashes of a compact string column (compact_strings.py)
    }
    for s in specs:
        for f in s.indexed_fields:
            if f.type in tokenized:
                tokenizer = f.index_tokenizer or "default"
                index_option = f.record or "position"
                tokenized[f.type](
                    f.name, stored=False, fast=f.fast, tokenizer_name=tokenizer, index_option=index_option
                )
            elif f.type in plain:
                plain[f.type](f.name, stored=False, indexed=f.indexed, fast=f.fast)
            else:
                raise UnsupportedTypeError(f"column {s.name!r}: unknown Tantivy field type {f.type!r}")
    sb.add_unsigned_field(ROW_FIELD, stored=False, indexed=False, fast=True)
    return sb.build()
