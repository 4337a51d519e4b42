"""FileEntry manifests (`manifests/manifest-<id>.avro`) read into Arrow (writing: manifest_write.py).

Reading decodes the whole file column-wise with DataFusion's Avro reader (about 20x faster than
building Python dicts with fastavro), then adapts the writer's schema to ours by field id, then by


name: unknown fields are dropped, missing optional fields get their defaults, int is widened to
long. Nothing is turned into Python objects here.

numpy and pyarrow are imported inside the functions that use them ("# lazy" below): planning a
read (plan_manifest) and DataFusion's decoding need neither, so a fresh process's first snapshot
decodes its manifests while pyarrow is still being imported (avro_state.read_state_files), and
`import indextables_spark.api.table` stays cheap.
"""

from __future__ import annotations

import glob
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from indextables_spark.core.log.state.avro_container import (
    FILE_ENTRY_FIELD_IDS,
    ContainerHeader,
    list_blocks,
    read_header,
)
from indextables_spark.core.storage import Storage
from indextables_spark.errors import CorruptStateError, FileNotFoundInStorageError

if TYPE_CHECKING:
    import pyarrow as pa

    from indextables_spark.expr.partition_filter import PartitionPredicate

log = logging.getLogger(__name__)

_CTX_LOCK = threading.Lock()
_CTX: Any = None  # DataFusion SessionContext
_DEFAULTS = {
    "dataChange": True,
    "modificationTime": 0,
    "addedAtVersion": -1,
    "addedAtTimestamp": 0,
}
_REQUIRED = ("path", "size")
BLOCK_INDEX_KEY = "io.indextables.blockIndex"


def _ctx() -> Any:
    global _CTX
    if _CTX is None:
        with _CTX_LOCK:
            if _CTX is None:
                _CTX = datafusion_core().SessionContext()
    return _CTX


def load_decoder() -> None:
    """Load DataFusion (its compiled module and the session) in the calling thread, if not yet:
    read_state_files does it before starting its decoding threads, so that they decode at once
    instead of loading it while the main thread holds the GIL importing pyarrow."""
    _ctx()


def datafusion_core() -> Any:
    """DataFusion's compiled module (`datafusion._internal`: SessionContext, read_avro,
    to_arrow_table), loaded without running the `datafusion` package's Python layer, which imports
    pandas (`datafusion.functions.spark`): 175 ms of a cold process's first snapshot against 5 ms.
    Registered in sys.modules, so a later `import datafusion` reuses it. When the layout is not
    the expected one (another DataFusion release), the package is imported as usual."""

    if "datafusion" in sys.modules:
        import datafusion  # lazy: keeps `import indextables_spark.core.log.state.manifest` free of datafusion

        return datafusion
    core = sys.modules.get("datafusion._internal")
    if core is not None:
        return core

    try:
        spec = importlib.util.find_spec("datafusion")
        locations = spec.submodule_search_locations if spec else None
        paths = glob.glob(os.path.join(locations[0], "_internal*.so")) if locations else []
        if len(paths) != 1:
            raise ImportError(f"datafusion._internal: {len(paths)} candidates")
        loader = importlib.machinery.ExtensionFileLoader("datafusion._internal", paths[0])
        core_spec = importlib.util.spec_from_file_location("datafusion._internal", paths[0], loader=loader)
        if core_spec is None:
            raise ImportError("datafusion._internal: no module spec")
        core = importlib.util.module_from_spec(core_spec)
        loader.exec_module(core)
        if not hasattr(core, "SessionContext"):
            raise ImportError("datafusion._internal has no SessionContext")
        sys.modules["datafusion._internal"] = core
        return core
    except ImportError:
        import datafusion  # lazy: keeps `import indextables_spark.core.log.state.manifest` free of datafusion

        return datafusion


def _nullability_widened(src: pa.DataType, dst: pa.DataType) -> bool:
    """Is `dst` the nested type `src` with some child fields made nullable (and nothing else
    changed)? Then the column's buffers are valid as `dst` unchanged: a zero-copy view replaces
    the cast (DataFusion reads the Avro map values and array items as non-null)."""
    import pyarrow.types as pat  # lazy (see the module docstring)

    if not any(f(src) for f in (pat.is_list, pat.is_large_list, pat.is_map, pat.is_struct)):
        return False
    if src.id != dst.id or src.num_fields != dst.num_fields or src.num_fields == 0:
        return False
    if getattr(src, "keys_sorted", False) != getattr(dst, "keys_sorted", False):
        return False
    for i in range(src.num_fields):
        s, d = src.field(i), dst.field(i)
        if s.name != d.name or (s.nullable and not d.nullable):
            return False
        if s.type != d.type and not _nullability_widened(s.type, d.type):
            return False
    return True


def conform(table: pa.Table, writer_fields: list[dict[str, Any]] | None = None, where: str = "") -> pa.Table:
    """Any FileEntry-like table → exactly FILE_ENTRY_SCHEMA (renames by field id, defaults, casts)."""
    import pyarrow as pa  # lazy (see the module docstring)

    from indextables_spark.core.log.state.file_entries import FILE_ENTRY_SCHEMA  # lazy: pyarrow
    from indextables_spark.core.schema.arrow_types import cast_or_fail  # lazy: pyarrow

    our_names = set(FILE_ENTRY_SCHEMA.names)
    names = table.column_names
    rename: dict[str, str] = {}
    if writer_fields:
        for f in writer_fields:
            fid = f.get("field-id")
            ours = FILE_ENTRY_FIELD_IDS.get(fid) if isinstance(fid, int) else None
            if ours is None and f.get("name") in our_names:
                ours = f["name"]
            if ours is not None and f.get("name") in names:
                rename[f["name"]] = ours
    else:
        rename = {n: n for n in names if n in our_names}
    by_ours = {ours: table.column(src) for src, ours in rename.items()}
    n = table.num_rows
    arrays = []
    for f in FILE_ENTRY_SCHEMA:
        col = by_ours.get(f.name)
        if col is None:
            if f.name in _REQUIRED:
                raise CorruptStateError(f"{where}: manifest has no {f.name!r} field")
            if f.name in _DEFAULTS:
                import numpy as np  # lazy (see the module docstring)

                col = pa.array(np.full(n, _DEFAULTS[f.name]), f.type)
            elif f.name == "partitionValues":
                col = pa.array([[]] * n, f.type)
            elif f.name == "hasFooterOffsets":
                col = pa.nulls(n, f.type)
            else:
                col = pa.nulls(n, f.type)
        elif col.type != f.type and _nullability_widened(col.type, f.type):
            col = pa.chunked_array([c.view(f.type) for c in col.chunks], f.type)
        elif col.type != f.type:
            message = f"{where}: manifest field {f.name!r} has type {col.type}, expected {f.type}"
            col = cast_or_fail(col, f.type, CorruptStateError, message)
        arrays.append(col)
    out = pa.Table.from_arrays(arrays, schema=FILE_ENTRY_SCHEMA)
    if out.column("hasFooterOffsets").null_count:
        import pyarrow.compute as pc  # lazy (see the module docstring)

        derived = pc.and_(pc.is_valid(out.column("footerStartOffset")), pc.is_valid(out.column("footerEndOffset")))
        i = out.schema.get_field_index("hasFooterOffsets")
        out = out.set_column(i, FILE_ENTRY_SCHEMA.field(i), pc.coalesce(out.column(i), derived))
    return out


SPLIT_ROWS = 20_000  # decode units of at least this many rows (one DataFusion call each)


@dataclass
class DecodeUnit:
    """Part of one manifest to decode with one DataFusion call: the whole file (path), or the
    header plus a run of its blocks (bytes, written to a temporary file)."""

    where: str
    writer_fields: list[dict[str, Any]]
    rows: int
    path: str | None = None
    data: bytes | None = None


@dataclass
class ManifestPlan:
    units: list[DecodeUnit]
    rows_total: int
    rows_selected: int


def _empty() -> pa.Table:
    from indextables_spark.core.log.state.file_entries import (
        FILE_ENTRY_SCHEMA,
    )  # lazy: pyarrow (see the module docstring)

    return FILE_ENTRY_SCHEMA.empty_table()


def _block_index(
    header: ContainerHeader, blocks: list[tuple[int, int, int]], where: str
) -> list[dict[str, tuple[Any, Any]]] | None:
    """Per-block partition bounds from the header (written by our compaction), or None."""
    raw = header.metadata.get(BLOCK_INDEX_KEY)
    if raw is None:
        return None
    try:
        idx = json.loads(raw)
        cols = idx["columns"]
        entries = idx["blocks"]
        if len(entries) != len(blocks):
            raise ValueError(f"{len(entries)} index entries for {len(blocks)} blocks")
        out: list[dict[str, tuple[Any, Any]]] = []
        for (off, _end, rows), e in zip(blocks, entries):
            if int(e[0]) != off - header.length or int(e[1]) != rows:
                raise ValueError("index does not match the block layout")
            out.append({c: (b[0], b[1]) for c, b in zip(cols, e[2])})
        return out
    except (ValueError, KeyError, TypeError, IndexError) as e:
        log.warning("%s: ignoring invalid block index (%s)", where, e)
        return None


def plan_manifest(
    storage: Storage,
    key: str,
    expected_entries: int | None = None,
    predicate: PartitionPredicate | None = None,
    split_rows: int | None = None,
) -> ManifestPlan:
    """Read and validate one manifest (magic, schema, block framing, entry count) and plan its
    decoding: blocks whose partition bounds cannot match the predicate are skipped, and large
    runs of blocks are split into several units so they decode in parallel."""
    split_rows = split_rows or SPLIT_ROWS
    where = storage.full_uri(key)
    try:
        data = storage.read(key)
    except FileNotFoundInStorageError:
        raise CorruptStateError(f"manifest {where} is missing (referenced by the table state)") from None
    header = read_header(data, where)
    schema = header.schema
    if not isinstance(schema, dict) or schema.get("type") != "record" or not isinstance(schema.get("fields"), list):
        raise CorruptStateError(f"{where}: Avro schema is not a record schema")
    blocks = list_blocks(data, header, where)
    rows = sum(b[2] for b in blocks)
    if expected_entries is not None and expected_entries >= 0 and rows != expected_entries:
        raise CorruptStateError(
            f"{where}: manifest holds {rows} entries but the state records {expected_entries} "
            f"(truncated or replaced file)"
        )
    fields = schema["fields"]
    selected = blocks
    if predicate is not None and blocks:
        bounds = _block_index(header, blocks, where)
        if bounds is not None:
            selected = [b for b, bb in zip(blocks, bounds) if predicate.may_match(bb)]
    sel_rows = sum(b[2] for b in selected)
    if not selected:
        return ManifestPlan([], rows, 0)
    local = storage.local_path(key)
    if selected is blocks and sel_rows < 2 * split_rows and local is not None and os.path.isfile(local):
        return ManifestPlan([DecodeUnit(where, fields, rows, path=local)], rows, rows)
    n_units = max(1, min(len(selected), sel_rows // split_rows))
    target = sel_rows / n_units
    units: list[DecodeUnit] = []
    head = data[: header.length]
    run: list[tuple[int, int, int]] = []
    run_rows = 0
    for i, b in enumerate(selected):
        run.append(b)
        run_rows += b[2]
        last = i == len(selected) - 1
        if last or (run_rows >= target and len(units) < n_units - 1):
            body = b"".join(data[o:e] for o, e, _ in run)
            units.append(DecodeUnit(where, fields, run_rows, data=head + body))
            run, run_rows = [], 0
    return ManifestPlan(units, rows, sel_rows)


@dataclass
class DecodedUnit:
    """A unit decoded by DataFusion, its record batches still DataFusion's (no pyarrow object yet):
    `decode_unit_batches` runs without pyarrow, `finish_unit` makes the Arrow table."""

    unit: DecodeUnit
    frame: Any  # the DataFusion DataFrame (its schema, when no batch came back)
    batches: list[Any]


def finish_unit(decoded: DecodedUnit) -> pa.Table:
    """The unit's FILE_ENTRY_SCHEMA table (pyarrow), checked against the file's record count."""
    import pyarrow as pa  # lazy (see the module docstring)

    unit = decoded.unit
    batches = [b.to_pyarrow() for b in decoded.batches]
    table = pa.Table.from_batches(batches) if batches else pa.Table.from_batches([], schema=decoded.frame.schema())
    if table.num_rows != unit.rows:
        raise CorruptStateError(f"{unit.where}: decoded {table.num_rows} entries, the file's blocks hold {unit.rows}")
    return conform(table, unit.writer_fields, unit.where)


def decode_unit(unit: DecodeUnit) -> pa.Table:
    return finish_unit(decode_unit_batches(unit))


def read_manifest(
    storage: Storage, key: str, expected_entries: int | None = None, predicate: PartitionPredicate | None = None
) -> pa.Table:
    """Decode one FileEntry manifest into an Arrow table with FILE_ENTRY_SCHEMA (with a
    predicate: only the blocks whose partition bounds may match; a superset of the matches)."""
    plan = plan_manifest(storage, key, expected_entries, predicate)
    tables = [decode_unit(u) for u in plan.units]
    if not tables:
        return _empty()
    import pyarrow as pa  # lazy (see the module docstring)

    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _tmp_dir() -> str | None:
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def decode_unit_batches(unit: DecodeUnit) -> DecodedUnit:
    """The CPU-heavy part of decoding a unit, by DataFusion (which releases the GIL), without
    pyarrow: finish_unit makes the Arrow table."""
    tmp = None
    try:
        if unit.path is None:
            if unit.data is None:
                raise ValueError(f"{unit.where}: decode unit with neither a path nor data")
            fd, tmp = tempfile.mkstemp(prefix="itx-manifest-", suffix=".avro", dir=_tmp_dir())
            with os.fdopen(fd, "wb") as f:
                f.write(unit.data)
            path = tmp
        else:
            path = unit.path
        ext = os.path.splitext(path)[1] or ".avro"
        try:
            # positional: the package's keyword is file_partition_cols, the core's table_partition_cols
            frame = _ctx().read_avro(path, None, [], ext)
            # the batches stay DataFusion's until finish_unit: no pyarrow needed here
            return DecodedUnit(unit, frame, list(frame.execute_stream()))
        except Exception as e:  # noqa: BLE001 - DataFusion reports every decoding problem as its own error
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise CorruptStateError(f"{unit.where}: corrupt or truncated manifest ({msg[:300]})") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
