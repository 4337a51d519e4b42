"""Index files of a remote split fetched only as far as a query reads them (sparse files).

Tantivy (through tantivy-py) opens an index from a local directory, memory-mapped, so a split's
index files must exist locally at their full length. They need not be complete: a query reads
only some parts of them, and the rest can stay holes (sparse files, no disk blocks) as long as
nothing ever reads a hole. What a query reads (tantivy 0.27; fetch_plan.py tells the ranges):

- opening: meta.json; the tantivy footer at the end of every segment file (version JSON, u32
  length, u32 magic 1337); the per-field offset tables at the end of the composite files
  (.term/.idx/.pos/.fieldnorm: `[sections][VInt n, n x (VInt offset delta, u32 field, VInt idx)]
  [u32 table length]`); of the fast field file (.fast) its column dictionary at the end
  (composite.columnar_tail); of the doc store (.store) its skip index at the end
  (composite.store_tail: a document fetch reads the blocks, which no query does);
- a term or phrase whose terms are known (expr/fulltext.py's leaves): the field's term dictionary
  (its .term section, fetched whole as Lance fetches its dictionary), then, looked up in it
  (format/termdict.py), each found term's postings range in the field's .idx section (plus the
  section's first TOKEN_COUNT_BYTES: the field's token count) and, for a phrase, its positions
  range in .pos; the field norms of the field (.fieldnorm section: BM25);
- a range or exists on a fast field: its column of .fast; every query: the `__row` column;
- any other leaf (prefix, regex, fuzzy, json, term sets...): the field's whole .term/.idx (and
  .pos for phrase-like kinds) sections and its field norms.
- a read with pushed filters (ReadPlan.index_query's IndexRead: the query, or none, and the
  filters' columns): besides the query's parts, every index field of each filter column whole
  (.term/.idx/.pos sections, field norms) and its fast field columns (the whole .fast file for a
  json field); a column without index fields nothing (its filters are checked on the rows).

A term lookup (`Searcher.doc_freq`: the corpus statistics of a split, read/corpus_stats.py) reads
less: `postings=False` fetches the .term sections of the query's scored fields and only the first
TOKEN_COUNT_BYTES of their .idx sections (opening a field's inverted index reads its token count,
and the open searcher keeps it: a hole there would skew the BM25 of a later search), no .pos, and
of the other files what opening reads. Field ids come from the split's schema (meta.json, or the
footer's indexSections); an unknown query kind, a schema that does not line up, or a file end
that does not parse means: fetch that (or every) file whole. Each round (a dependency level:
files' ends and dictionaries, then postings, norms and columns; without the footer's sections,
the offset tables first) reads its ranges in parallel, ranges closer than `_gap` in one request.

Measured (a 100,000-row split of short texts, 13.3 MB, 5.9 MB of index files; bytes fetched by a
cold query's index fetch, the split's last 64 KiB included; before: whole sections of the query's
fields, .fast/.fieldnorm/.store whole): rare term `body:quasar` 4.42 -> 0.18 MB; a common term
`title:tantivy` 3.24 -> 0.20 MB; `body:quasar AND title:spark` 4.42 -> 0.31 MB; the phrase
`body:"data lake"` 4.42 -> 0.36 MB; `views:[100 TO 500]` 3.23 -> 0.25 MB. Most of what is left
is the scored fields' norms (one byte per document) and the first read of the split's end.

State: `sparse.json` in the split's cache directory lists, per file, the byte ranges not fetched
yet (with the sections and file ends found); it exists only while some are missing. A directory
fetched for query A is not complete for query B with other terms: `satisfies` looks B's terms up
in the dictionaries present and checks their postings. Ranges are fetched (under the cache's
per-split locks), written in place into the files (so indexes already open see them), and only
then removed from the state file (replaced atomically): a reader that sees a range as present
finds its bytes. A caller that needs more (another query, or one that needs every file:
`ensure(..., None)`) completes the directory first (SplitCache.local_dir does).
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from typing import Any, Callable

from indextables_spark.core.split.format.bundle import (
    EXTRACTED_FROM,
    FOOTER_FILE,
    LAZY_ROWS,
    RangeSource,
    SplitFooter,
    load_extracted_footer,
    read_footer,
)
from indextables_spark.core.split.cache.fetch_plan import (
    OPEN_ONLY,
    FetchPlan,
    IndexQuery,
    IndexRead,
    Needs,
    Range,
    intersect,
    query_needs,
    ranges,
    read_needs,
    subtract,
    term_key,
    vector_file,
)
from indextables_spark.core.split.format.composite import INDEX_SECTIONS, sectioned
from indextables_spark.core.split.format.hotcache import (
    ROWS_FILE,
    TOKEN_COUNT_BYTES,
    Hotcache,
    hotcache_range,
    parse_hotcache,
)
from indextables_spark.errors import SplitFormatError
from indextables_spark.util.pools import shared_pool
from indextables_spark.util.ranges import coalesce

STATE_FILE = "sparse.json"
TAIL_GUESS = 64 << 10  # the first read of a split (1/64 of it, at least 16 KiB): its footer, the
# row store's IPC footer before it
GAP_BYTES = 1 << 20  # ranges closer than this (1/16 of the split, at least 16 KiB) are one request
MIN_GAP = 64 << 10  # (see _gap; on object storage a request costs its latency and ~5 ms of client
# CPU, what ~0.5 MB of transfer costs: gaps this small are cheaper read than asked for apart)
RANGE_THREADS = 32  # ranged reads in flight for the splits being fetched (a pool of their own)

# Tests set this to a byte (e.g. b"\xff") to fill the parts not fetched with it instead of
# leaving holes of zeros: a query that read one would then see garbage, not plausible zeros.
HOLE_FILL: bytes | None = None


def _schema_fields(local_dir: str) -> list[str] | None:
    try:
        with open(os.path.join(local_dir, "meta.json"), "rb") as f:
            return [str(x["name"]) for x in json.loads(f.read())["schema"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


# ---- ranges ------------------------------------------------------------------------------------


# ---- the directory -----------------------------------------------------------------------------

Reader = Callable[[int, int], bytes]  # bytes [start, end) of the split file


def write_pieces(dest_dir: str, footer: SplitFooter, reader: Reader, wanted: dict[str, list[Range]]) -> int:
    """Fetch the wanted ranges (file-relative) with coalesced reads of the split and write them in
    place; returns the number of reads."""
    by_name = {f.name: f for f in footer.files}
    absolute = [(by_name[n].offset + s, by_name[n].offset + e, n) for n, rs in wanted.items() for s, e in rs]
    reads = coalesce([(s, e) for s, e, _ in absolute], _gap([(s, e) for s, e, _ in absolute], _split_size(footer)))
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


def _split_size(footer: SplitFooter) -> int:
    """The split's size: its footer's end, or, for a footer read back from an extracted
    directory (which does not record it), where its last bundled file ends."""
    if footer.footer_end > 0:
        return footer.footer_end
    return max(f.offset + f.length for f in [*footer.files, footer.rows])


def _gap(ranges: list[Range], size: int) -> int:
    """Ranges closer than this are read in one request: GAP_BYTES (1/16 of a smaller split), but
    no more than 1/16 of the bytes wanted (at least MIN_GAP): a few small postings lists do not
    pull the megabytes between them."""
    wanted = sum(e - s for s, e in coalesce(ranges, 0))
    return min(_scaled(GAP_BYTES, size, 16), max(MIN_GAP, wanted // 16))


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
        f.write(json.dumps(state))  # (json.dump encodes in Python, json.dumps in C)
    os.replace(tmp, path)


def _load_state(local_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(local_dir, STATE_FILE), "rb") as f:
            state: dict[str, Any] = json.loads(f.read())
            return state
    except FileNotFoundError:
        return None


def missing_ranges(local_dir: str, name: str) -> list[Range]:
    """The byte ranges of an index file the directory does not hold yet (none: it is whole)."""
    state = _load_state(local_dir)
    return ranges(state["missing"].get(name) or []) if state is not None else []


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


MAX_ROUNDS = 6  # dependency levels of a fetch (open, dictionaries, postings; a longer end): then the rest whole


def _fetch_rounds(
    dest_dir: str, footer: SplitFooter, reader: Reader, state: dict[str, Any], needs_of: Callable[[], Needs | None]
) -> int:
    """Fetch, round after round, what `needs_of()` (asked again each round: it may need meta.json)
    lacks in the directory (_Plan), updating `state`; returns the number of ranged reads."""
    lengths = {f.name: f.length for f in footer.files}
    reads = 0
    for round_ in range(MAX_ROUNDS + 1):
        needs = needs_of()
        fields = _schema_fields(dest_dir) if not state["missing"].get("meta.json") else None
        plan = FetchPlan(dest_dir, state, lengths, len(fields) if fields is not None else None)
        wanted = plan.wanted(needs) if round_ < MAX_ROUNDS else plan.wanted(None)
        if not wanted:
            break
        reads += write_pieces(dest_dir, footer, reader, wanted)
        state["missing"] = {n: subtract(ranges(rs), wanted.get(n, [])) for n, rs in state["missing"].items()}
    return reads


def extract_partial(
    reader: Reader,
    footer: SplitFooter,
    dest_dir: str,
    where: str,
    query: IndexQuery,
    postings: bool = True,
    hot: Hotcache | None = None,
) -> bool:
    """Write the split's index files into dest_dir, fetching only what `query` needs (only what
    its term lookups read with `postings` False: query_needs), and the footer.json of a row store
    read by ranges. Every file is fetched whole when the query's needs cannot be told for sure;
    returns whether some parts were left out (a state file lists them).

    A round per dependency level (_Plan): with the writer's indexSections in the footer, the
    files' ends, the other files and the query's dictionaries in the first, its terms' postings,
    field norms and columns in the second; without, the offset tables are read first."""
    os.makedirs(dest_dir, exist_ok=True)
    for f in footer.files:
        with open(os.path.join(dest_dir, f.name), "wb") as fh:
            if HOLE_FILL is not None:
                fh.write(HOLE_FILL * f.length)
            else:
                fh.truncate(f.length)  # a hole: no disk blocks until written
    layout = _footer_layout(footer)
    state: dict[str, Any] = {
        "missing": {f.name: [(0, f.length)] if f.length else [] for f in footer.files},
        "sections": {},
        "tails": {},
    }
    if hot is not None:  # what opening reads is at hand already (format/hotcache.py)
        for f in footer.files:
            pieces = hot.pieces.get(f.name, [])
            if pieces:
                with open(os.path.join(dest_dir, f.name), "r+b") as part:
                    for start, data in pieces:
                        part.seek(start)
                        part.write(data)
                state["missing"][f.name] = subtract(
                    state["missing"][f.name], [(start, start + len(data)) for start, data in pieces]
                )
    if layout is not None:
        state["sections"] = {n: dict(e["sections"]) for n, e in layout["files"].items()}
        state["tails"] = {n: int(e["tail"]) for n, e in layout["files"].items()}
        known: list[Needs | None] = [read_needs(footer, layout["fields"], query, postings)]
    else:
        known = []

    def needs_of() -> Needs | None:
        if not known:
            fields = _schema_fields(dest_dir) if not any(state["missing"].get("meta.json", [])) else None
            if fields is None:
                return OPEN_ONLY  # meta.json first (with what opening reads)
            known.append(read_needs(footer, fields, query, postings))
        return known[0]

    _fetch_rounds(dest_dir, footer, reader, state, needs_of)
    if layout is not None and _schema_fields(dest_dir) != layout["fields"]:
        # the footer's layout does not describe these files: fetch the rest
        rest = {n: ranges(rs) for n, rs in state["missing"].items() if rs}
        write_pieces(dest_dir, footer, reader, rest)
        state["missing"] = {}
    with open(os.path.join(dest_dir, FOOTER_FILE), "w", encoding="utf-8") as out:
        out.write(json.dumps({**footer.raw, EXTRACTED_FROM: where, LAZY_ROWS: True}, ensure_ascii=False))
    _save_state(dest_dir, state)
    return any(state["missing"].values())


def _scaled(most: int, size: int, part: int) -> int:
    """`most` bytes, or 1/part of a smaller split (at least 16 KiB): on small splits, a request
    should not carry much more than the bytes needed."""
    return min(most, max(16 << 10, size // part))


def fetch_for_query(
    read_range: Reader, size: int, dest_dir: str, where: str, query: IndexQuery, postings: bool = True
) -> SplitFooter:
    """The split (`size` bytes, read by `read_range(start, end)`) extracted into dest_dir for
    `query` (extract_partial; its term lookups only with `postings` False), its row store left
    where it is (lazy_rows.py). The first read takes the split's last TAIL_GUESS bytes: its footer
    and, usually, the row store's IPC footer, which is kept for LazyRows at once."""
    from indextables_spark.core.split.cache.lazy_rows import (  # lazy: keeps this module free of pyarrow
        keep_ipc_tail,
        save_ipc_tail,
    )

    tail_start = max(0, size - _scaled(TAIL_GUESS, size, 64))
    tail = read_range(tail_start, size)

    def read(s: int, e: int) -> bytes:
        return tail[s - tail_start : e - tail_start] if s >= tail_start else read_range(s, e)

    footer = read_footer(RangeSource(size, read), where)
    hot = _hotcache(footer, read, where)
    extract_partial(read, footer, dest_dir, where, query, postings, hot)
    rows_footer = hot.pieces.get(ROWS_FILE) if hot is not None else None
    if rows_footer and rows_footer[-1][0] + len(rows_footer[-1][1]) == footer.rows.length:
        keep_ipc_tail(dest_dir, rows_footer[-1][1])
    elif not footer.is_companion and footer.rows.offset + footer.rows.length - 8 * 1024 >= tail_start:
        save_ipc_tail(dest_dir, read, footer.rows.offset, footer.rows.length, where)
    return footer


def _hotcache(footer: SplitFooter, read: Reader, where: str) -> Hotcache | None:
    """The split's hotcache (format/hotcache.py), read (usually from the first read's bytes
    already), or None for a split written without one."""
    span = hotcache_range(footer.raw)
    if span is None:
        return None
    lengths = {f.name: f.length for f in footer.files}
    lengths[ROWS_FILE] = footer.rows.length
    return parse_hotcache(footer.raw, read(*span), lengths, where)


_satisfied: dict[tuple[str, int, int, IndexQuery, bool], bool] = {}
_satisfied_lock = threading.Lock()


def _needs_of(local_dir: str, query: IndexQuery, postings: bool = True) -> Needs | None:
    fields = _schema_fields(local_dir)
    return read_needs(load_extracted_footer(local_dir), fields, query, postings) if fields is not None else None


def _lengths(local_dir: str, state: dict[str, Any]) -> dict[str, int]:
    return {n: os.path.getsize(os.path.join(local_dir, n)) for n in state["missing"]}


def satisfies(local_dir: str, query: IndexQuery | None, postings: bool = True) -> bool:
    """Whether the directory holds every byte a run of `query` reads (None: every byte of the
    index files; `postings` False: every byte its term lookups read): its terms' postings looked
    up in the dictionaries present. A complete directory has no state file: one stat."""
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
    try:
        fields = _schema_fields(local_dir)
        plan = FetchPlan(local_dir, state, _lengths(local_dir, state), len(fields) if fields is not None else None)
        ok = needs is not None and not plan.wanted(needs)
    except FileNotFoundError:
        return True  # evicted meanwhile: the caller's registration check fetches it again
    if ok:
        with _satisfied_lock:
            if len(_satisfied) > 4096:
                _satisfied.clear()
            _satisfied[key] = True
    return ok


def ensure(local_dir: str, reader: Reader, query: IndexQuery | None, postings: bool = True) -> int:
    """Fetch what `query` needs (None: everything; `postings` False: what its term lookups read)
    and the directory lacks, a round per dependency level (its terms' dictionaries, then their
    postings); the caller holds the split's locks. Returns the number of ranged reads."""
    state = _load_state(local_dir)
    if state is None:
        return 0
    needs = _needs_of(local_dir, query, postings) if query is not None else None
    footer = load_extracted_footer(local_dir)
    reads = _fetch_rounds(local_dir, footer, reader, state, lambda: needs)
    if reads:
        _save_state(local_dir, state)
    return reads


_ranges = ranges  # (the names tests and older callers use)
_vector_file = vector_file
__all__ = [
    "IndexRead",
    "Needs",
    "TOKEN_COUNT_BYTES",
    "intersect",
    "query_needs",
    "read_needs",
    "subtract",
    "term_key",
    "coalesce",
]
