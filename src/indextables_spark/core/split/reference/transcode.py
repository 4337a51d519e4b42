"""Rewrite the reference's term dictionaries (SSTable) into tantivy-py's (FST) inside a segment's
`.term` file, so that tantivy-py opens a split the reference wrote as it is (issue #37).

The reference's tantivy (the `quickwit` feature) and tantivy-py write the same segment files except
the term dictionary (docs/guide/indextables4spark-tables.md): each field's section of the `.term`
composite file ends in a u32 dictionary type, 1 = FST (all tantivy-py reads), 2 = SSTable (all the
reference writes); tantivy checks it when a field's dictionary is opened, so a file may hold both
kinds and fields can be transcoded one at a time. The postings, positions and everything else stay
as they are: only the `.term` file (its sections, offset table and footer CRC) changes.

    transcode_index(index_dir, {"title"}, where)     # a local index: those fields readable by tantivy-py

    data = open(term_path, "rb").read()              # or on the bytes of one `.term` file:
    term_dict_types(data, where)                     # {field id: 1 FST | 2 SSTable}
    data = transcode_term_file(data, {field_id}, names, where)
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Collection, Mapping

from indextables_spark.core.split.format.composite import (
    DICT_TYPE_FST,
    DICT_TYPE_SSTABLE,
    CompositeEntry,
    composite_file,
    composite_layout,
    footer_crc_ok,
)
from indextables_spark.core.split.reference.fst_termdict import write_fst_termdict
from indextables_spark.core.split.reference.sstable import read_sstable_terms
from indextables_spark.errors import SplitFormatError

DICT_TYPES = {DICT_TYPE_FST: "FST", DICT_TYPE_SSTABLE: "SSTable"}


def term_dict_types(data: bytes, where: str) -> dict[int, int]:
    """Field id -> dictionary type (DICT_TYPE_FST or DICT_TYPE_SSTABLE) of each section of a `.term`
    file; SplitFormatError naming the split when the file does not parse or a type is unknown."""
    return {e.field: _dict_type(data, e, where, {}) for e in _layout(data, where)[0]}


def transcode_term_file(
    data: bytes,
    fields: Collection[int] | None,
    field_names: Mapping[int, str],
    where: str,
    verify_crc: bool = True,
) -> bytes:
    """The `.term` file `data` with the SSTable dictionaries of `fields` (field ids; None = every
    field) rewritten as FST dictionaries, tantivy-py's, byte for byte what it would have written
    for the same terms. Other sections are kept byte for byte; `data` itself is returned when there
    is nothing to rewrite. field_names (field id -> name, from meta.json) and where (the split)
    name what is at fault in a SplitFormatError; the file's footer CRC is checked first unless
    verify_crc is False (when the caller already has)."""
    entries, footer_json = _layout(data, where)
    todo = {
        e.field
        for e in entries
        if (fields is None or e.field in fields) and _dict_type(data, e, where, field_names) == DICT_TYPE_SSTABLE
    }
    if not todo:
        return data
    crc_ok = not verify_crc or _crc_ok(data, where)
    sections: list[tuple[int, int, bytes]] = []
    try:
        for e in entries:
            body = data[e.start : e.end]
            if e.field in todo:
                body = transcode_section(body, where, _name(e.field, field_names))
            sections.append((e.field, e.idx, body))
    except SplitFormatError as err:
        if crc_ok:
            raise
        raise SplitFormatError(f"{err} (and the .term file fails its CRC-32 check)") from None
    if not crc_ok:
        names = ", ".join(repr(_name(f, field_names)) for f in sorted(todo))
        raise SplitFormatError(
            f"split {where}: field{'s' if len(todo) > 1 else ''} {names}: the .term file fails its CRC-32 "
            "check (the dictionaries read as well formed): it is corrupt"
        )
    try:
        return composite_file(sections, footer_json)
    except ValueError as e:
        raise SplitFormatError(f"split {where}: the .term file's footer: {e}") from None


def transcode_index(index_dir: str, fields: Collection[str] | None, where: str) -> list[str]:
    """Make the fields named (None = every field) of the tantivy index in index_dir readable by
    tantivy-py: each segment's `.term` file (meta.json's segments) transcoded where it holds SSTable
    dictionaries of those fields. A file is replaced by renaming a new one over it, never rewritten
    in place: tantivy maps index files, and truncating a file a live index maps kills the process
    (SIGBUS). Returns the names of the fields transcoded in at least one segment (none: nothing
    written). Calling it again, or from two processes at once, is harmless."""
    try:
        with open(os.path.join(index_dir, "meta.json"), "rb") as f:
            meta = json.loads(f.read())
        names = {i: str(x["name"]) for i, x in enumerate(meta["schema"])}
        segments = [str(s["segment_id"]).replace("-", "") for s in meta["segments"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SplitFormatError(f"split {where}: unreadable meta.json ({type(e).__name__}: {e})") from None
    ids = None if fields is None else {i for i, n in names.items() if n in fields}
    done: set[str] = set()
    for segment in segments:
        path = os.path.join(index_dir, f"{segment}.term")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise SplitFormatError(f"split {where}: segment {segment}'s term dictionaries: {e}") from None
        before = term_dict_types(data, where)
        out = transcode_term_file(data, ids, names, f"{where} (segment {segment})")
        if out is data:
            continue
        tmp = f"{path}.{os.getpid()}.transcoding"
        with open(tmp, "wb") as f:
            f.write(out)
        os.replace(tmp, path)
        done.update(names.get(i, f"#{i}") for i, t in term_dict_types(out, where).items() if t != before[i])
    return sorted(done)


def transcode_section(section: bytes, where: str, field: str) -> bytes:
    """One field's `.term` section, an SSTable dictionary (its u32 type included), as an FST one."""
    if len(section) < 4 or struct.unpack_from("<I", section, len(section) - 4)[0] != DICT_TYPE_SSTABLE:
        raise SplitFormatError(f"split {where}: field {field!r}: not an SSTable term dictionary")
    terms = read_sstable_terms(section[:-4], where, field)
    return write_fst_termdict(terms, where, field)


def _layout(data: bytes, where: str) -> tuple[list[CompositeEntry], bytes]:
    try:
        return composite_layout(data)
    except (ValueError, struct.error) as e:
        raise SplitFormatError(f"split {where}: the .term file does not parse ({e})") from None


def _crc_ok(data: bytes, where: str) -> bool:
    try:
        return footer_crc_ok(data)
    except (ValueError, KeyError, TypeError, struct.error) as e:
        raise SplitFormatError(f"split {where}: the .term file's footer does not parse ({e})") from None


def _dict_type(data: bytes, e: CompositeEntry, where: str, field_names: Mapping[int, str]) -> int:
    if e.end - e.start < 4:
        raise SplitFormatError(f"split {where}: field {_name(e.field, field_names)!r}: empty term dictionary section")
    (kind,) = struct.unpack_from("<I", data, e.end - 4)
    if kind not in DICT_TYPES:
        raise SplitFormatError(
            f"split {where}: field {_name(e.field, field_names)!r}: unknown term dictionary type {kind}"
        )
    return int(kind)


def _name(field: int, field_names: Mapping[int, str]) -> str:
    return field_names.get(field, f"#{field}")
