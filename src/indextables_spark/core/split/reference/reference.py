"""The reference implementation's splits: which live splits it wrote, the column specs a read
checks before opening one, our indexing options reproducing its field configuration (CONVERT), and
its stored documents typed by the table schema (docstore.py reads them for the readers).

IndexTables4Spark's splits (quickwit.py) hold a Tantivy index whose term dictionaries are SSTables
(tantivy's `quickwit` feature), which tantivy-py refuses ("compiled tantivy with Fst, but got
SSTable"); native.py opens them in place, transcoding the dictionaries a read needs to FSTs
(transcode.py). Nothing is re-indexed: queries run on the reference's own index (its tokenizers,
its index-only fields, its record options) and rows come from its document store.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from indextables_spark.core.log.model.doc_mapping import is_reference_doc_mapping
from indextables_spark.core.schema.arrow_types import arrow_type
from indextables_spark.core.schema.types import ColumnSpec, SparkType
from indextables_spark.core.split.format.doc_mapping import specs_from_doc_mapping
from indextables_spark.core.split.reference.native import mapping_fields, native_specs, reference_tokenizer
from indextables_spark.errors import SplitFormatError

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.log.read.snapshot import Snapshot

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
# Spark types whose stored values tantivy-py returns as the Python value Arrow takes (int, float,
# str, bool, bytes); Arrow checks each one (a str in a long column fails, naming the column).
_PLAIN_KINDS = frozenset({"integer", "long", "short", "byte", "float", "double", "string", "boolean", "binary"})


def written_by_reference(snapshot: Snapshot, add_file: AddFile) -> bool:
    """Is this live split one the reference wrote (judged by the doc mapping the log records)?"""
    mapping = add_file.doc_mapping_json or (
        snapshot.doc_mapping(add_file.doc_mapping_ref) if add_file.doc_mapping_ref else None
    )
    return is_reference_doc_mapping(mapping)


# ---- the reference's field configuration ---------------------------------------------------------


def _mapping_fields(doc_mapping: str) -> dict[str, tuple[str, str | None]]:
    """A reference doc mapping (docMappingJson): field name -> (type, tokenizer), in meta.json's
    type names (the doc mapping says `ip` where meta.json says `ip_addr`)."""
    out: dict[str, tuple[str, str | None]] = {}
    for d in json.loads(doc_mapping):
        t = str(d.get("type"))
        out[str(d["name"])] = ("ip_addr" if t == "ip" else t, d.get("tokenizer"))
    return out


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
    """The column specs of a reference split from the doc mapping the log records for it (what
    queries and skipping are checked against before any split is opened): the split's own fields
    (native.native_specs), as the split's meta.json gives them once it is open."""
    return list(_mapping_specs(doc_mapping, json.dumps(schema_json, sort_keys=True), tuple(partition_columns)))


@functools.lru_cache(maxsize=64)
def _mapping_specs(doc_mapping: str, schema_text: str, partition_columns: tuple[str, ...]) -> tuple[ColumnSpec, ...]:
    """Worked out once per process and mapping: every query of a table asks for the same."""
    return tuple(native_specs(mapping_fields(doc_mapping), json.loads(schema_text), partition_columns))


def with_reference_index_only(specs: Sequence[ColumnSpec], snapshot: Snapshot) -> list[ColumnSpec]:
    """The table's column specs with the columns some reference doc mapping of the table indexes
    without storing (its indexing.indexonlyfields) marked index-only: a reader that re-checks
    filters on rows (Spark) must leave theirs to the index, as for our index-only columns."""
    from indextables_spark.core.log.commit.reference_splits import (
        snapshot_registry,  # lazy: keeps `import indextables_spark.core.split.reference.reference` light
    )

    unstored = {
        f.name
        for m in snapshot_registry(snapshot).values()
        if is_reference_doc_mapping(m)
        for f in mapping_fields(m)
        if not f.stored and f.indexed
    }
    if not unstored:
        return list(specs)
    return [replace(s, index_only=True) if s.name in unstored and not s.partition else s for s in specs]


def specs_for_doc_mapping(
    doc_mapping: str, schema_json: Mapping[str, Any], partition_columns: Sequence[str]
) -> list[Any]:
    """Specs of a split from the doc mapping the log records for it: ours, or the reference's."""

    if is_reference_doc_mapping(doc_mapping):
        return mapping_specs(doc_mapping, schema_json, partition_columns)
    return specs_from_doc_mapping(doc_mapping)


# ---- documents -> Arrow --------------------------------------------------------------------------


def _kind(spark_type: SparkType | None) -> str:
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


def to_python(v: Any, spark_type: SparkType | None) -> Any:
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
    if k == "struct" and isinstance(spark_type, dict):
        fields = spark_type.get("fields") or []
        if not isinstance(v, dict):
            raise TypeError(f"expected a JSON object for a struct, got {type(v).__name__}")
        return {f["name"]: to_python(v.get(f["name"]), f["type"]) for f in fields}
    if k == "array" and isinstance(spark_type, dict):
        if not isinstance(v, list):
            raise TypeError(f"expected a JSON array, got {type(v).__name__}")
        return [to_python(x, spark_type.get("elementType")) for x in v]
    if k == "map" and isinstance(spark_type, dict):
        if not isinstance(v, dict):
            raise TypeError(f"expected a JSON object for a map, got {type(v).__name__}")
        kt, vt = spark_type.get("keyType"), spark_type.get("valueType")
        return [(to_python(_map_key(key, kt), kt), to_python(val, vt)) for key, val in v.items()]
    raise TypeError(f"unsupported Spark type {spark_type!r}")


def _map_key(key: str, key_type: SparkType | None) -> Any:
    """Map keys are stringified in the reference's JSON; to_python turns numeric text back into
    numbers, a boolean's text needs reading here (`bool("false")` is True)."""
    return key == "true" if _kind(key_type) == "boolean" else key


def _column_value(doc: Mapping[str, list[Any]], name: str, spark_type: SparkType) -> Any:
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
