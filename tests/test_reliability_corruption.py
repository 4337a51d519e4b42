"""Corruption: every kind of metadata file (version file, JSON checkpoint and its parts,
`_last_checkpoint`, state manifest, manifests) truncated, bit-flipped, emptied, replaced by another
format, or missing. Every version of the table is then read: the answer must equal the pristine
table's answer for that version (a correct fallback), or the read must raise an IndexTablesError
naming the damaged file. Anything else (a different answer, another exception type) fails.

Then split files: truncated, wrong footer offsets, garbage: a read fails naming the split."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil

import pytest

import indextables_spark as it
from indextables_spark.errors import IndexTablesError
from indextables_spark.core.log.model.action_wire import action_to_json
from indextables_spark.core.log.commit.synthetic import commit_files, create_table, synthetic_add, synthetic_adds

LOG = "_transaction_log"
BITFLIPS = int(os.environ.get("INDEXTABLES_CORRUPTION_BITFLIPS", "6"))  # positions per file


def _logdir(root: str) -> str:
    return os.path.join(root, LOG)


def build(root: str, fmt: str) -> None:
    """Versions 0..6; checkpoints at 2 and 4 (Avro: the second one incremental), history kept."""
    opts = {"checkpoint.enabled": "false"}
    if fmt == "json":
        opts["state.format"] = "json"
    t = it.IndexTable(root, opts)
    create_table(t)
    commit_files(t, synthetic_adds(0, 6))
    commit_files(t, synthetic_adds(6, 6), remove=[synthetic_add(1).path])
    if fmt != "multipart":
        t.maintenance.checkpoint()
    commit_files(t, synthetic_adds(12, 4))
    commit_files(t, synthetic_adds(16, 4), remove=[synthetic_add(7).path])
    if fmt == "multipart":
        _write_multipart_checkpoint(t, 4)
    else:
        t.maintenance.checkpoint()
    commit_files(t, synthetic_adds(20, 3))
    commit_files(t, synthetic_adds(23, 3), remove=[synthetic_add(2).path])


def _write_multipart_checkpoint(t, version: int) -> None:
    """A legacy multi-part JSON checkpoint (the reference implementation writes these)."""
    snap = t.snapshot(version)
    cid = "c0ffee00c0ffee00"
    files = snap.files
    parts = [[snap.protocol_action, snap.metadata_action, *files[:5]], files[5:]]
    names = []
    for i, acts in enumerate(parts, 1):
        name = f"{version:020d}.checkpoint.{cid}.{i:05d}.json"
        text = "".join(json.dumps(action_to_json(a)) + "\n" for a in acts)
        with open(os.path.join(_logdir(t.path), name), "wb") as f:
            f.write(gzip.compress(text.encode()))
        names.append(name)
    with open(os.path.join(_logdir(t.path), f"{version:020d}.checkpoint.json"), "w") as f:
        json.dump({"version": version, "checkpointId": cid, "parts": names, "createdTime": 1, "format": "json"}, f)
    with open(os.path.join(_logdir(t.path), "_last_checkpoint"), "w") as f:
        json.dump(
            {
                "version": version,
                "size": len(files) + 2,
                "sizeInBytes": 1,
                "numFiles": len(files),
                "createdTime": 1,
                "parts": 2,
                "checkpointId": cid,
            },
            f,
        )


def answer(root: str, version: int | None):
    """What a reader sees: version, protocol, metadata, live files (path, size, records)."""
    snap = it.IndexTable(root).snapshot(version)
    return (
        snap.version,
        json.dumps(snap.protocol, sort_keys=True),
        json.dumps(snap.metadata, sort_keys=True),
        sorted((f.path, f.size, f.num_records) for f in snap.files),
    )


def answers(root: str, versions: list[int]) -> dict:
    """version -> answer or the exception raised."""
    out = {}
    for v in [None, *versions]:
        try:
            out[v] = answer(root, v)
        except Exception as e:  # classified by the caller: only IndexTablesError naming the file passes
            out[v] = e
    return out


def kinds_of_files(root: str, fmt: str) -> dict[str, list[str]]:
    """Relative paths of the metadata files of each kind."""
    rel = []
    for d, _dirs, files in os.walk(_logdir(root)):
        rel += [os.path.relpath(os.path.join(d, f), root) for f in files]
    kinds: dict[str, list[str]] = {
        "version file (covered by a checkpoint)": [f"{LOG}/{1:020d}.json"],
        "version file (after the checkpoint)": [f"{LOG}/{5:020d}.json"],
        "_last_checkpoint": [f"{LOG}/_last_checkpoint"],
    }
    if fmt == "avro":
        kinds["state manifest"] = sorted(p for p in rel if p.endswith("_manifest.avro"))
        kinds["manifest"] = sorted(p for p in rel if "/manifests/" in p)
    elif fmt == "json":
        kinds["JSON checkpoint"] = sorted(p for p in rel if p.endswith(".checkpoint.json"))
    else:
        kinds["multi-part checkpoint manifest"] = sorted(p for p in rel if p.endswith(".checkpoint.json"))
        kinds["checkpoint part"] = sorted(p for p in rel if ".checkpoint.c0ffee" in p)
    for k, v in kinds.items():
        assert v, f"no {k} in the {fmt} table"
    return kinds


def damages(data: bytes, other: bytes, seed: int):
    """(name, new bytes or None for missing)."""
    yield "truncated", data[: len(data) // 2]
    yield "truncated-by-1", data[:-1]
    yield "emptied", b""
    yield "other format", other
    yield "missing", None
    rng = random.Random(seed)
    positions = sorted({int(len(data) * k / BITFLIPS) for k in range(BITFLIPS)} | {rng.randrange(len(data))})
    for pos in positions:
        flipped = bytearray(data)
        flipped[pos] ^= 1 << rng.randrange(8)
        yield f"bit flip at {pos}", bytes(flipped)


def _other_format(path: str, root: str) -> bytes:
    """A file of another format: Avro for JSON files and JSON for Avro files."""
    if path.endswith(".avro"):
        with open(os.path.join(_logdir(root), f"{3:020d}.json"), "rb") as f:
            return gzip.decompress(f.read()[2:])  # framed: 0x01 0x01 + gzip (core/log/model/codec.py)
    avro = [os.path.join(d, f) for d, _ds, fs in os.walk(_logdir(root)) for f in fs if f.endswith(".avro")]
    if avro:
        with open(avro[0], "rb") as f:
            return f.read()
    return b"Obj\x01" + bytes(range(256))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    out = {}
    for fmt in ("avro", "json", "multipart"):
        root = str(tmp_path_factory.mktemp(f"pristine-{fmt}") / "t")
        build(root, fmt)
        out[fmt] = (root, answers(root, list(range(7))))
        assert all(not isinstance(a, Exception) for a in out[fmt][1].values()), out[fmt][1]
    return out


@pytest.mark.parametrize("fmt", ["avro", "json", "multipart"])
def test_damaged_metadata_gives_the_right_answer_or_an_error_naming_the_file(fmt, pristine, tmp_path):
    src, expected = pristine[fmt]
    tally = {"cases": 0, "fallback": 0, "error": 0}
    problems = []
    for kind, files in kinds_of_files(src, fmt).items():
        for rel in files:
            with open(os.path.join(src, rel), "rb") as f:
                data = f.read()
            for name, new in damages(data, _other_format(rel, src), seed=len(rel)):
                tally["cases"] += 1
                root = str(tmp_path / f"case{tally['cases']}")
                shutil.copytree(src, root)
                target = os.path.join(root, rel)
                if new is None:
                    os.unlink(target)
                else:
                    with open(target, "wb") as f:
                        f.write(new)
                got = answers(root, list(range(7)))
                for v, a in got.items():
                    want = expected[v]
                    if isinstance(a, IndexTablesError):
                        if os.path.basename(rel) not in str(a) and not _names_version(a, rel):
                            problems.append(f"{kind} {rel} {name}, version {v}: error does not name the file: {a!r}")
                        tally["error"] += 1
                    elif isinstance(a, Exception):
                        problems.append(f"{kind} {rel} {name}, version {v}: not our error type: {a!r}")
                    elif a != want:
                        if v is None and name == "missing" and rel.endswith(f"{6:020d}.json"):
                            continue
                        problems.append(f"{kind} {rel} {name}, version {v}: WRONG ANSWER")
                    else:
                        tally["fallback"] += 1
    print(f"corruption {fmt}: {tally}")
    assert not problems, "\n".join(problems[:30]) + f"\n({len(problems)} problems)"
    assert tally["error"] > 0 and tally["fallback"] > 0


def _names_version(e: Exception, rel: str) -> bool:
    """A missing version file may be reported as 'version N ... is missing'."""
    base = os.path.basename(rel)
    if base.endswith(".json") and base[:20].isdigit():
        return f"version file {int(base[:20])} " in str(e) and "missing" in str(e)
    return False


# ---- split files ---------------------------------------------------------------------------------------


def _split_table(root: str):
    import sys

    sys.path.insert(0, os.path.dirname(__file__))
    import crash_harness as ch

    t = it.IndexTable(root, ch.TABLE_OPTIONS)
    ch.create_table(t, list(range(0, 6)))
    adds, _, _ = ch.write_splits(t, list(range(100, 106)))
    t.transaction().add_files(adds).commit()
    return t


def _footer_offsets_swapped(data: bytes) -> bytes:
    """The footer's offsets of two bundled files exchanged, same footer length (JSON re-padded)."""
    import struct

    (flen,) = struct.unpack("<Q", data[-16:-8])
    start = len(data) - 16 - flen
    footer = json.loads(data[start : len(data) - 16])
    files = footer["files"]
    big = sorted(range(len(files)), key=lambda i: files[i]["length"])[-2:]
    a, b = files[big[0]], files[big[1]]
    a["offset"], b["offset"] = b["offset"], a["offset"]
    text = json.dumps(footer, separators=(",", ":")).encode()
    assert len(text) <= flen
    return data[:start] + text + b" " * (flen - len(text)) + data[len(data) - 16 :]


def _footer_rows_offset_shifted(data: bytes) -> bytes:
    import struct

    (flen,) = struct.unpack("<Q", data[-16:-8])
    start = len(data) - 16 - flen
    footer = json.loads(data[start : len(data) - 16])
    footer["rows"]["offset"] -= 8
    text = json.dumps(footer, separators=(",", ":")).encode()
    return data[:start] + text + b" " * (flen - len(text)) + data[len(data) - 16 :]


SPLIT_DAMAGES = {
    "truncated": lambda d: d[: len(d) // 2],
    "truncated-by-1": lambda d: d[:-1],
    "emptied": lambda d: b"",
    "garbage, same size": lambda d: bytes((i * 131 + 7) % 256 for i in range(len(d))),
    "footer offsets of two index files swapped": _footer_offsets_swapped,
    "rows offset shifted": _footer_rows_offset_shifted,
    "trailer length wrong": lambda d: d[:-16] + (len(d) * 3).to_bytes(8, "little") + d[-8:],
    "missing": None,
}


@pytest.mark.parametrize("damage", list(SPLIT_DAMAGES))
def test_damaged_split_fails_the_query_naming_the_split(tmp_path, damage):
    """Spark-free count with a query, and the Spark reader's per-split read (executor code)."""
    from pyspark.sql.types import StructType

    from indextables_spark.config.options import Options
    from indextables_spark.spark.guard import SnapshotPin
    from indextables_spark.spark.reader import IndexTablesReader, SplitGroup
    from indextables_spark.spark.task_read import task_json

    root = str(tmp_path / "t")
    _split_table(root)
    t = it.IndexTable(root)
    victim = sorted(t.snapshot().files, key=lambda f: f.path)[0]
    path = os.path.join(root, victim.path)
    with open(path, "rb") as f:
        data = f.read()
    fn = SPLIT_DAMAGES[damage]
    if fn is None:
        os.unlink(path)
    else:
        with open(path, "wb") as f:
            f.write(fn(data))
    opts = {"spark.indextables.cache.disk.path": str(tmp_path / "cache")}
    t = it.IndexTable(root, opts)
    with pytest.raises(IndexTablesError) as e1:
        t.count(query="word1 OR word2 OR word3")
    assert victim.path in str(e1.value), e1.value

    snap = t.snapshot()
    reader = IndexTablesReader(
        root, Options.of(opts), StructType.fromJson(snap.schema_json), SnapshotPin("test", snap.version, True)
    )
    reader._bind(snap)
    import pyarrow as pa

    good = [f for f in snap.files if f.path != victim.path]
    assert sum(
        b.num_rows for b in reader.read(SplitGroup([task_json(f) for f in good], None, reader._scan().read))
    ) == sum(f.num_records for f in good)
    with pytest.raises(IndexTablesError) as e2:
        pa.Table.from_batches(list(reader.read(SplitGroup([task_json(victim)], None, reader._scan().read))))
    assert victim.path in str(e2.value), e2.value
