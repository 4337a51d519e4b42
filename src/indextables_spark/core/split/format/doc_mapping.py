"""A split's doc mapping (the JSON field descriptors docMappingRef hashes) ↔ column specs, and the
Tantivy schema of a split's specs."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from indextables_spark.config.options import Options
from indextables_spark.core.schema.types import ROW_FIELD, ColumnSpec, IndexedField
from indextables_spark.core.split.format.column_specs import validate_schema
from indextables_spark.errors import SplitFormatError, UnsupportedTypeError

if TYPE_CHECKING:
    import tantivy


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
