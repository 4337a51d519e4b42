"""Cold starts: what a fresh process imports (bench/cold_start.py measures the times)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import indextables_spark as it

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def run_fresh(code: str) -> dict:
    prog = f"import json, sys\nsys.path.insert(0, {SRC!r})\n{code}"
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_is_lazy():
    got = run_fresh(
        "import indextables_spark as it\n"
        "loaded = sorted(m for m in ('pyarrow', 'numpy', 'pyspark', 'tantivy', 'datafusion') if m in sys.modules)\n"
        "names = [n for n in it.__all__ if not hasattr(it, n)]\n"
        "print(json.dumps({'loaded': loaded, 'missing': names, 'cls': it.IndexTable.__name__}))"
    )
    assert got == {"loaded": [], "missing": [], "cls": "IndexTable"}


def test_first_snapshot_loads_datafusion_core_without_its_python_layer(tmp_path):
    """The V4 state decodes with DataFusion's compiled module alone (its package imports pandas);
    a later `import datafusion` in the same process still works and reuses that module."""
    path = str(tmp_path / "t")
    from cmd_helpers import small_splits_table

    small_splits_table(path, 2)
    t = it.IndexTable(path)
    t.maintenance.checkpoint()
    got = run_fresh(
        "from indextables_spark import IndexTable\n"
        f"snap = IndexTable({path!r}).snapshot()\n"
        "before = sorted(m for m in ('pandas', 'datafusion', 'datafusion._internal') if m in sys.modules)\n"
        "import datafusion\n"
        "ok = datafusion.SessionContext() is not None\n"
        "print(json.dumps({'source': snap.source, 'n': snap.num_files, 'before': before, 'ok': ok}))"
    )
    assert got["source"] == "avro-state" and got["n"] == len(t.files()) > 0
    assert got["before"] == ["datafusion._internal"] and got["ok"]


def test_table_import_and_first_snapshot_import_only_the_read_path(tmp_path):
    """#28: `import indextables_spark.api.table` imports neither pyarrow nor numpy, and a first snapshot
    imports only what its state read needs: pyarrow (while the manifests decode), not the change
    feed, transactions, maintenance, the state writer, partition filters, pyarrow.compute or
    fastavro (the state manifest is read by core/log/state/avro_container.py).
    A commit through the table still runs the maintenance hook (the automatic checkpoint)."""
    path = str(tmp_path / "t")
    from cmd_helpers import small_splits_table

    small_splits_table(path, 2)
    it.IndexTable(path).maintenance.checkpoint()
    mods = (
        "pyarrow",
        "pyarrow.compute",
        "numpy",
        "fastavro",
        "indextables_spark.core.log.read.changes",
        "indextables_spark.core.log.commit.transaction",
        "indextables_spark.core.log.maintenance.maintenance",
        "indextables_spark.core.log.maintenance.state_writer",
        "indextables_spark.expr.partition_filter",
        "indextables_spark.core.log.state.avro_codec",
        "indextables_spark.results",
    )
    got = run_fresh(
        f"mods = {mods!r}\n"
        "from indextables_spark.api.table import IndexTable\n"
        "after_import = sorted(m for m in mods if m in sys.modules)\n"
        f"snap = IndexTable({path!r}).snapshot()\n"
        "n = snap.files_table.num_rows\n"
        "after_snapshot = sorted(m for m in mods if m in sys.modules)\n"
        "print(json.dumps({'import': after_import, 'snapshot': after_snapshot, 'n': n, 'source': snap.source}))"
    )
    assert got["import"] == []
    assert got["snapshot"] == ["numpy", "pyarrow"]
    assert got["source"] == "avro-state" and got["n"] == it.IndexTable(path).snapshot().num_files > 0

    t = it.IndexTable(path, {"checkpoint.interval": "1"})
    v = t.transaction().commit()
    assert t.log.listing().state_manifests.get(v), "the post-commit hook wrote no state"


def test_snapshot_decodes_with_the_datafusion_package_imported_first(tmp_path):
    """When the process imported the `datafusion` package before, manifests decode through its
    Python layer (SessionContext/DataFrame wrappers): the same snapshot."""
    path = str(tmp_path / "t")
    from cmd_helpers import small_splits_table

    small_splits_table(path, 2)
    it.IndexTable(path).maintenance.checkpoint()
    got = run_fresh(
        "import datafusion\n"
        "from indextables_spark import IndexTable\n"
        f"snap = IndexTable({path!r}).snapshot()\n"
        "print(json.dumps({'source': snap.source, 'paths': sorted(f.path for f in snap.files)}))"
    )
    assert got == {"source": "avro-state", "paths": sorted(f.path for f in it.IndexTable(path).files())}
