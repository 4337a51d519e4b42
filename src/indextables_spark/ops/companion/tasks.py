"""The index tasks of BUILD INDEXTABLES COMPANION (ops/companion/build.py): each indexes one
group of source files into one companion split (the files' rows read by ops/companion/rows.py,
the positions the source listed as deleted placed for the build's delete logs), in a Spark job
when a session is given, else in local processes (`python -m` this module: no fork of a process
holding Arrow/Tantivy threads); and the clean-up of what tasks wrote for a build not committed."""

from __future__ import annotations

import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Sequence

from indextables_spark.config.options import Options
from indextables_spark.config.sessions import run_tasks
from indextables_spark.core.split.cache.companion_rows import open_source_parquet
from indextables_spark.core.split.format.companion import CompanionSource
from indextables_spark.core.storage import open_storage
from indextables_spark.errors import CompanionSourceError
from indextables_spark.ops.companion.nested_fields import file_nested
from indextables_spark.ops.companion.rows import check_row_count, file_columns, row_groups
from indextables_spark.ops.companion.sync import IndexGroup, IndexJob
from indextables_spark.results.record import ProgressCallback, report

# What an index task returns: {"adds": [AddFile JSON], "stats": {key: [per-split stats files]},
# "deletes": {split path: deleted row ids}}.
TaskResult = dict[str, Any]

INDEXING = "indexing"  # the operation a build's progress reports name (unit: source files)


def index_group(job: IndexJob, group: IndexGroup) -> TaskResult:
    """Task side: index the group's files into one companion split: {"adds": [AddFile JSON],
    "stats": {key: [per-split stats files, e.g. Bloom filters]}, "deletes": {split path: row ids}}."""
    from indextables_spark.core.split.write.builder import SplitWriter  # lazy: Tantivy loads in the tasks only

    opts = Options.of(job.options)
    storage = open_storage(job.location, opts)
    writer = SplitWriter(
        storage,
        job.schema_json,
        job.partition_columns,
        opts,
        None,
        companion=CompanionSource(job.format, job.source, job.version),
    )
    try:
        columns = [f.name for f in writer.stored_schema]
        rows: dict[str, int] = {}
        for f in group.files:
            where = f"{job.format} table {job.source}"
            pf = open_source_parquet(f.uri, f.size, opts, where)
            check_row_count(f, rows.setdefault(f.key, pf.metadata.num_rows), where, job.format == "iceberg")
            in_file = file_columns(pf.schema_arrow, job.physical_names, job.field_ids)  # ops/companion/rows.py
            nested = file_nested(pf.schema_arrow, in_file, job.nested, f"{where}: source file {f.uri}")
            rows_in_file = row_groups(pf, columns, in_file)
            writer.write_source_file(f.key, f.uri, f.size, f.partition_values, rows_in_file, in_file, nested)
        adds = writer.finish()
    except BaseException:
        writer.abort()
        storage.delete([a.path for a in writer.written] + [f for fs in writer.stats_files.values() for f in fs])
        raise
    from indextables_spark.ops.companion.deletes import task_deletes  # lazy: numpy and the log modules

    deleted = task_deletes(group, adds, rows)  # positions the source listed per file (Iceberg)
    return {"adds": [a.to_json() for a in adds], "stats": dict(writer.stats_files), "deletes": deleted}


def _in_subprocess(job: IndexJob, group: IndexGroup) -> TaskResult:
    """index_group in a fresh Python process (`python -m indextables_spark.ops.companion.tasks`):
    no fork of a process holding Arrow/Tantivy threads, and unlike multiprocessing's spawn, no
    re-import of the caller's __main__ (a script without a __main__ guard would run again)."""
    proc = subprocess.run(
        [sys.executable, "-m", __name__], input=pickle.dumps((job, group)), capture_output=True, check=False
    )
    try:
        ok, value = pickle.loads(proc.stdout)
    except Exception:
        raise CompanionSourceError(
            f"indexing process for {len(group.files)} files of {job.format} table "
            f"{job.source} exited with {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace')[-2000:]}"
        ) from None
    if not ok:
        raise value
    result: TaskResult = value
    return result


def run_local(
    job: IndexJob, groups: list[IndexGroup], workers: int, progress: ProgressCallback | None = None
) -> list[TaskResult]:
    """Groups indexed in local processes, `workers` at a time (one group: in this process), in
    group order; `progress` hears of the files of each group indexed ("indexing", files)."""
    total, done = sum(len(g.files) for g in groups), 0
    report(progress, INDEXING, 0, total, "files")
    if len(groups) <= 1 or workers <= 1:
        out = []
        for g in groups:
            out.append(index_group(job, g))
            done += len(g.files)
            report(progress, INDEXING, done, total, "files")
        return out
    with ThreadPoolExecutor(max_workers=min(workers, len(groups))) as pool:
        futures = {pool.submit(_in_subprocess, job, g): g for g in groups}
        for fut in as_completed(futures):  # keep waiting after a failure: every written split must be known
            if fut.exception() is None:
                done += len(futures[fut].files)
                report(progress, INDEXING, done, total, "files")
        results = [f.result() for f in futures if f.exception() is None]
        failure = next((e for e in (f.exception() for f in futures) if e is not None), None)
        if failure is not None:
            delete_written(job, results)
            raise failure
        return results


def run_spark(
    spark: Any, job: IndexJob, groups: list[IndexGroup], progress: ProgressCallback | None = None
) -> list[TaskResult]:
    """Groups indexed by a Spark job (one task each), in group order; `progress` hears of the
    start and the end (Spark's own console progress bar shows its tasks)."""
    total = sum(len(g.files) for g in groups)
    report(progress, INDEXING, 0, total, "files")
    out = run_tasks(
        spark,
        lambda g: index_group(job, g),
        groups,
        description=f"BUILD INDEXTABLES COMPANION FOR {job.format.upper()} '{job.source}'",
    )
    report(progress, INDEXING, total, total, "files")
    return out


def delete_written(job: IndexJob, written: list[TaskResult], logs: Sequence[str] = ()) -> None:
    """Delete the splits (their stats files, delete logs) of tasks whose build is not committed."""
    keys = [a["path"] for w in written for a in w["adds"]] + [
        f for w in written for fs in w["stats"].values() for f in fs
    ]
    keys += logs
    if keys:
        open_storage(job.location, job.options).delete(keys)


def _worker_main() -> None:
    """A local indexing process: (job, group) pickled on stdin, (ok, result or error) on stdout."""
    job, group = pickle.loads(sys.stdin.buffer.read())
    try:
        out: tuple[bool, Any] = (True, index_group(job, group))
    except BaseException as e:  # handed to the parent, which raises it
        out = (False, e)
    sys.stdout.buffer.write(pickle.dumps(out))


if __name__ == "__main__":
    _worker_main()
