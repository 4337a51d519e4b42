"""Fetching one split into a directory of the split cache (cache.py decides when, layout.py where).

Local storages are extracted straight from the split file with ranged copies; remote ones are
downloaded once, extracted, and the download deleted; or, for remote splits past a size, the index
files are fetched whole or as far as the read's query reads them (sparse.py) and the row store is
left to be read by ranges (lazy_rows.py). A split the reference implementation wrote is extracted
as it is (reference/native.py), with the term dictionaries the first read needs transcoded to
FSTs. The row store is kept uncompressed (option `cache.rows.uncompressed`, default true): reads
memory-map it and take rows without decompressing whole batches.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection

from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.split.cache import sparse as _sparse
from indextables_spark.core.split.cache.layout import IndexNeed
from indextables_spark.core.split.format.bundle import RangeSource, SplitFooter, extract, uncompress_rows
from indextables_spark.core.split.reference import native, quickwit
from indextables_spark.core.storage.base import Storage
from indextables_spark.errors import FileNotFoundInStorageError, SplitFormatError

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile


@dataclass(frozen=True)
class FetchSettings:
    """How splits are fetched (the split cache's options)."""

    # option cache.rows.lazy: "auto" reads the row store of remote splits by ranges
    # (lazy_rows.py), "true" of every split, "false" of none (extracted whole)
    lazy_rows: str
    lazy_min_bytes: int  # option cache.rows.lazyMinSplitSize
    partial_min_bytes: int  # option cache.index.partialMinSplitSize
    uncompressed_rows: bool  # option cache.rows.uncompressed (see bundle.uncompress_rows)


def extract_split(storage: Storage, add_file: AddFile, tmp: str, how: FetchSettings, need: IndexNeed) -> None:
    """The split at `add_file` extracted into the empty directory `tmp`: what `need` reads of it at
    least, the rest as `how` says."""
    where = storage.full_uri(add_file.path)
    local = storage.local_path(add_file.path)
    remote_size = add_file.size or 0
    lazy = how.lazy_rows == "true" or (how.lazy_rows == "auto" and local is None and remote_size >= how.lazy_min_bytes)
    partial = (
        need.query is not None
        and local is None
        and (how.lazy_rows == "true" or (how.lazy_rows == "auto" and remote_size >= how.partial_min_bytes))
    )
    download = os.path.join(tmp, ".download")
    footer: SplitFooter | None
    try:
        if partial and need.query is not None:
            # what the query reads of the index files, the row store later by ranges
            footer = _sparse.fetch_for_query(
                _ranges(storage, add_file), _size(storage, add_file, where), tmp, where, need.query, need.postings
            )
            lazy = True
        elif lazy:
            # the index files whole, the row store later by ranges (lazy_rows.py)
            source = RangeSource(_size(storage, add_file, where), _ranges(storage, add_file))
            footer = extract(source, tmp, where, rows=False)
        elif local is not None:
            if not os.path.exists(local):
                raise FileNotFoundInStorageError(f"split file not found: {where}")
            footer = extract(local, tmp, where)
        else:
            storage.download_file(add_file.path, download)
            footer = extract(download, tmp, where)
            os.unlink(download)
        check_footer(footer, add_file, where)
    except SplitFormatError as e:
        # Not one of ours: a split the reference implementation wrote is extracted as it is
        # (reference/native.py); found only after our own trailer check failed, so reading our
        # splits costs nothing more.
        _extract_reference(storage, add_file, where, local, download, tmp, e, need)
        footer = None
    if footer is not None and how.uncompressed_rows and not lazy and not footer.is_companion:
        uncompress_rows(tmp)


def complete_partial(storage: Storage, add_file: AddFile, final: str, need: IndexNeed) -> None:
    """A directory fetched in part for other reads: the rest `need` reads fetched (a reference
    split: the dictionaries it reads transcoded; the new reference.json tells every process to
    reopen the index)."""
    _sparse.ensure(final, _ranges(storage, add_file), need.query, need.postings)
    text, native_reads = need.native_read()
    native.ensure(final, text, need.postings, native_reads)


def check_footer(footer: SplitFooter, add_file: AddFile, where: str) -> None:
    """The split file is the one the log records: its size and footer offset."""
    if add_file.size is not None and footer.footer_end != add_file.size:
        raise SplitFormatError(
            f"split {where}: the log records {add_file.size} bytes but the file has "
            f"{footer.footer_end} (replaced or truncated?)"
        )
    start = add_file.footer_start_offset
    if start is not None and start != footer.footer_start:
        raise SplitFormatError(
            f"split {where}: the log records footerStartOffset {start} but the file's "
            f"footer starts at {footer.footer_start}"
        )


def _ranges(storage: Storage, add_file: AddFile) -> _sparse.Reader:
    """The split file read by ranges."""
    return lambda start, end: storage.read_range(add_file.path, start, end)


def _size(storage: Storage, add_file: AddFile, where: str) -> int:
    """The split file's size: the log's, else the storage's."""
    if add_file.size is not None:
        return int(add_file.size)
    info = storage.stat(add_file.path)
    if info is None:
        raise FileNotFoundInStorageError(f"split file not found: {where}")
    return info.size


def _extract_reference(
    storage: Storage,
    add_file: AddFile,
    where: str,
    local: str | None,
    download: str,
    tmp: str,
    error: SplitFormatError,
    need: IndexNeed,
) -> None:
    """The reference split at add_file extracted into `tmp` with the term dictionaries `need` reads
    transcoded (native.extract); `error` (our format's) is raised again when the file is not a
    Quickwit bundle either."""

    path = local if local is not None else download
    if local is None and not os.path.exists(download):
        storage.download_file(add_file.path, download)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(max(0, size - 64))
        tail = f.read()
    if not quickwit.looks_like_bundle(tail, size):
        raise error
    # (our extract failed at the trailer check, before writing anything into tmp)
    text, native_reads = need.native_read()
    native.extract(
        path,
        tmp,
        where,
        lambda fields: table_schema(storage, fields),
        footer_start=add_file.footer_start_offset,
        size=add_file.size,
        query=text,
        postings=need.postings,
        reads=native_reads,
    )
    if os.path.exists(download):
        os.unlink(download)


@dataclass(frozen=True)
class _KnownSchema:
    schema_json: dict[str, Any]
    partition_columns: list[str]
    absent: frozenset[str]  # split fields that the schema, read after seeing them, still lacks


_schemas: dict[str, _KnownSchema] = {}
_schema_locks: dict[str, threading.Lock] = {}  # one per table: its splits' threads read its log once
_schemas_lock = threading.Lock()


def table_schema(storage: Storage, fields: Collection[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """(Spark schema JSON, partition columns) of the table at the storage's root, which types a
    reference split's rows: read from its log's header once per process and table (the threads
    extracting its splits wait for one read), and again when a split has `fields` the schema read
    lacks (a column the table gained since: columns are only ever added, so the newest schema
    types every older split; read once per such field, a field no column names stays absent)."""
    with _schemas_lock:
        lock = _schema_locks.setdefault(storage.uri, threading.Lock())
    with lock:
        hit = _schemas.get(storage.uri)
        if hit is not None:
            names = {f["name"] for f in hit.schema_json.get("fields", [])}
            if not (set(fields) - names - hit.absent):
                return hit.schema_json, hit.partition_columns
        _protocol, metadata, _registry = TransactionLog(storage, getattr(storage, "options", None)).header()
        schema_json = json.loads(metadata.schema_string)
        names = {f["name"] for f in schema_json.get("fields", [])}
        absent = (set(fields) | (hit.absent if hit is not None else set())) - names
        known = _KnownSchema(schema_json, list(metadata.partition_columns), frozenset(absent))
        _schemas[storage.uri] = known
    return known.schema_json, known.partition_columns
