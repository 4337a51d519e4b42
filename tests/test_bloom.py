"""Per-split Bloom filters: hashing, the filter, files listed in the state, and planner skipping."""

from __future__ import annotations

import datetime as dt
import decimal
import random
import subprocess
import sys
import uuid

import numpy as np
import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.errors import CorruptStateError, InvalidOptionError
from indextables_spark.config.options import Options
from indextables_spark.expr.model import And, EqualNullSafe, EqualTo, GreaterThan, In, Or
from indextables_spark.core.split.read.skipping import skip_split
from indextables_spark.core.split.format.bloom import (
    STATS_KEY,
    BloomFilter,
    bloom_file_for,
    hash_values,
    load_blooms,
    skip_by_blooms,
)

BLOOM_OPTIONS = {"spark.indextables.indexing.bloomfilter.columns": "uid,n,day_of"}


def write(path: str, data: pa.Table, options: dict | None = None, partition_by: tuple = ()) -> int:
    """One write job (the Spark writer's functions, no Spark): returns the version."""
    from pyspark.sql.types import StructType

    from indextables_spark.core.schema.arrow_types import spark_schema_json

    from indextables_spark.ops.write.write import commit_write
    from indextables_spark.spark.writer import plan_write, write_splits

    opts = Options.of(options, {"partitionBy": ",".join(partition_by)} if partition_by else None)
    plan, read_version, _ = plan_write(path, opts, StructType.fromJson(spark_schema_json(data.schema)), False)
    msg = write_splits(path, opts, plan, iter(data.to_batches(max_chunksize=500)))
    adds = [it.AddFile.from_json(d) for d in msg.adds]
    return commit_write(it.IndexTable(path, opts).log, plan, read_version, False, adds, stats_files=msg.stats)


def uid_rows(n: int, seed: int = 7) -> pa.Table:
    rnd = random.Random(seed)
    return pa.table(
        {
            "uid": [str(uuid.UUID(int=rnd.getrandbits(128))) for _ in range(n)],
            "n": pa.array(range(n), pa.int64()),
            "day_of": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in range(n)], pa.date32()),
            "price": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(10, 2)),
        }
    )


@pytest.fixture(scope="module")
def many_splits(tmp_path_factory) -> tuple[it.IndexTable, pa.Table]:
    """60 splits of 100 random-uuid rows each (min/max stats cannot prune uuids)."""
    path = str(tmp_path_factory.mktemp("bloom") / "t")
    data = uid_rows(6000)
    write(path, data, {**BLOOM_OPTIONS, "spark.indextables.write.targetSplitSize": "6K"})
    t = it.IndexTable(path)
    assert len(t.snapshot().files) >= 50
    return t, data


def plan(t: it.IndexTable, filters: list, enabled: bool = True) -> list:
    """What the Spark reader's planner keeps: min/max data skipping, then the Bloom filters."""
    snap = t.snapshot()
    files = [f for f in snap.files if not skip_split(f, filters, [])]
    opts = Options.of({"read.bloomfilter.enabled": str(enabled).lower()})
    return skip_by_blooms(t.storage.uri, opts, snap, files, filters)


def read_rows(t: it.IndexTable, files: list, filters: list) -> list[dict]:
    from indextables_spark.core.split.cache.cache import get_cache
    from indextables_spark.core.split.read.reader import SplitReader

    out = []
    for f in files:
        reader = SplitReader(get_cache(t.options).local_dir(t.storage, f))
        for b in reader.read(filters=filters, columns=["uid", "n"]):
            out.extend(b.to_pylist())
    return sorted(out, key=lambda r: r["n"])


# ---- hashing and the filter -------------------------------------------------------------------------


def test_hashes_are_fixed_and_the_same_in_every_process():
    # Bloom files on storage depend on these exact values: a change needs a new hash scheme name.
    assert hash_values(pa.array(["", "abc", "a much longer string over 8 bytes"])).tolist() == [
        3220344897584144929,
        5999698949395487111,
        11475991404896087198,
    ]
    assert hash_values(pa.array([0, 1, -1], pa.int64())).tolist() == [
        16294208416658607535,
        10451216379200822465,
        16490336266968443936,
    ]
    code = (
        "import pyarrow as pa; from indextables_spark.core.split.format.bloom import hash_values; "
        "print(hash_values(pa.array(['x', 'yy', None, 'zzz' * 9])).tolist())"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2")
    }
    assert runs == {str(hash_values(pa.array(["x", "yy", "zzz" * 9])).tolist()) + "\n"}


def test_equal_values_hash_equal_across_types_and_chunks():
    assert hash_values(pa.array([7], pa.int32())).tolist() == hash_values(pa.array([7], pa.int64())).tolist()
    assert hash_values(pa.array([-0.0, float("nan")])).tolist() == hash_values(pa.array([0.0, float("nan")])).tolist()
    strings = pa.array([f"value-{i}" * (i % 5) for i in range(100)])
    assert (
        hash_values(pa.chunked_array([strings.slice(0, 40), strings.slice(40)])).tolist()
        == hash_values(strings).tolist()
        == hash_values(strings.cast(pa.large_string())).tolist()
    )
    assert hash_values(strings.slice(10, 5)).tolist() == hash_values(strings).tolist()[10:15]


def test_no_false_negatives_and_about_the_configured_false_positive_rate():
    rnd = np.random.default_rng(3)
    present = hash_values(pa.array(rnd.integers(0, 1 << 62, 50_000)))
    bf = BloomFilter.build(present, fpp=0.01)
    assert bf.might_contain(present).all()
    absent = hash_values(pa.array(rnd.integers(1 << 62, 1 << 63, 50_000)))
    rate = bf.might_contain(absent).mean()
    assert 0.004 < rate < 0.02
    assert bf.num_bits % 64 == 0 and 5 <= bf.num_hashes <= 9


# ---- planning --------------------------------------------------------------------------------------


def test_selective_equal_to_reads_at_most_5_percent_of_splits(many_splits):
    t, data = many_splits
    total = len(t.snapshot().files)
    for i in (17, 2500, 5999):
        wanted = data.column("uid")[i].as_py()
        filters = [EqualTo("uid", wanted)]
        assert len([f for f in t.snapshot().files if not skip_split(f, filters, [])]) > 0.9 * total
        kept = plan(t, filters)
        assert 1 <= len(kept) <= 0.05 * total
        assert read_rows(t, kept, filters) == [{"uid": wanted, "n": i}]
        assert len(plan(t, filters, enabled=False)) > 0.9 * total


def test_in_and_boolean_combinations(many_splits):
    t, data = many_splits
    uids = data.column("uid").to_pylist()
    total = len(t.snapshot().files)
    three = [In("uid", (uids[1], uids[3000], None, "not-there"))]
    kept = plan(t, three)
    assert 2 <= len(kept) <= 6
    assert [r["n"] for r in read_rows(t, kept, three)] == [1, 3000]
    either = [Or(EqualTo("uid", uids[10]), EqualTo("n", 4000))]
    assert 2 <= len(plan(t, either)) <= 6
    assert [r["n"] for r in read_rows(t, plan(t, either), either)] == [10, 4000]
    both = [And(EqualTo("uid", uids[10]), EqualTo("n", 10))]
    assert 1 <= len(plan(t, both)) <= 3
    # a range or a non-Bloom column never skips on Blooms; x = NULL matches nothing
    assert len(plan(t, [GreaterThan("uid", "0")])) == total
    assert plan(t, [EqualTo("uid", None)]) == []
    assert len(plan(t, [EqualNullSafe("uid", None)])) == total
    day = [EqualTo("DAY_OF", dt.date(2024, 2, 9))]  # column names are case-insensitive
    assert [r["n"] for r in read_rows(t, plan(t, day), day)] == [n for n in range(6000) if n % 400 == 39]


def test_bloom_files_are_listed_in_the_state_and_leave_with_their_split(tmp_path):
    path = str(tmp_path / "t")
    write(path, uid_rows(300), {**BLOOM_OPTIONS, "spark.indextables.write.targetSplitSize": "10K"})
    t = it.IndexTable(path)
    snap = t.snapshot()
    listed = snap.stats_files[STATS_KEY]
    assert sorted(listed) == sorted(bloom_file_for(f.path) for f in snap.files) and len(listed) >= 2
    header_split = load_blooms(t.storage, snap.files[0].path).split_path
    assert header_split == snap.files[0].path
    t.maintenance.checkpoint()
    fresh = it.IndexTable(path)
    assert fresh.snapshot().source == "avro-state" and fresh.snapshot().stats_files == snap.stats_files
    gone = snap.files[0]
    fresh.transaction().remove_files([gone.path]).commit()
    assert bloom_file_for(gone.path) not in fresh.snapshot().stats_files[STATS_KEY]
    fresh.maintenance.checkpoint()
    fresh.maintenance.compact()
    expected = sorted(x for x in listed if x != bloom_file_for(gone.path))
    assert sorted(it.IndexTable(path).snapshot().stats_files[STATS_KEY]) == expected


def test_splits_without_a_listed_bloom_file_are_never_skipped(tmp_path):
    path = str(tmp_path / "t")
    write(path, uid_rows(200))  # no Bloom columns
    write(path, uid_rows(200, seed=8), BLOOM_OPTIONS)  # this write's options add them
    t = it.IndexTable(path)
    first, second = sorted(t.snapshot().files, key=lambda f: f.added_at_version)
    assert t.snapshot().stats_files == {STATS_KEY: [bloom_file_for(second.path)]}
    assert [f.path for f in plan(t, [EqualTo("uid", "nope")])] == [first.path]


def test_option_errors_name_the_column(tmp_path):
    data = uid_rows(10).append_column("part", pa.array(["a"] * 10))
    cases = {
        "missing": "'missing' is not a column",
        "part": "'part' is a partition column",
        "price": "column 'price' has type decimal128",
    }
    for col, msg in cases.items():
        with pytest.raises(InvalidOptionError, match=msg):
            write(str(tmp_path / col), data, {"spark.indextables.indexing.bloomfilter.columns": col}, ("part",))
    with pytest.raises(InvalidOptionError, match="fpp"):
        write(str(tmp_path / "fpp"), data, {**BLOOM_OPTIONS, "spark.indextables.indexing.bloomfilter.fpp": "2"})


def test_a_corrupt_bloom_file_is_an_error_naming_it(tmp_path):
    path = str(tmp_path / "t")
    write(path, uid_rows(100), BLOOM_OPTIONS)
    t = it.IndexTable(path)
    f = t.snapshot().files[0]
    key = bloom_file_for(f.path)
    good = t.storage.read(key)
    t.storage.put(key, good[:-10])
    with pytest.raises(CorruptStateError, match=r"split-.*\.bloom: truncated or corrupt Bloom filter"):
        plan(t, [EqualTo("uid", "x")])
    t.storage.put(key, b"ITBF" + (7).to_bytes(4, "little") + good[8:])
    from indextables_spark.core.split.format import bloom

    bloom._cache.clear()
    with pytest.raises(CorruptStateError, match="Bloom filter format version 7 found"):
        plan(t, [EqualTo("uid", "x")])
