"""The bytes of a split by index component and field (DESCRIBE INDEXTABLES COMPONENT SIZES,
ops/inspect/component_sizes.py), read from the split's footer and a few small ranges, never the whole file.

What is read (`read(start, end)`: ranged reads of the split, core/storage's `read_range`):
- the split's last bytes (one request; the whole of a small split): our footer (bundle.py), or
  the Quickwit bundle's offsets table of a split the reference wrote (reference/quickwit.py);
- the per-field sections of the composite files `.term` / `.idx` / `.pos` from our footer's
  `indexSections` (composite.py, no read), else from each file's offset table (its last bytes);
- each `.fieldnorm` file's offset table (its last bytes: a composite file too);
- each `.fast` file's column dictionary (tantivy-columnar: an SSTable of `<column>\\0<type>` →
  its byte range, at the file's end; reference/sstable.py `read_sstable_ranges`), its key's column
  name cut at `\\1` (a JSON field's path) naming the field.

Every byte of the split is in exactly one component, so a split's sizes add up to its file size:
per field `<field>.term` / `.postings` / `.positions` / `.fieldnorm` / `.fastfield`; what these files
hold besides the fields' sections (offset tables, tantivy footers, the column dictionary) as
`_<type>_other`; the row ids of ours (the `__row` fast field) as `_fastfield_row_ids`; the row store (`rows.arrow`, and tantivy's `.store` if any) as `_store`; vector
indexes as `<column>.vectors`; meta.json and other small index files as `_meta`; the split's own
footer as `_footer` (and the hotcache, ours or a reference split's, as `_hotcache`).
"""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from indextables_spark.core.schema.types import ROW_FIELD
from indextables_spark.core.split.format.bundle import RangeSource, SplitFooter, read_footer
from indextables_spark.core.split.format.hotcache import hotcache_range
from indextables_spark.core.split.format.composite import (
    COLUMNAR_FOOTER,
    INDEX_SECTIONS,
    TAIL_BYTES,
    columnar_tail,
    composite_sections,
    needed_tail,
)
from indextables_spark.core.split.format.doc_mapping import specs_from_doc_mapping
from indextables_spark.core.split.reference import quickwit
from indextables_spark.errors import SplitFormatError
from indextables_spark.util.ranges import SeekableFile

Read = Callable[[int, int], bytes]  # bytes [start, end) of the split
FIRST_READ = 16 << 10  # the split's last bytes read first: its footer (a small split: all of it)

# file extension → component type (the reference's names: tantivy4java component_sizes.rs)
_SECTIONED = {"term": "term", "idx": "postings", "pos": "positions", "fieldnorm": "fieldnorm"}


@dataclass(frozen=True)
class Component:
    """One component of a split: its key (`<field>.<type>`, or `_<name>` for what belongs to no
    field), type, Tantivy field, the table column that field indexes, and its bytes."""

    key: str
    type: str
    field: str | None
    column: str | None
    size: int


class _Split:
    """Ranged reads of one split, the first (its last FIRST_READ bytes) kept."""

    def __init__(self, read: Read, size: int, where: str):
        self.size, self.where, self._read = size, where, read
        self.tail_start = max(0, size - FIRST_READ)
        self.tail = read(self.tail_start, size)
        if len(self.tail) != size - self.tail_start:
            raise SplitFormatError(f"split {where}: short read of its last {size - self.tail_start} bytes")

    def read(self, start: int, end: int) -> bytes:
        if start >= self.tail_start:
            return self.tail[start - self.tail_start : end - self.tail_start]
        return self._read(start, end)

    def file_tail(self, offset: int, length: int, need: Callable[[int, bytes], int]) -> bytes:
        """The last bytes of the bundled file at [offset, offset + length) that `need(length,
        tail)` says hold what is wanted (a second read only when the first TAIL_BYTES fall short)."""
        tail = self.read(offset + max(0, length - TAIL_BYTES), offset + length)
        wanted = need(length, tail)
        if wanted > len(tail):
            tail = self.read(offset + length - wanted, offset + length)
        return tail


def split_components(read: Read, size: int, where: str) -> list[Component]:
    """The components of the split of `size` bytes read by `read` (`where` names it in errors)."""
    s = _Split(read, size, where)
    try:
        footer = read_footer(RangeSource(size, s.read), where)
    except SplitFormatError as ours:
        if not quickwit.looks_like_bundle(s.tail[-64:], size):
            raise ours from None
        return _reference_components(s)
    return _our_components(s, footer)


# ---- our splits ----------------------------------------------------------------------------------


def _columns_of(footer: SplitFooter) -> dict[str, str]:
    """Tantivy field → the table column it indexes (`<col>__exact` → `<col>`, …); the row id
    field (`__row`) has none."""
    out: dict[str, str] = {}
    for spec in specs_from_doc_mapping(footer.doc_mapping):
        for f in spec.indexed_fields:
            out[f.name] = spec.name
    out.pop(ROW_FIELD, None)
    return out


def _our_components(s: _Split, footer: SplitFooter) -> list[Component]:
    sections: Mapping[str, Any] = footer.raw.get(INDEX_SECTIONS) or {}
    known = sections.get("files") or {}
    files = {f.name: (f.offset, f.length) for f in footer.files}
    fields = list(sections.get("fields") or []) or _meta_fields(s, files.get("meta.json"))
    vectors = {
        name: column
        for column, v in (footer.raw.get("vectors") or {}).items()
        for name in (v.get("file"), v.get("vectors"))
        if isinstance(name, str)
    }
    sizes = _Sizes(_columns_of(footer))
    for name, (offset, length) in sorted(files.items()):
        ext = name.rsplit(".", 1)[-1]
        if name in vectors:
            sizes.add(f"{vectors[name]}.vectors", "vectors", None, length, column=vectors[name])
        elif ext in ("term", "idx", "pos") and name in known:
            secs = {int(k): (int(a), int(b)) for k, a_b in known[name]["sections"].items() for a, b in [a_b]}
            sizes.sections(_SECTIONED[ext], fields, secs, length)
        elif ext in _SECTIONED:
            sizes.sections(_SECTIONED[ext], fields, _composite(s, offset, length, len(fields)), length)
        elif ext == "fast":
            sizes.columns(_fast_columns(s, offset, length), length)
        elif ext == "store":
            sizes.add("_store", "store", None, length)
        else:
            sizes.add("_meta", "meta", None, length)
    sizes.add("_store", "store", None, footer.rows.length)
    hot = hotcache_range(footer.raw)  # (format/hotcache.py: what opening the split reads, once more)
    if hot is not None:
        sizes.add("_hotcache", "hotcache", None, hot[1] - hot[0])
    sizes.add("_footer", "footer", None, s.size - footer.footer_start)
    return sizes.components()


def _meta_fields(s: _Split, where: tuple[int, int] | None) -> list[str]:
    """The schema's field names in field id order, from meta.json (a footer without indexSections)."""
    if where is None:
        return []
    try:
        return [x["name"] for x in json.loads(s.read(where[0], where[0] + where[1]))["schema"]]
    except (ValueError, KeyError, TypeError):
        raise SplitFormatError(f"split {s.where}: meta.json does not list the schema's fields") from None


# ---- what the files say --------------------------------------------------------------------------


def _composite(s: _Split, offset: int, length: int, num_fields: int) -> dict[int, tuple[int, int]]:
    """Field id → its section of the composite file at [offset, offset + length); {} when the file
    does not parse as one (its bytes then all count as `_<type>_other`)."""
    try:
        return composite_sections(length, s.file_tail(offset, length, needed_tail), num_fields)
    except (ValueError, struct.error):
        return {}


def _fast_columns(s: _Split, offset: int, length: int) -> dict[str, int]:
    """Column name → bytes of each column of the fast field file at [offset, offset + length)."""
    from indextables_spark.core.split.reference.sstable import (  # lazy: numpy, zstandard, ducer
        read_sstable_ranges,
    )

    try:
        tail = s.file_tail(offset, length, columnar_tail)
        t0 = length - len(tail)
        (json_len,) = struct.unpack("<I", tail[-8:-4])  # tantivy's footer follows the columnar's
        dictionary_end = length - 8 - int(json_len) - COLUMNAR_FOOTER
        dictionary = tail[length - columnar_tail(length, tail) - t0 : dictionary_end - t0]
        ranges = read_sstable_ranges(dictionary, s.where, "fast field column dictionary")
    except (ValueError, struct.error, SplitFormatError):
        return {}
    out: dict[str, int] = defaultdict(int)
    for key, start, end in ranges:
        # `<column>\0<type code>` (tantivy columnar/src/columnar/writer/serializer.rs prepare_key);
        # a JSON field's column is `<field>\1<path>`
        name = key[:-2].split(b"\1", 1)[0].decode("utf-8", "replace")
        out[name] += end - start
    return dict(out)


class _Sizes:
    """Component sizes of one split as they are found (several segments add up)."""

    def __init__(self, columns: Mapping[str, str | None]):
        self._columns = columns
        self._by: dict[str, list[Any]] = {}

    def add(self, key: str, type_: str, field: str | None, size: int, column: str | None = None) -> None:
        if size <= 0:
            return
        if field == ROW_FIELD:  # the row ids the readers keep (`__row`): no column's, a `_` key
            key, field = f"_{type_}_row_ids", None
        entry = self._by.setdefault(key, [type_, field, column if field is None else self._columns.get(field), 0])
        entry[3] += size

    def sections(self, type_: str, fields: list[str], secs: Mapping[int, tuple[int, int]], length: int) -> None:
        named = 0
        for fid, (start, end) in secs.items():
            if 0 <= fid < len(fields) and end > start:
                self.add(f"{fields[fid]}.{type_}", type_, fields[fid], end - start)
                named += end - start
        self.add(f"_{type_}_other", type_, None, length - named)

    def columns(self, by_column: Mapping[str, int], length: int) -> None:
        for name, n in by_column.items():
            self.add(f"{name}.fastfield", "fastfield", name, n)
        self.add("_fastfield_other", "fastfield", None, length - sum(by_column.values()))

    def components(self) -> list[Component]:
        return [Component(k, t, f, c, n) for k, (t, f, c, n) in sorted(self._by.items())]


# ---- the reference's splits ----------------------------------------------------------------------


class _RangeFile(SeekableFile):
    """A split's ranged reads as the file object quickwit.read_bundle takes."""

    def __init__(self, s: _Split):
        self._s, self.size = s, s.size

    def read(self, n: int | None = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        data = self._s.read(self.pos, end)
        self.pos = end
        return data


def _reference_components(s: _Split) -> list[Component]:
    """A Quickwit bundle (a split IndexTables4Spark wrote): its fields are the table's columns."""
    bundle = quickwit.read_bundle(_RangeFile(s), s.size, s.where)  # type: ignore[arg-type]  # read/seek suffice
    meta = next((f for f in bundle.files if f.name == "meta.json"), None)
    fields = _meta_fields(s, (meta.start, meta.end - meta.start) if meta is not None else None)
    sizes = _Sizes({f: f for f in fields})
    for f in bundle.files:
        ext, length = f.name.rsplit(".", 1)[-1], f.end - f.start
        if ext in _SECTIONED:
            sizes.sections(_SECTIONED[ext], fields, _composite(s, f.start, length, len(fields)), length)
        elif ext == "fast":
            sizes.columns(_fast_columns(s, f.start, length), length)
        elif ext == "store":
            sizes.add("_store", "store", None, length)
        else:
            sizes.add("_meta", "meta", None, length)
    sizes.add("_hotcache", "hotcache", None, bundle.hotcache_length + 4)
    files = sum(f.end - f.start for f in bundle.files)
    sizes.add("_footer", "footer", None, s.size - files - bundle.hotcache_length - 4)
    return sizes.components()


def totals(components: Iterable[Component]) -> dict[str, int]:
    """Bytes per component type (what the reference's `_<type>_total` keys hold, store aside)."""
    out: dict[str, int] = defaultdict(int)
    for c in components:
        out[c.type] += c.size
    return dict(out)
