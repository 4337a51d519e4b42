"""Crash harness (test helper, Spark-free): a child process runs real table operations in a loop
and is killed with SIGKILL at a random moment; the parent then proves the table is intact.

Child (`child_main`, started through a `forkserver` context whose server has already imported the
package, so a trial costs a fork, not an interpreter start): appends (real splits written by
`split.builder.SplitWriter`, committed through `IndexTable.transaction()`), removes of a split,
`t.maintenance.checkpoint()`, `t.maintenance.compact()`, `t.maintenance.merge_splits()`, `t.maintenance.purge(older_than_hours=...)`, chosen at random. Before each
operation it appends an *intent* line to a journal file (for an append: the new split paths and
their row ids); after `commit()` (or the command) returned, a *done* line with the version. Lines
are written with one `os.write` on an O_APPEND descriptor, so a line is either whole or absent.

Parent (`CrashTable`): keeps the model `expected[version] = set of row ids`, built only from the
journal (never from reading the table). After a kill it
- replays the journal: a version is "reported committed" when its done line is there;
- reconciles the one operation that may have been cut: the table may hold at most one version
  beyond the reported ones, and only if that operation creates one; its rows must be exactly
  the model's previous rows plus/minus what the intent said (never a half-applied commit);
- verifies: the table opens; every version is read (`snapshot(v)`) with exactly its rows (every
  live split is opened and read, so its size, footer and content are checked); no fallback or
  other warning is logged while reading (a crash must never leave a state that needs one);
- retries the interrupted operation in-process; it must succeed.
At the end of a table (`finish`): PURGE with zero retention removes every orphan split (written
by a killed append/merge, never committed), and no temp file is left under a local root.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing as mp
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "body", "type": "string", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}},
    ],
}
PARTITIONS = ["p"]
# Small intervals so that automatic checkpoints (Avro state writes) happen inside trials too.
TABLE_OPTIONS = {
    "spark.indextables.checkpoint.interval": "3",
    "spark.indextables.purge.retentionCheckEnabled": "false",
    "spark.indextables.indexWriter.heapSize": "15M",
}
OPS = ("append", "remove", "checkpoint", "compact", "merge", "purge")
WEIGHTS = (6, 2, 2, 1, 2, 1)
VERSION_OPS = ("append", "remove")  # always create a version; merge creates one when it merges


def rows_for(ids: list[int]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "body": pa.array([f"doc {i} word{i % 7}" for i in ids], pa.string()),
            "p": pa.array(["a" if i % 2 == 0 else "b" for i in ids], pa.string()),
        }
    )


def write_splits(table, ids: list[int]):
    """Real splits for these rows (one per partition value); returns (adds, {path: ids}, writer)."""
    from indextables_spark.core.split.write.builder import SplitWriter

    w = SplitWriter(table.storage, SCHEMA, PARTITIONS, table.options)
    w.write_batch(rows_for(ids))
    adds = w.finish()
    by_path = {a.path: [i for i in ids if ("a" if i % 2 == 0 else "b") == a.partition_values["p"]] for a in adds}
    return adds, by_path, w


def create_table(table, ids: list[int]) -> tuple[int, dict[str, list[int]]]:
    """Version 0: protocol, metadata (with the doc mapping registered) and the first splits."""
    from indextables_spark.core.log.model.actions import Metadata
    from indextables_spark.core.log.model.doc_mapping import registry_key
    from indextables_spark.core.log.model.protocol_gate import CURRENT_PROTOCOL
    from indextables_spark.core.log.commit.transaction import new_table_id, now_ms

    adds, by_path, w = write_splits(table, ids)
    meta = Metadata(
        id=new_table_id(),
        schema_string=json.dumps(SCHEMA),
        partition_columns=PARTITIONS,
        configuration={registry_key(w.doc_mapping_ref): w.doc_mapping},
        created_time=now_ms(),
    )
    v = (
        table.transaction(operation="CREATE TABLE")
        .set_protocol(CURRENT_PROTOCOL)
        .set_metadata(meta)
        .add_files(adds)
        .commit()
    )
    return v, by_path


def run_op(table, op: str, rng: random.Random, next_id: int, known: dict[str, list[int]], emit) -> int:
    """One operation; emits its intent before and its outcome after. Returns the next free id."""
    emit({"begin": op})
    if op == "append":
        n = rng.randint(2, 6)
        ids = list(range(next_id, next_id + n))
        adds, by_path, _ = write_splits(table, ids)
        emit({"intent": "append", "paths": by_path})
        v = table.transaction(operation="WRITE").add_files(adds).commit()
        emit({"done": "append", "version": v})
        known.update(by_path)
        return next_id + n
    if op == "remove":
        live = sorted(f.path for f in table.snapshot().files if f.path in known)
        if not live:
            emit({"done": op, "version": None})
            return next_id
        path = rng.choice(live)
        emit({"intent": "remove", "path": path, "ids": known[path]})
        v = table.transaction(operation="DELETE").remove_files([path]).commit()
        emit({"done": "remove", "version": v})
        return next_id
    emit({"intent": op})
    if op == "checkpoint":
        table.maintenance.checkpoint()
        emit({"done": op, "version": None})
    elif op == "compact":
        table.maintenance.compact()
        emit({"done": op, "version": None})
    elif op == "merge":
        res = table.maintenance.merge_splits()
        emit({"done": op, "version": res.get("version") if res.get("splitsCreated") else None})
    elif op == "purge":
        # Zero split retention (the child is the only writer); version files are kept (default log
        # retention) so that every committed version stays readable.
        table.maintenance.purge(older_than_hours=0)
        emit({"done": op, "version": None})
    else:  # pragma: no cover - OPS is fixed
        raise ValueError(op)
    return next_id


def child_main(uri: str, options: dict, journal: str, known_json: str, seed: int, next_id: int) -> None:
    """Runs operations until killed (or until a bounded number of operations, as a guard)."""
    import indextables_spark as it

    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def emit(obj: dict) -> None:
        os.write(fd, (json.dumps(obj) + "\n").encode())

    rng = random.Random(seed)
    table = it.IndexTable(uri, options)
    known = json.loads(known_json)
    table.version()
    emit({"ready": True})
    for _ in range(200):
        op = rng.choices(OPS, WEIGHTS)[0]
        next_id = run_op(table, op, rng, next_id, known, emit)
    emit({"exhausted": True})


_CTX = None


def context():
    """A forkserver context whose server imported the package once (a child is a cheap fork)."""
    global _CTX
    if _CTX is None:
        _CTX = mp.get_context("forkserver")
        _CTX.set_forkserver_preload(
            [
                "indextables_spark",
                "indextables_spark.api.table",
                "indextables_spark.core.split.write.builder",
                "indextables_spark.ops.maintenance.merge_splits",
                "indextables_spark.ops.maintenance.purge",
                "indextables_spark.core.log.maintenance.maintenance",
                "crash_harness",
            ]
        )
    return _CTX


def spin() -> None:
    """Burn a core until terminated (busy_cores)."""
    while True:
        pass


@contextlib.contextmanager
def busy_cores(n: int | None = None) -> Iterator[int]:
    """`n` processes (default: one per core) spinning while the block runs, so that what it runs
    competes for every core with other work; yields how many."""
    procs = [context().Process(target=spin, daemon=True) for _ in range(n or os.cpu_count() or 1)]
    for p in procs:
        p.start()
    try:
        yield len(procs)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(30)


def _ready(journal: str) -> bool:
    try:
        with open(journal, "rb") as f:
            return b"\n" in f.read(64)
    except FileNotFoundError:
        return False


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        import threading

        super().__init__(logging.WARNING)
        self.records: list[str] = []
        self.thread = threading.get_ident()  # several CrashTables may run in threads

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread:
            return
        self.records.append(f"{record.name}: {record.getMessage()}")


@dataclass
class TrialResult:
    killed_during: str | None
    versions_checked: int


@dataclass
class CrashTable:
    """One table reused across several crash trials (see the module doc)."""

    uri: str
    options: dict
    workdir: str
    seed: int
    expected: dict[int, frozenset[int]] = field(default_factory=dict)
    known: dict[str, list[int]] = field(default_factory=dict)  # appended split path -> row ids
    next_id: int = 0
    trials: int = 0
    killed_ops: Counter = field(default_factory=Counter)
    unreported_commits: int = 0
    _ids_of_path: dict[str, frozenset[int]] = field(default_factory=dict)
    _table: Any = None

    def table(self, **extra: str):
        """The table (one IndexTable reused: a cloud client is costly to create; the log is
        re-listed on every call anyway)."""
        import indextables_spark as it

        if extra:
            return it.IndexTable(self.uri, {**self.options, **extra})
        if self._table is None:
            self._table = it.IndexTable(self.uri, self.options)
        return self._table

    def create(self) -> None:
        ids = list(range(0, 4))
        v, by_path = create_table(self.table(), ids)
        self.known.update(by_path)
        self.expected[v] = frozenset(ids)
        self.next_id = 1000

    # ---- one trial --------------------------------------------------------------------------
    def trial(self, max_delay_s: float) -> TrialResult:
        rng = random.Random(self.seed * 1_000_003 + self.trials)
        journal = os.path.join(self.workdir, f"journal-{self.trials}.ndjson")
        start_id = self.next_id
        self.next_id += 100_000
        proc = context().Process(
            target=child_main,
            args=(self.uri, self.options, journal, json.dumps(self.known), rng.randrange(1 << 30), start_id),
        )
        proc.start()
        deadline = time.time() + 30
        while not _ready(journal):  # kill only once the child works on the table
            assert proc.is_alive() and time.time() < deadline, f"crash child for {self.uri} did not start"
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, max_delay_s))
        proc.kill()
        proc.join()
        self.trials += 1
        interrupted = self._replay(journal)
        checked = self.verify(new_only=True)
        self._retry(interrupted, rng)
        return TrialResult(interrupted, checked)

    def _replay(self, journal: str) -> dict | None:
        """Apply the journal to the model; reconcile the operation cut by the kill (returned)."""
        lines = []
        if os.path.exists(journal):
            with open(journal) as f:
                lines = [json.loads(line) for line in f if line.strip()]
        pending = None  # the intent of the running operation (once known)
        running = None  # the operation begun and not finished
        for obj in lines:
            if "ready" in obj:
                continue
            if "begin" in obj:
                assert running is None, f"journal {journal}: {obj} while {running} runs"
                running, pending = obj["begin"], None
            elif "intent" in obj:
                assert running == obj["intent"] and pending is None, f"journal {journal}: {obj}"
                pending = obj
            elif "done" in obj:
                assert running == obj["done"], f"journal {journal}: {obj}"
                if obj["version"] is not None:
                    self._apply(pending, obj["version"])
                running = pending = None
            else:
                raise AssertionError(f"journal {journal}: child ran out of operations before the kill: {obj}")
        if running is not None:
            self.killed_ops[running] += 1
        latest_reported = max(self.expected)
        latest = self.table().version()
        if latest == latest_reported:
            return running
        # The kill hit after the commit but before the report: exactly one more version, made by
        # the pending operation, holding exactly what it intended.
        assert latest == latest_reported + 1, (
            f"{self.uri}: table is at version {latest}, last reported {latest_reported} (pending {pending})"
        )
        assert pending is not None and (pending["intent"] in VERSION_OPS or pending["intent"] == "merge"), (
            f"{self.uri}: version {latest} appeared, but the interrupted operation was {pending}"
        )
        self._apply(pending, latest)
        self.unreported_commits += 1
        return running

    def _apply(self, intent: dict, version: int) -> None:
        prev = self.expected[max(v for v in self.expected if v < version)]
        assert version not in self.expected, f"{self.uri}: version {version} reported twice"
        if intent["intent"] == "append":
            new: set[int] = set()
            for path, ids in intent["paths"].items():
                self.known[path] = ids
                new.update(ids)
            self.expected[version] = prev | new
        elif intent["intent"] == "remove":
            self.expected[version] = prev - set(intent["ids"])
        else:  # merge, or a state-layer commit (protocol upgrade): same rows
            self.expected[version] = prev

    # ---- checks -------------------------------------------------------------------------------
    def _ids(self, table, add) -> frozenset[int]:
        from indextables_spark.core.split.cache.cache import get_cache
        from indextables_spark.core.split.read.reader import SplitReader

        got = self._ids_of_path.get(add.path)
        if got is None:
            reader = SplitReader(get_cache(table.options).local_dir(table.storage, add))
            ids = [i for b in reader.read(columns=["id"]) for i in b.column(0).to_pylist()]
            assert len(ids) == len(set(ids)) == add.num_records, (
                f"split {add.path}: {len(ids)} rows, log says {add.num_records}"
            )
            got = self._ids_of_path[add.path] = frozenset(ids)
        return got

    def verify(self, new_only: bool = False) -> int:
        """Every reported version reads with exactly its rows, without a warning. Returns how many
        versions were checked."""
        handler = _Warnings()
        logger = logging.getLogger("indextables_spark")
        logger.addHandler(handler)
        try:
            table = self.table()
            latest = table.version()
            assert latest == max(self.expected), f"{self.uri}: latest {latest}, model {max(self.expected)}"
            start = getattr(self, "_verified_upto", -1) + 1 if new_only else 0
            versions = sorted(v for v in self.expected if v >= start) or [latest]
            for v in versions:
                snap = table.snapshot(v)
                got: set[int] = set()
                for add in snap.files:
                    ids = self._ids(table, add)
                    assert not (got & ids), f"{self.uri} v{v}: rows {sorted(got & ids)[:5]} in two live splits"
                    got |= ids
                assert got == self.expected[v], (
                    f"{self.uri} v{v}: missing {sorted(self.expected[v] - got)[:10]}, extra {sorted(got - self.expected[v])[:10]}"
                )
            self._verified_upto = latest
        finally:
            logger.removeHandler(handler)
        assert not handler.records, f"{self.uri}: warnings while reading after a crash: {handler.records}"
        return len(versions)

    def _retry(self, op: str | None, rng: random.Random) -> None:
        """Run the interrupted operation again in this process; it must succeed."""
        if op is None:
            return
        table = self.table()
        outcome: dict[str, Any] = {}

        def emit(obj: dict) -> None:
            if "begin" in obj:
                return
            if "intent" in obj:
                outcome["intent"] = obj
            else:
                outcome["done"] = obj

        self.next_id = run_op(table, op, rng, self.next_id, dict(self.known), emit)
        assert "done" in outcome, f"retried {op} reported no outcome"
        if outcome["done"]["version"] is not None:
            self._apply(outcome["intent"], outcome["done"]["version"])

    # ---- end of a table ----------------------------------------------------------------------
    def finish(self) -> dict:
        """Full check of every version, then PURGE (zero retention) must remove every orphan."""
        self.verify(new_only=False)
        table = self.table(**{"spark.indextables.state.gc.minManifestAgeHours": "0"})
        referenced: set[str] = set()
        from indextables_spark.core.log.model.actions import AddFile

        for v in table.log.list_versions():
            referenced.update(a.path for a in table.log.read_actions(v) if isinstance(a, AddFile))
        referenced.update(f.path for f in table.snapshot().files)
        before = {i.key for i in table.storage.list("") if i.key.endswith(".split")}
        res = table.maintenance.purge(older_than_hours=0)
        after = {i.key for i in table.storage.list("") if i.key.endswith(".split")}
        orphans_before = before - referenced
        assert not (after - referenced), f"{self.uri}: orphans after purge {sorted(after - referenced)}"
        assert referenced <= after, f"{self.uri}: purge removed referenced splits {sorted(referenced - after)}"
        leftovers = []
        if table.storage.local_path("x") is not None:
            for d, _dirs, files in os.walk(self.uri):
                leftovers += [os.path.join(d, f) for f in files if f.startswith(".tmp-")]
        assert not leftovers, f"{self.uri}: temp files left after PURGE: {leftovers}"
        self.verify(new_only=False)
        return {"orphans_removed": len(orphans_before), "purge": res}


# ---- load: concurrent Spark-free writers (tests/test_reliability_load.py) ----------------------------


def load_writer(
    uri: str, options: dict, journal: str, stop_path: str, writer_no: int, seed: int, think_s: float = 0.0
) -> None:
    """Appends small splits until `stop_path` exists; writer 0 also merges now and then. A commit
    that loses to concurrent commits (ConcurrentModificationError after the transaction's own
    retries) is retried with a fresh transaction and counted. Each commit is journaled after
    commit() returned: {"v", "ids"} or {"v", "merge": true}; at the end {"end", counts}."""
    import indextables_spark as it
    from indextables_spark.errors import ConcurrentModificationError

    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def emit(obj: dict) -> None:
        os.write(fd, (json.dumps(obj) + "\n").encode())

    rng = random.Random(seed)
    table = it.IndexTable(uri, options)
    next_id = (writer_no + 1) * 1_000_000_000
    conflicts = commits = merges = 0
    while not os.path.exists(stop_path):
        if writer_no == 0 and commits % 10 == 9:
            try:
                res = table.maintenance.merge_splits()
            except ConcurrentModificationError as e:
                conflicts += 1
                emit({"conflict": f"merge: {e}"[:500]})
                continue
            if res.get("splitsCreated"):
                merges += 1
                emit({"v": res["version"], "merge": True})
        n = rng.randint(1, 4)
        ids = list(range(next_id, next_id + n))
        next_id += n
        adds, _, _ = write_splits(table, ids)
        while True:
            try:
                v = table.transaction(operation="WRITE").add_files(adds).commit()
                break
            except ConcurrentModificationError as e:
                conflicts += 1
                emit({"conflict": f"append: {e}"[:500]})
        commits += 1
        emit({"v": v, "ids": ids})
        if think_s:
            time.sleep(rng.uniform(0, 2 * think_s))  # a client's pause between writes
    emit({"end": True, "commits": commits, "merges": merges, "conflicts": conflicts})


# ---- driving many trials (tests/test_reliability_crash_load.py) ------------------------------------


def run_trials(target, tmp_path, trials: int, per_table: int, max_delay: float, seed: int) -> dict:
    summary = {
        "backend": target.kind,
        "trials": 0,
        "tables": 0,
        "killed_during": {},
        "unreported_commits": 0,
        "versions_checked": 0,
        "versions": 0,
        "orphans_removed": 0,
        "seconds": 0.0,
    }
    t0 = time.time()
    n_tables = (trials + per_table - 1) // per_table
    killed: dict[str, int] = {}
    for k in range(n_tables):
        work = tmp_path / f"work{k}"
        work.mkdir(parents=True)
        sub = target.child(f"crash{k}")
        ct = CrashTable(uri=sub.uri, options={**sub.options, **TABLE_OPTIONS}, workdir=str(work), seed=seed + k)
        ct.create()
        for _ in range(min(per_table, trials - summary["trials"])):
            res = ct.trial(max_delay)
            summary["trials"] += 1
            summary["versions_checked"] += res.versions_checked
        end = ct.finish()
        summary["tables"] += 1
        summary["orphans_removed"] += end["orphans_removed"]
        summary["unreported_commits"] += ct.unreported_commits
        summary["versions"] += len(ct.expected)
        for op, n in ct.killed_ops.items():
            killed[op] = killed.get(op, 0) + n
    summary["killed_during"] = dict(sorted(killed.items()))
    summary["seconds"] = round(time.time() - t0, 1)
    print("crash summary:", json.dumps(summary))
    return summary


def check_coverage(summary: dict, trials: int) -> None:
    assert summary["trials"] == trials
    # The harness must really interrupt operations, of several kinds (else it proves nothing).
    interrupted = sum(summary["killed_during"].values())
    assert interrupted >= trials // 4, summary
    if trials >= 100:
        assert {"append", "merge", "checkpoint"} <= set(summary["killed_during"]), summary
