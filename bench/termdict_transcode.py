"""Throughput of the term dictionary transcoder (issue #37, core/split/reference/transcode.py): the
reference's SSTable dictionaries rewritten as tantivy-py's FST ones.

    python bench/termdict_transcode.py [--terms 1000000] [--runs 3]

Builds a tantivy-py index of about --terms distinct terms (ids, raw tags, tokenized titles), writes
its `.term` file the reference's way (tests/sstable_writer.py: zstd blocks, multi-block indexes),
then times transcoding it back (checked byte-identical to tantivy-py's own) and its stages, and the
`.term` files of the 176 fixture splits (tests/data/reference_v0.5.4). Every figure printed is
measured in this run.
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # sstable_writer: the tests' reference-like writer

import sstable_writer as sw  # noqa: E402
import tantivy  # noqa: E402

from indextables_spark.core.split.reference.fst_termdict import fst_map, term_info_store  # noqa: E402
from indextables_spark.core.split.reference.quickwit import extract_bundle  # noqa: E402
from indextables_spark.core.split.reference.sstable import read_sstable_terms  # noqa: E402
from indextables_spark.core.split.reference.transcode import transcode_term_file  # noqa: E402


def build_index(path: Path, terms: int) -> None:
    """About `terms` distinct terms: a third ids, a third raw tags, a third title tokens."""
    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("id", stored=True, indexed=True, fast=True)
    sb.add_text_field("tag", stored=True, tokenizer_name="raw")
    sb.add_text_field("title", stored=True, index_option="position")
    path.mkdir(parents=True)
    index = tantivy.Index(sb.build(), str(path))
    writer = index.writer(heap_size=1_000_000_000, num_threads=1)
    docs = terms // 3
    rnd = random.Random(37)
    words = [f"w{n}" for n in range(2000)]
    for i in range(docs):
        tag = f"tag/{(i * 7919) % docs:08d}/{rnd.choice(('red', 'green', 'blue'))}"
        title = " ".join(rnd.choices(words, k=5)) + f" t{i}"
        writer.add_document(tantivy.Document(id=i, tag=tag, title=title))
    writer.commit()
    writer.wait_merging_threads()


CPU: list[float] = []  # the process CPU seconds of the last timed() call (median): wall time inflates under load


def timed(fn, runs: int) -> float:
    """Median wall seconds of `runs` calls (CPU[0]: their median CPU seconds)."""
    times, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    CPU[:] = [statistics.median(cpu)]
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--terms", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="termdict_transcode_"))
    try:
        t0 = time.perf_counter()
        build_index(work / "index", args.terms)
        (term_path,) = glob.glob(str(work / "index" / "*.term"))
        original = Path(term_path).read_bytes()
        t1 = time.perf_counter()
        reference = sw.term_file_as_reference(original)
        t2 = time.perf_counter()
        sections = [s[:-4] for _, _, s in sw.read_composite(reference)[0]]
        n = sum(len(sw.sstable_blocks(s)) for s in sections)
        out = transcode_term_file(reference, None, {}, "bench")
        assert out == original, "the transcoded .term file differs from tantivy-py's"
        terms = sum(len(read_sstable_terms(s, "bench", "f")) for s in sections)
        print(f"index: {terms:,} terms, built in {t1 - t0:.1f} s; reference-like .term written in {t2 - t1:.1f} s")
        print(
            f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times inflate under load; CPU times do not)"
        )
        print(f"  .term: {len(reference) / 1e6:.2f} MB as SSTables ({n} blocks), {len(original) / 1e6:.2f} MB as FST")
        whole = timed(lambda: transcode_term_file(reference, None, {}, "bench"), args.runs)
        print(
            f"transcode (median of {args.runs}): {whole:.3f} s ({CPU[0]:.3f} s CPU), {whole / terms * 1e6:.2f} us a term, "
            f"{len(reference) / whole / 1e6:.1f} MB/s of SSTable in, {len(original) / whole / 1e6:.1f} MB/s of FST out"
        )
        cols = [read_sstable_terms(s, "bench", "f") for s in sections]
        stages = []
        for name, fn in (
            ("SSTable read", lambda: [read_sstable_terms(s, "bench", "f") for s in sections]),
            ("FST build (ducer)", lambda: [fst_map(c.keys, "bench", "f") for c in cols]),
            ("TermInfoStore", lambda: [term_info_store(c, "bench", "f") for c in cols]),
        ):
            wall = timed(fn, args.runs)
            stages.append(f"{name} {wall / terms * 1e6:.2f} ({CPU[0] / terms * 1e6:.2f} CPU)")
        print("  stages, us a term: " + ", ".join(stages))
        fixtures(work / "fixtures", args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fixtures(work: Path, runs: int) -> None:
    """The `.term` files of the fixture splits, extracted once, transcoded from memory."""
    splits = sorted(glob.glob(str(ROOT / "tests" / "data" / "reference_v0.5.4" / "**" / "*.split"), recursive=True))
    t0 = time.perf_counter()
    files = []
    for k, split in enumerate(splits):
        d = work / str(k)
        extract_bundle(split, str(d), split)
        (name,) = [x for x in os.listdir(d) if x.endswith(".term")]
        files.append((d / name).read_bytes())
    t1 = time.perf_counter()
    whole = timed(lambda: [transcode_term_file(f, None, {}, "fixture") for f in files], runs)
    total = sum(len(f) for f in files)
    print(
        f"fixtures: {len(files)} splits extracted in {t1 - t0:.2f} s; their .term files ({total / 1e3:.0f} KB) "
        f"transcoded in {whole * 1e3:.0f} ms ({CPU[0] * 1e3:.0f} ms CPU; {whole / len(files) * 1e3:.2f} ms a split)"
    )


if __name__ == "__main__":
    main()
