"""Index files of a remote split fetched only as far as a query reads them (sparse files).

Tantivy (through tantivy-py) opens an index from a local directory, memory-mapped, so a split's
index files must exist locally at their full length. They need not be complete: a query reads
only some parts of them, and the rest can stay holes (sparse files, no disk blocks) as long as
nothing ever reads a hole. What a query on fields F reads (tantivy 0.27):

- opening: meta.json; the tantivy footer at the end of every segment file (version JSON, u32
  length, u32 magic 1337); the per-field offset table at the end of the composite files
  (.term/.idx/.pos/.fieldnorm: `[sections][VInt n, n x (VInt offset delta, u32 field, VInt idx)]
  [u32 table length]`); the fast field columnar file (.fast); the doc store's footer and skip
  index (.store); the fieldnorms; the .del file;
- the query: the sections of F in .term (dictionary) and .idx (postings, with the field's token
  count); the sections of F in .pos only for phrase-like queries; fieldnorms when scoring; the
  `__row` fast field for row ids; fast fields for ranges and exists.

So every file is fetched whole except .term, .idx and .pos, of which the offset tables and the
sections of the query's fields come (and .pos sections only for phrase-like query kinds). A term
lookup (`Searcher.doc_freq`: the corpus statistics of a split, read/corpus_stats.py) reads less:
`postings=False` fetches the .term sections of the query's scored fields and only the first
TOKEN_COUNT_BYTES of their .idx sections (opening a field's inverted index reads its token count,
and the open searcher keeps it: a hole there would skew the BM25 of a later search), no .pos, and
of the fast fields (.fast) only what opening the segment reads: the column dictionary at its end
(composite.columnar_tail), no column. The
fields and kinds are read from the Tantivy query the split will run (its Debug form, parsed with
the split's own column specs: field ids are positions in the split's schema, checked against its
meta.json); an unknown query kind, a schema that does not line up, or an offset table that does
not parse means: fetch whole. Ranges closer than GAP_BYTES are read in one request.

State: `sparse.json` in the split's cache directory lists, per file, the byte ranges not fetched
yet; it exists only while some are missing (a directory fetched for term lookups lists the
postings and fast field columns it lacks, so the search that reads it later fetches them). Ranges
are fetched (under the cache's per-split locks), written in place into the files (so indexes
already open see them), and only then removed from the state file (replaced atomically): a reader
that sees a range as present finds its bytes. A caller that needs more (another query, or one that needs every file: `ensure(...,
None)`) completes the directory first (SplitCache.local_dir does).
"""

from __future__ import annotations

import json
import os
import struct
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from indextables_spark.core.schema.types import ROW_FIELD, with_fully_tokenized, with_truncated_terms
from indextables_spark.core.split.format.bundle import (
    EXTRACTED_FROM,
    FOOTER_FILE,
    LAZY_ROWS,
    RangeSource,
    SplitFooter,
    load_extracted_footer,
    read_footer,
)
from indextables_spark.core.split.format.composite import (
    INDEX_SECTIONS,
    TAIL_BYTES,
    columnar_tail,
    composite_sections,
    needed_tail,
    sectioned,
)
from indextables_spark.core.split.format.doc_mapping import specs_from_doc_mapping
from indextables_spark.core.split.format.vector_index import VECTOR_FILE_PREFIX
from indextables_spark.errors import IndexTablesError, SplitFormatError
from indextables_spark.expr.fulltext import full_text_query
from indextables_spark.util.pools import shared_pool

STATE_FILE = "sparse.json"
TAIL_GUESS = 64 << 10  # the first read of a split (1/64 of it, at least 16 KiB): its footer, the
# row store's IPC footer before it
GAP_BYTES = 1 << 20  # ranges closer than this (1/16 of the split, at least 16 KiB) are one request
RANGE_THREADS = 8  # ranged reads in flight for the splits being fetched (a pool of their own)
TOKEN_COUNT_BYTES = 8  # a field's .idx section starts with its token count (u64), read when the
# field's inverted index is opened (tantivy's InvertedIndexReader::new), even for a term lookup
Range = tuple[int, int]  # [start, end)

# Tests set this to a byte (e.g. b"\xff") to fill the parts not fetched with it instead of
# leaving holes of zeros: a query that read one would then see garbage, not plausible zeros.
HOLE_FILL: bytes | None = None


@dataclass(frozen=True)
class Needs:
    """Field ids (of the split's schema) whose .term/.idx sections, and .pos sections, a query reads;
    with `postings` False, term lookups only: the .term sections and the token counts of .idx."""

    fields: frozenset[int]
    positions: frozenset[int]
    postings: bool = True


# ---- what a query reads ------------------------------------------------------------------------


def _field_names(specs: Sequence[Any]) -> list[str]:
    return [f.name for s in specs for f in s.indexed_fields] + [ROW_FIELD]


def query_needs(footer: SplitFooter, schema_fields: Sequence[str], query: str, postings: bool = True) -> Needs | None:
    """The sections `query` reads on this split (whose Tantivy schema has `schema_fields`, in field
    id order), or None when that cannot be told for sure: the fields of its leaves (expr/fulltext.py:
    the term dictionary and postings of each, the positions of phrase-like leaves; fast fields and
    field norms are fetched whole). With `postings` False, what looking up the document frequency of
    its scored terms reads: the dictionaries of the scored leaves' fields."""
    try:
        specs = with_truncated_terms(specs_from_doc_mapping(footer.doc_mapping), footer.truncated_terms)
        specs = with_fully_tokenized(specs, footer.fully_tokenized)
        fq = full_text_query(specs, query)
    except (IndexTablesError, ValueError):  # an invalid query fails when the split runs it; here: fetch whole
        return None
    names = _field_names(specs)
    if names != list(schema_fields) or fq.ast is None:
        return None  # the split's index was not built from these specs in this order; a syntax error
    ids = {names.index(f) for f in fq.fields if f}
    if not fq.fields - {""} <= set(names):
        return None  # a field the split lacks: the query fails when the split runs it
    if not postings:
        return Needs(frozenset(names.index(f) for f in fq.scored_fields if f), frozenset(), postings=False)
    return Needs(frozenset(ids), frozenset(names.index(f) for f in fq.position_fields if f))


def _schema_fields(local_dir: str) -> list[str] | None:
    try:
        with open(os.path.join(local_dir, "meta.json"), "rb") as f:
            return [str(x["name"]) for x in json.loads(f.read())["schema"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


# ---- ranges ------------------------------------------------------------------------------------


def subtract(have: list[Range], minus: Iterable[Range]) -> list[Range]:
    out = list(have)
    for ms, me in minus:
        nxt: list[Range] = []
        for s, e in out:
            if me <= s or ms >= e:
                nxt.append((s, e))
                continue
            if s < ms:
                nxt.append((s, ms))
            if me < e:
                nxt.append((me, e))
        out = nxt
    return out


def intersect(a: list[Range], b: Iterable[Range]) -> list[Range]:
    out = []
    for bs, be in b:
        for s, e in a:
            lo, hi = max(s, bs), min(e, be)
            if lo < hi:
                out.append((lo, hi))
    return sorted(set(out))


def coalesce(ranges: Iterable[Range], gap: int | None = None) -> list[Range]:
    """Sorted ranges merged where they touch or lie less than `gap` (GAP_BYTES) bytes apart."""
    gap = GAP_BYTES if gap is None else gap
    out: list[list[int]] = []
    for s, e in sorted(r for r in ranges if r[1] > r[0]):
        if out and s - out[-1][1] <= gap:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


# ---- the directory -----------------------------------------------------------------------------

Reader = Callable[[int, int], bytes]  # bytes [start, end) of the split file


def _write_pieces(dest_dir: str, footer: SplitFooter, reader: Reader, wanted: dict[str, list[Range]]) -> int:
    """Fetch the wanted ranges (file-relative) with coalesced reads of the split and write them in
    place; returns the number of reads."""
    by_name = {f.name: f for f in footer.files}
    absolute = [(by_name[n].offset + s, by_name[n].offset + e, n) for n, rs in wanted.items() for s, e in rs]
    reads = coalesce([(s, e) for s, e, _ in absolute], _scaled(GAP_BYTES, footer.footer_end, 16))
    if len(reads) > 1:  # the requests of one split in parallel (their latency, not bandwidth, counts)
        fetched = list(shared_pool("fetch-ranges", RANGE_THREADS).map(lambda r: reader(*r), reads))
    else:
        fetched = [reader(*r) for r in reads]
    handles: dict[str, Any] = {}
    try:
        for (rs, re_), data in zip(reads, fetched):
            if len(data) != re_ - rs:
                raise SplitFormatError(f"short read of bytes [{rs}, {re_}) of the split")
            for s, e, n in absolute:
                if rs <= s and e <= re_:
                    f = handles.get(n)
                    if f is None:
                        f = handles[n] = open(os.path.join(dest_dir, n), "r+b")
                    f.seek(s - by_name[n].offset)
                    f.write(data[s - rs : e - rs])
    finally:
        for f in handles.values():
            f.close()
    return len(reads)


def _save_state(dest_dir: str, state: dict[str, Any]) -> None:
    path = os.path.join(dest_dir, STATE_FILE)
    if not any(state["missing"].values()):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(tmp, path)


def _load_state(local_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(local_dir, STATE_FILE), "rb") as f:
            state: dict[str, Any] = json.loads(f.read())
            return state
    except FileNotFoundError:
        return None


def _ranges(raw: Iterable[Sequence[int]]) -> list[Range]:
    return [(int(r[0]), int(r[1])) for r in raw]


def _wanted(state: dict[str, Any], needs: Needs | None) -> dict[str, list[Range]]:
    """Missing ranges (file-relative) the needs cover: every missing range for needs None."""
    missing = {n: _ranges(rs) for n, rs in state["missing"].items()}
    if needs is None:
        return {n: rs for n, rs in missing.items() if rs}
    out: dict[str, list[Range]] = {}
    if needs.postings:  # a file not sectioned lacks bytes only after term lookups (.fast): a search reads it whole
        out.update({n: rs for n, rs in missing.items() if rs and n not in state["sections"] and not _vector_file(n)})
    for n, secs in state["sections"].items():
        ext = n.rsplit(".", 1)[-1]
        ids = needs.positions if ext == "pos" else needs.fields
        want = _ranges([secs[str(i)] for i in ids if str(i) in secs])
        if ext == "idx" and not needs.postings:
            want = [(s, min(e, s + TOKEN_COUNT_BYTES)) for s, e in want]
        got = intersect(missing.get(n, []), want)
        if got:
            out[n] = got
    return out


def _footer_layout(footer: SplitFooter) -> dict[str, Any] | None:
    """The split footer's indexSections (bundle.py, from the writer) when it covers every
    sectioned file consistently; None for older splits (their offset tables are read first)."""
    raw = footer.raw.get(INDEX_SECTIONS)
    if not isinstance(raw, dict) or not isinstance(raw.get("fields"), list) or not isinstance(raw.get("files"), dict):
        return None
    for f in footer.files:
        if not sectioned(f.name):
            continue
        entry = raw["files"].get(f.name)
        if not isinstance(entry, dict) or not isinstance(entry.get("tail"), int) or not 0 <= entry["tail"] <= f.length:
            return None
        secs = entry.get("sections")
        if not isinstance(secs, dict):
            return None
        for r in secs.values():
            if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r)):
                return None
            if not 0 <= r[0] <= r[1] <= entry["tail"]:
                return None
    return raw


def _vector_file(name: str) -> bool:
    """A vector index file (format/vector_index.py): no query reads it, only a vector search,
    which asks for every file (query None) — on a vector table it is most of the split."""
    return name.startswith(VECTOR_FILE_PREFIX)


def _opened_by_end(name: str) -> bool:
    """A file read whole by a search of which term lookups read only the end (opening it)."""
    return name.endswith(".fast")


def _complete_ends(dest_dir: str, footer: SplitFooter, reader: Reader, missing: dict[str, list[Range]]) -> None:
    """Of each fast field file whose end alone was fetched (`missing` is [(0, end)]), fetch what
    else opening it reads (a column dictionary that starts before the end), or the whole file when
    its end does not parse; `missing` is updated."""
    more: dict[str, list[Range]] = {}
    for f in footer.files:
        rs = missing.get(f.name)
        if not rs or not _opened_by_end(f.name):
            continue
        end = rs[-1][1]
        with open(os.path.join(dest_dir, f.name), "rb") as fh:
            fh.seek(end)
            tail = fh.read()
        try:
            start = f.length - columnar_tail(f.length, tail)
        except (ValueError, struct.error):
            start = 0  # not the columnar we know: fetch whole
        if start < end:
            more[f.name] = [(start, end)]
    if more:
        _write_pieces(dest_dir, footer, reader, more)
        for n, rs in more.items():
            missing[n] = subtract(missing[n], rs)


def extract_partial(
    reader: Reader, footer: SplitFooter, dest_dir: str, where: str, query: str, postings: bool = True
) -> bool:
    """Write the split's index files into dest_dir, fetching only what `query` needs (only what
    its term lookups read with `postings` False: query_needs), and the footer.json of a row store
    read by ranges. Every file is fetched whole when the query's needs cannot be told for sure;
    returns whether some parts were left out (a state file lists them).

    With the writer's indexSections in the footer this is one round of coalesced reads; without,
    the offset tables are read first (with every file fetched whole), then the sections."""
    os.makedirs(dest_dir, exist_ok=True)
    for f in footer.files:
        with open(os.path.join(dest_dir, f.name), "wb") as out:
            if HOLE_FILL is not None:
                out.write(HOLE_FILL * f.length)
            else:
                out.truncate(f.length)  # a hole: no disk blocks until written
    layout = _footer_layout(footer)
    # term lookups only: of the fast fields, first their last TAIL_BYTES (_complete_ends)
    ends = {f.name: max(0, f.length - TAIL_BYTES) for f in footer.files if not postings and _opened_by_end(f.name)}
    if layout is not None:
        needs = query_needs(footer, layout["fields"], query, postings)
        tails = {n: int(e["tail"]) for n, e in layout["files"].items()}
        sections = {n: dict(e["sections"]) for n, e in layout["files"].items()}
    else:
        first = {
            f.name: [(max(0, f.length - TAIL_BYTES), f.length)]
            if sectioned(f.name) or f.name in ends
            else [(0, f.length)]
            for f in footer.files
            if not _vector_file(f.name)
        }
        _write_pieces(dest_dir, footer, reader, first)
        fields = _schema_fields(dest_dir)
        needs = query_needs(footer, fields, query, postings) if fields is not None else None
        tails, sections = {}, {}
        for f in footer.files:
            if not sectioned(f.name):
                continue
            tails[f.name] = max(0, f.length - TAIL_BYTES)
            if needs is None:
                continue
            try:
                with open(os.path.join(dest_dir, f.name), "rb") as fh:
                    fh.seek(tails[f.name])
                    tail = fh.read()
                need = needed_tail(f.length, tail)
                if need > len(tail):
                    _write_pieces(dest_dir, footer, reader, {f.name: [(f.length - need, tails[f.name])]})
                    tails[f.name] = f.length - need
                    with open(os.path.join(dest_dir, f.name), "rb") as fh:
                        fh.seek(tails[f.name])
                        tail = fh.read()
                secs = composite_sections(f.length, tail, len(fields or ()))
            except (ValueError, struct.error):
                needs = None  # an offset table we cannot read: fetch whole
                continue
            sections[f.name] = {str(k): list(v) for k, v in secs.items()}
    missing: dict[str, list[Range]] = {n: [(0, t)] if t > 0 else [] for n, t in {**tails, **ends}.items()}
    missing.update({f.name: [(0, f.length)] for f in footer.files if _vector_file(f.name) and f.length})
    state: dict[str, Any] = {"missing": missing, "sections": sections}
    wanted = _wanted(state, needs)  # every missing range when needs is None
    if layout is not None:  # one round: the other files whole, the tails, the sections
        by_name = {f.name: f for f in footer.files if not _vector_file(f.name)}
        for n, f in by_name.items():
            start = tails.get(n, ends.get(n, 0))
            wanted[n] = wanted.get(n, []) + [(start, f.length)]
    _write_pieces(dest_dir, footer, reader, wanted)
    state["missing"] = {n: subtract(rs, wanted.get(n, [])) for n, rs in missing.items()}
    _complete_ends(dest_dir, footer, reader, state["missing"])
    if layout is not None and _schema_fields(dest_dir) != layout["fields"]:
        # the footer's layout does not describe these files: fetch the rest
        rest = {n: rs for n, rs in state["missing"].items() if rs}
        _write_pieces(dest_dir, footer, reader, rest)
        state["missing"] = {}
    with open(os.path.join(dest_dir, FOOTER_FILE), "w", encoding="utf-8") as out:
        json.dump({**footer.raw, EXTRACTED_FROM: where, LAZY_ROWS: True}, out, ensure_ascii=False)
    _save_state(dest_dir, state)
    return any(state["missing"].values())


def _scaled(most: int, size: int, part: int) -> int:
    """`most` bytes, or 1/part of a smaller split (at least 16 KiB): on small splits, a request
    should not carry much more than the bytes needed."""
    return min(most, max(16 << 10, size // part))


def fetch_for_query(
    read_range: Reader, size: int, dest_dir: str, where: str, query: str, postings: bool = True
) -> SplitFooter:
    """The split (`size` bytes, read by `read_range(start, end)`) extracted into dest_dir for
    `query` (extract_partial; its term lookups only with `postings` False), its row store left
    where it is (lazy_rows.py). The first read takes the split's last TAIL_GUESS bytes: its footer
    and, usually, the row store's IPC footer, which is kept for LazyRows at once."""
    from indextables_spark.core.split.cache.lazy_rows import (
        save_ipc_tail,  # lazy: keeps `import indextables_spark.core.split.cache.sparse` free of pyarrow
    )

    tail_start = max(0, size - _scaled(TAIL_GUESS, size, 64))
    tail = read_range(tail_start, size)

    def read(s: int, e: int) -> bytes:
        return tail[s - tail_start : e - tail_start] if s >= tail_start else read_range(s, e)

    footer = read_footer(RangeSource(size, read), where)
    extract_partial(read, footer, dest_dir, where, query, postings)
    if not footer.is_companion and footer.rows.offset + footer.rows.length - 8 * 1024 >= tail_start:
        save_ipc_tail(dest_dir, read, footer.rows.offset, footer.rows.length, where)
    return footer


_satisfied: dict[tuple[str, int, int, str, bool], bool] = {}
_satisfied_lock = threading.Lock()


def _needs_of(local_dir: str, query: str, postings: bool = True) -> Needs | None:
    fields = _schema_fields(local_dir)
    return query_needs(load_extracted_footer(local_dir), fields, query, postings) if fields is not None else None


def satisfies(local_dir: str, query: str | None, postings: bool = True) -> bool:
    """Whether the directory holds every byte a run of `query` reads (None: every byte of the
    index files; `postings` False: every byte its term lookups read). A complete directory has no
    state file: one stat."""
    try:
        st = os.stat(os.path.join(local_dir, STATE_FILE))
    except FileNotFoundError:
        return True  # complete (or gone: the caller's registration check fetches it again)
    if query is None:
        return False
    # the state file is replaced at each change and made anew with its directory: its inode and
    # mtime name one state of one directory, whose missing ranges only ever shrink
    key = (local_dir, st.st_ino, st.st_mtime_ns, query, postings)
    with _satisfied_lock:
        if _satisfied.get(key):
            return True
    state = _load_state(local_dir)
    if state is None:
        return True
    needs = _needs_of(local_dir, query, postings)
    ok = needs is not None and not _wanted(state, needs)
    if ok:
        with _satisfied_lock:
            if len(_satisfied) > 4096:
                _satisfied.clear()
            _satisfied[key] = True
    return ok


def ensure(local_dir: str, reader: Reader, query: str | None, postings: bool = True) -> int:
    """Fetch what `query` needs (None: everything; `postings` False: what its term lookups read)
    and the directory lacks; the caller holds the split's locks. Returns the number of ranged reads."""
    state = _load_state(local_dir)
    if state is None:
        return 0
    needs = _needs_of(local_dir, query, postings) if query is not None else None
    wanted = _wanted(state, needs)
    if not wanted:
        return 0
    footer = load_extracted_footer(local_dir)
    reads = _write_pieces(local_dir, footer, reader, wanted)
    state["missing"] = {n: subtract(_ranges(rs), wanted.get(n, [])) for n, rs in state["missing"].items()}
    _save_state(local_dir, state)
    return reads
