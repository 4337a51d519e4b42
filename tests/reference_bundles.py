"""Reference-like splits for tests and benches: a Tantivy index written by tantivy-py with the
reference implementation's field conventions (core/split/reference/native.py: every field
stored; strings `raw` unless tokenized; ints i64, floats f64, dates/timestamps as datetimes,
structs/maps/arrays as JSON objects, arrays wrapped `{"<col>": [...]}`, map keys stringified,
nulls omitted), bundled the Quickwit way and committed to a table as a reference AddFile.

Not a split the reference itself opens: the hotcache here is empty. tantivy-py writes FST term
dictionaries where the reference's Tantivy writes SSTables: with `sstable` (the default) every
`.term` file is rewritten the reference's way (tests/sstable_writer.py, independent of the
package's transcoder), else left as FSTs, which the package opens as they are. The package opens
reference splits in place (core/split/reference/native.py) and never reads the hotcache, so for the
read path these stand in for the real thing; the 17 real tables are in tests/data/reference_v0.5.4. Tokenized fields are indexed as the reference
indexes them: its `default` keeps tokens up to 255 bytes (tantivy-py's own drops them at 40).
"""

from __future__ import annotations

import json
import os
import struct
import time
from typing import Any, Iterable, Mapping, Sequence

import indextables_spark as it

BUNDLE_MAGIC, HOTCACHE_MAGIC = 403881646, 2557869106


def bundle(index_dir: str, out_path: str, sstable: bool = True) -> int:
    """Quickwit bundle of the index files in index_dir (their term dictionaries as SSTables with
    `sstable`); returns footerStartOffset."""
    names = sorted(n for n in os.listdir(index_dir) if not n.startswith(".tantivy") and not n.endswith(".lock"))
    if sstable:
        from sstable_writer import term_file_as_reference

        for n in names:
            if n.endswith(".term"):
                path = os.path.join(index_dir, n)
                with open(path, "rb") as f:
                    data = term_file_as_reference(f.read())
                with open(path, "wb") as f:
                    f.write(data)
    offsets: dict[str, dict[str, int]] = {}
    with open(out_path, "wb") as out:
        pos = 0
        for n in names + ["split_fields"]:
            data = b""
            if n != "split_fields":
                with open(os.path.join(index_dir, n), "rb") as f:
                    data = f.read()
            out.write(data)
            offsets[n] = {"start": pos, "end": pos + len(data)}
            pos += len(data)
        section = struct.pack("<II", BUNDLE_MAGIC, 1) + json.dumps({"files": offsets}).encode()
        out.write(section + struct.pack("<I", len(section)))
        meta = b"\x00\x00"  # postcard HotDirectoryMeta: no file lengths, no slices
        hotcache = struct.pack("<III", HOTCACHE_MAGIC, 1, len(meta)) + meta
        out.write(hotcache + struct.pack("<I", len(hotcache)))
    return pos


def write_index(
    index_dir: str,
    fields: Sequence[Mapping[str, Any]],
    docs: Iterable[Mapping[str, Any]],
    segments: int = 1,
    default_limit: int = 255,
) -> None:
    """fields: reference doc mapping entries ({"name", "type", "tokenizer"?}); docs: values as the
    reference stores them (None/missing = omitted); default_limit: where its `default` tokenizer
    drops tokens (255: tantivy4java's older write path; 40: its Arrow path, tantivy's own)."""
    import tantivy

    sb = tantivy.SchemaBuilder()
    for f in fields:
        name, t = f["name"], f["type"]
        if f.get("stored") is False:  # the reference's indexing.indexonlyfields
            if t != "text":
                raise ValueError("only text fields are written index-only here")
            sb.add_text_field(
                name, stored=False, tokenizer_name=f.get("tokenizer", "raw"), index_option=f.get("record", "position")
            )
            continue
        if t == "i64":
            sb.add_integer_field(name, stored=True, indexed=True, fast=True)
        elif t == "f64":
            sb.add_float_field(name, stored=True, indexed=True, fast=True)
        elif t == "bool":
            sb.add_boolean_field(name, stored=True, indexed=True, fast=True)
        elif t == "datetime":
            sb.add_date_field(name, stored=True, indexed=True, fast=True)
        elif t == "bytes":
            sb.add_bytes_field(name, stored=True, indexed=True)
        elif t == "object":
            sb.add_json_field(name, stored=True, tokenizer_name="raw")
        else:
            tokenizer = f.get("tokenizer", "raw")
            sb.add_text_field(  # strings are fast with the raw tokenizer, as the reference's
                name,
                stored=True,
                fast=tokenizer == "raw",
                tokenizer_name=tokenizer,
                index_option=f.get("record", "position"),
            )
    schema = sb.build()
    os.makedirs(index_dir, exist_ok=True)
    index = tantivy.Index(schema, index_dir)
    # the reference's `default` analyzer (its `raw` is tantivy's, without a length filter)
    reference_default = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(default_limit))
        .filter(tantivy.Filter.lowercase())
        .build()
    )
    index.register_tokenizer("default", reference_default)
    w = index.writer(50_000_000, 1)
    docs = list(docs)
    per = -(-len(docs) // segments) if docs else 1
    for start in range(0, max(len(docs), 1), per):  # a commit per segment wanted
        for d in docs[start : start + per]:
            w.add_document(tantivy.Document.from_dict({k: v for k, v in d.items() if v is not None}, schema))
        w.commit()
    w.wait_merging_threads()


def add_reference_split(
    table: it.IndexTable,
    fields: Sequence[Mapping[str, Any]],
    docs: Sequence[Mapping[str, Any]],
    work_dir: str,
    name: str,
    partition_values: Mapping[str, str] | None = None,
    sstable: bool = True,
    segments: int = 1,
    default_limit: int = 255,
) -> it.AddFile:
    """Write the documents as a reference-like split `name` under the table and commit it (its term
    dictionaries SSTables as the reference writes them, or tantivy-py's FSTs: see bundle)."""
    index_dir = os.path.join(work_dir, name + ".index")
    write_index(index_dir, fields, docs, segments, default_limit)
    local = os.path.join(work_dir, name)
    footer_start = bundle(index_dir, local, sstable)
    prefix = "/".join(f"{k}={v}" for k, v in (partition_values or {}).items())
    key = f"{prefix}/{name}" if prefix else name
    with open(local, "rb") as f:
        table.storage.put(key, f.read())
    size = os.path.getsize(local)
    mapping = [
        {"fast": True, "indexed": True, "stored": True, **{k: v for k, v in f.items() if k != "record"}} for f in fields
    ]
    add = it.AddFile(
        key,
        dict(partition_values or {}),
        size,
        int(time.time() * 1000),
        num_records=len(docs),
        footer_start_offset=footer_start,
        footer_end_offset=size,
        doc_mapping_json=json.dumps(sorted(mapping, key=lambda d: d["name"]), separators=(",", ":")),
    )
    with table.transaction() as tx:
        tx.add_files([add])
    return add
