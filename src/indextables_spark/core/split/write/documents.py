"""Arrow rows → Tantivy JSON documents, built column-wise with Arrow compute.

Each column becomes an array of `"field":<json>` fragments (null where the cell is null, so the
field is omitted); the fragments are joined per row. Python touches each document only once, to
hand the string to `IndexWriter.add_json` (Tantivy parses it with the schema, so ints stay ints
and floats stay floats). Values as indexed:

- f64 (float/double): NaN and +inf → f64::MAX, -inf → -f64::MAX, -0.0 → 0.0 (JSON has no NaN/inf;
  the mapping is monotone for Spark's order, where NaN is the largest value, so ranges over the
  mapped values are supersets; see filters.f64_key)
- decimal: the nearest f64 (narrowing only)
- date: days since the epoch; timestamp: microseconds since the epoch
- raw (exact) strings longer than TERM_BYTES_LIMIT UTF-8 bytes: cut to TRUNCATE_CHARS characters
  (Tantivy silently drops longer terms); the split records such columns in `truncatedTerms`.
- json (array/map/struct): JSON of the value; an array of scalars is indexed under the empty key
  (`{"": [...]}`), so `tags:foo` matches; arrays of structs/maps as multi-valued objects.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import ipaddress
import json
import math
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.schema import compact_strings
from indextables_spark.core.schema.analyzers import CJK_BIGRAM, bigram_values
from indextables_spark.core.schema.types import ROW_FIELD, ColumnSpec
from indextables_spark.errors import SchemaMismatchError

F64_MAX = 1.7976931348623157e308
TERM_BYTES_LIMIT = 65000  # Tantivy's MAX_TOKEN_LEN is 65530 bytes
TRUNCATE_CHARS = 16000  # at most 64000 UTF-8 bytes


def exact_term(value: str) -> str:
    """The term a raw field holds for a string (same cut as the indexing side)."""
    return value if len(value.encode("utf-8")) <= TERM_BYTES_LIMIT else value[:TRUNCATE_CHARS]


def f64_key(v: float) -> float:
    """The value a f64 field holds for a float (see module doc)."""
    if math.isnan(v) or v == math.inf:
        return F64_MAX
    if v == -math.inf:
        return -F64_MAX
    return 0.0 if v == 0 else float(v)


def _json_escape(a: pa.Array) -> pa.Array:
    a = pc.replace_substring(a, "\\", "\\\\")
    a = pc.replace_substring(a, '"', '\\"')
    if pc.any(pc.match_substring_regex(a, "[\\x00-\\x1f]")).as_py():
        # Rare: control characters must be \u-escaped for a JSON parser.
        for c in range(32):
            ch = chr(c)
            if pc.any(pc.match_substring(a, ch)).as_py():
                a = pc.replace_substring(a, ch, "\\u%04x" % c)
    return a


def _quoted(a: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', _json_escape(a), '"', "")


def _as_string_array(a: pa.Array) -> pa.Array:
    if pa.types.is_large_string(a.type) or pa.types.is_string_view(a.type):
        return a.cast(pa.string())
    return a


def _cut_long_terms(a: pa.Array) -> tuple[pa.Array, bool]:
    lengths = pc.binary_length(a)
    longest = pc.max(lengths).as_py()
    if longest is None or longest <= TERM_BYTES_LIMIT:
        return a, False
    return pc.if_else(pc.greater(lengths, TERM_BYTES_LIMIT), pc.utf8_slice_codeunits(a, 0, TRUNCATE_CHARS), a), True


def _f64_values(a: pa.Array) -> pa.Array:
    x = a.cast(pa.float64())
    x = pc.if_else(pc.is_nan(x), F64_MAX, x)
    x = pc.if_else(pc.equal(x, math.inf), F64_MAX, x)
    x = pc.if_else(pc.equal(x, -math.inf), -F64_MAX, x)
    return pc.if_else(pc.equal(x, 0.0), 0.0, x)


def _number_text(spec: ColumnSpec, a: pa.Array) -> pa.Array:
    """JSON number text of a numeric-ish column (null stays null)."""
    t = a.type
    if spec.kind == "i64":
        return a.cast(pa.int64()).cast(pa.string())
    if spec.kind == "date":
        return a.cast(pa.int32()).cast(pa.string())
    if spec.kind == "timestamp":
        return a.cast(pa.int64()).cast(pa.string())
    if spec.kind == "f64":
        return _f64_values(a).cast(pa.string())
    if spec.kind == "decimal":
        return _f64_values(pc.cast(a, pa.float64(), safe=False)).cast(pa.string())
    if spec.kind == "bool":
        return a.cast(pa.string())
    raise TypeError(f"column {spec.name!r}: no number text for kind {spec.kind} ({t})")


# --- nested values (json kind): per-row Python, these columns are rarer -----------------------


def _jsonable(v: Any, t: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {t.field(i).name: _jsonable(v.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_map(t):
        return {_key_text(k, t.key_type): _jsonable(x, t.item_type) for k, x in v}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_jsonable(x, t.value_type) for x in v]
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (dt.datetime, dt.date)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode("ascii")
    return v


def _key_text(k: Any, t: pa.DataType) -> str:
    j = _jsonable(k, t)
    return j if isinstance(j, str) else json.dumps(j, separators=(",", ":"))


def _scalar_list_text(a: pa.Array) -> pa.Array | None:
    """`{"":[...]}` of a list of strings, integers or booleans built with Arrow compute (what
    _nested_text makes per row in Python, 10 µs a row); None for other element types."""
    t = a.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return None
    vt = t.value_type
    offsets = a.offsets  # of a slice: into the whole child array; rebased to 0
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    values = a.values.slice(first, last - first)
    offsets = pc.subtract(offsets, pa.scalar(first, offsets.type))
    if pa.types.is_string(vt) or pa.types.is_large_string(vt) or pa.types.is_string_view(vt):
        text = _quoted(_as_string_array(values))
    elif pa.types.is_integer(vt) or pa.types.is_boolean(vt):
        text = values.cast(pa.string())
    else:
        return None
    text = pc.fill_null(text, "null")
    cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
    lists = cls.from_arrays(offsets, text, mask=a.is_null())
    return pc.binary_join_element_wise('{"":[', pc.binary_join(lists, ","), "]}", "")


def _nested_text(a: pa.Array) -> pa.Array:
    fast = _scalar_list_text(a)
    if fast is not None:
        return fast
    t = a.type
    elem_objects = (pa.types.is_list(t) or pa.types.is_large_list(t)) and (
        pa.types.is_struct(t.value_type) or pa.types.is_map(t.value_type)
    )
    out: list[str | None] = []
    for v in a.to_pylist():
        if v is None:
            out.append(None)
            continue
        j = _jsonable(v, t)
        if isinstance(j, list):
            # A JSON field takes objects: arrays of objects are multi-valued, arrays of scalars
            # go under the empty key so a bare `col:term` query finds them.
            j = [x for x in j if x is not None] if elem_objects else {"": j}
        out.append(json.dumps(j, separators=(",", ":"), ensure_ascii=False))
    return pa.array(out, pa.string())


# --- documents ------------------------------------------------------------------------------


def _fragments(spec: ColumnSpec, a: pa.Array, truncated: set[str]) -> list[pa.Array]:
    frags: list[pa.Array] = []
    if not spec.indexed_fields:  # binary, indexing.storeonly: row store only
        return frags
    if spec.kind in ("string", "text", "text_and_string"):
        a = _as_string_array(a)
        if any(f.type == "ip" for f in spec.indexed_fields):
            check_ip_addresses(spec.name, a)
        if spec.string_mode is not None:
            return _compact_fragments(spec, a)
        for f in spec.indexed_fields:
            vals = a
            if f.tokenizer == CJK_BIGRAM:
                vals = bigram_values(a)
            if f.exact:
                vals, cut = _cut_long_terms(a)
                if cut:
                    truncated.add(spec.name)
            frags.append(pc.binary_join_element_wise(f'"{f.name}":', _quoted(vals), ""))
        return frags
    if spec.kind == "json":
        f = spec.indexed_fields[0]
        return [pc.binary_join_element_wise(f'"{f.name}":', _nested_text(a), "")]
    if spec.kind == "binary":
        return []
    f = spec.indexed_fields[0]
    return [pc.binary_join_element_wise(f'"{f.name}":', _number_text(spec, a), "")]


def _compact_fragments(spec: ColumnSpec, a: pa.Array) -> list[pa.Array]:
    """A compact string column's fragments (core/schema/compact_strings.py): whole-value hashes
    (exact_only), or the stripped text and the hashes of the pattern's matches (`<col>__uuids`)."""
    mode = compact_strings.parse_mode(spec.string_mode or "")
    values = a.to_pylist()
    frags: list[pa.Array] = []
    for f in spec.indexed_fields:
        if f.type == "u64" and mode.hashed_whole:
            text = [None if v is None else str(compact_strings.string_hash(v)) for v in values]
        elif f.type == "u64":
            found = [None if v is None else compact_strings.matches(mode, v) for v in values]
            text = [
                "[" + ",".join(str(compact_strings.string_hash(m)) for m in ms) + "]" if ms else None for ms in found
            ]
        else:
            stripped = pa.array([None if v is None else compact_strings.strip(mode, v) for v in values], pa.string())
            frags.append(pc.binary_join_element_wise(f'"{f.name}":', _quoted(stripped), ""))
            continue
        frags.append(pc.binary_join_element_wise(f'"{f.name}":', pa.array(text, pa.string()), ""))
    return frags


def check_ip_addresses(column: str, values: pa.Array) -> None:
    """Every non-null value an IPv4 or IPv6 address (as Tantivy parses them), else a write error
    naming the column and the value (indexing.typemap.<col>=ip)."""

    for v in pc.unique(values.drop_null()).to_pylist():
        try:
            ok = "%" not in v and ipaddress.ip_address(v) is not None
        except ValueError:
            ok = False
        if not ok:
            raise SchemaMismatchError(
                f"column {column!r} (indexing.typemap.{column}=ip): {v[:100]!r} is not an IPv4 or IPv6 address"
            )


def json_documents(batch: pa.RecordBatch, specs: Iterable[ColumnSpec], row_start: int) -> tuple[list[str], set[str]]:
    """One JSON document per row (`__row` = row_start + i); also the columns whose terms were cut."""
    n = batch.num_rows
    truncated: set[str] = set()
    rows = pa.array(range(row_start, row_start + n), pa.uint64()).cast(pa.string())
    frags: list[pa.Array] = []
    for spec in specs:
        if spec.partition:
            continue
        frags.extend(_fragments(spec, batch.column(spec.name), truncated))
    frags.append(pc.binary_join_element_wise(f'"{ROW_FIELD}":', rows, ""))
    body = pc.binary_join_element_wise(*frags, ",", null_handling="skip") if len(frags) > 1 else frags[0]
    docs = pc.binary_join_element_wise("{", body, "}", "")
    return docs.to_pylist(), truncated
