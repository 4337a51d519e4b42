"""What a query reads of a split's index files, and which of those bytes a partly fetched
directory still lacks (cache/sparse.py fetches them and keeps the state).

`query_needs` tells, from the query's leaves (expr/fulltext.py), the fields whose sections it reads
whole, the terms whose postings (and positions) it reads, the fields whose norms it reads and the
fast field columns. `FetchPlan.wanted` turns that into byte ranges, as far as the bytes present
tell: first what opening the index reads (the ends of the files, which say where the rest lies),
then the query's term dictionaries, then, looked up in them (format/termdict.py), its terms'
postings and positions, the field norms and columns.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from indextables_spark.core.schema.types import (
    ROW_FIELD,
    ColumnSpec,
    IndexedField,
    with_fully_tokenized,
    with_truncated_terms,
)
from indextables_spark.core.split.format.bundle import SplitFooter
from indextables_spark.core.split.format.composite import TAIL_BYTES, columnar_dictionary, composite_sections
from indextables_spark.core.split.format.doc_mapping import specs_from_doc_mapping
from indextables_spark.core.split.format.hotcache import OPENED_BY_END, TOKEN_COUNT_BYTES, open_need
from indextables_spark.core.split.format.termdict import TermInfo, lookup_terms
from indextables_spark.core.split.format.vector_index import VECTOR_FILE_PREFIX
from indextables_spark.errors import IndexTablesError, SplitFormatError
from indextables_spark.expr.fulltext import NONE, PHRASE, TERM, QueryLeaf
from indextables_spark.expr.search_query import SearchQuery

Range = tuple[int, int]  # [start, end)


@dataclass(frozen=True)
class Needs:
    """What a query reads of a split's index (field ids of the split's schema).

    `fields`/`positions`: fields whose .term/.idx, and .pos, sections it reads whole (terms not
    known: prefix, regex, fuzzy, json...). `terms`: (field id, term keys) whose postings (and, for
    the fields of `term_positions`, positions) it reads, the field's dictionary whole. `norms`:
    fields whose field norms it reads (None: every field's); `columns`: the fast field columns it
    reads (None: every column). With `postings` False, term lookups only: the .term sections of
    `fields` and the token counts of their .idx sections."""

    fields: frozenset[int]
    positions: frozenset[int]
    postings: bool = True
    terms: tuple[tuple[int, frozenset[bytes]], ...] = ()
    term_positions: frozenset[int] = frozenset()
    norms: frozenset[int] | None = None
    columns: frozenset[str] | None = None


OPEN_ONLY = Needs(frozenset(), frozenset(), postings=False)  # what opening the index reads, nothing more
_RANGE_TYPES = ("i64", "u64", "f64", "bool")  # a range on such a fast field reads its column only
_SIGN = 1 << 63
_MASK = (1 << 64) - 1


# ---- what a query reads ------------------------------------------------------------------------


def _field_names(specs: Sequence[ColumnSpec]) -> list[str]:
    return [f.name for s in specs for f in s.indexed_fields] + [ROW_FIELD]


def term_key(ftype: str, value: Any) -> bytes | None:
    """The bytes a term of a `ftype` field has in its term dictionary (tantivy's Term value bytes:
    UTF-8 text; numbers mapped to a u64 that sorts like them, big-endian), or None when unknown."""
    if ftype == "text":
        return value.encode("utf-8") if isinstance(value, str) else None
    if ftype == "bool" and isinstance(value, bool):
        u = int(value)
    elif ftype == "i64" and isinstance(value, int) and not isinstance(value, bool) and -_SIGN <= value < _SIGN:
        u = (value & _MASK) ^ _SIGN
    elif ftype == "u64" and isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MASK:
        u = value
    elif ftype == "f64" and isinstance(value, float) and value == value:  # (not NaN)
        (bits,) = struct.unpack("<Q", struct.pack("<d", value))
        u = bits ^ _SIGN if not bits & _SIGN else ~bits & _MASK
    else:
        return None
    return u.to_bytes(8, "big")


def _leaf_terms(field: IndexedField, leaf: QueryLeaf) -> set[bytes] | None:
    """The dictionary keys a term or phrase leaf looks up, or None when they are not known for sure."""
    if leaf.kind not in (TERM, PHRASE) or not leaf.terms or leaf.path is not None:
        return None
    keys = {term_key(field.type, t) for t in leaf.terms}
    return None if None in keys else {k for k in keys if k is not None}


def query_needs(
    footer: SplitFooter, schema_fields: Sequence[str], query: SearchQuery, postings: bool = True
) -> Needs | None:
    """What `query` reads on this split (whose Tantivy schema has `schema_fields`, in field id
    order), or None when that cannot be told for sure. From the leaves of its analysis for the
    split's doc mapping (expr/search_query.py: the text AND the narrowing the split searches): a term
    or phrase whose terms are known reads those terms' postings (positions for a phrase), the
    field's dictionary and its field norms; a range or exists on a fast field its column; any
    other leaf the field's whole sections and norms. With `postings` False, what looking up the
    document frequency of its scored terms reads: the dictionaries of the scored leaves' fields."""
    try:
        specs = with_truncated_terms(specs_from_doc_mapping(footer.doc_mapping), footer.truncated_terms)
        specs = with_fully_tokenized(specs, footer.fully_tokenized)
        analysis = query.analysis(specs)
    except (IndexTablesError, ValueError):  # an invalid query fails when the split runs it; here: fetch whole
        return None
    names = _field_names(specs)
    fq = analysis.rows if postings else analysis.scored
    if fq is None:  # no text (and no narrowing this split searches): nothing of the index
        return Needs(frozenset(), frozenset(), postings=postings, norms=frozenset(), columns=frozenset())
    if names != list(schema_fields) or fq.ast is None:
        return None  # the split's index was not built from these specs in this order; a syntax error
    if not fq.fields - {""} <= set(names):
        return None  # a field the split lacks: the query fails when the split runs it
    if not postings:
        return Needs(frozenset(names.index(f) for f in fq.scored_fields if f), frozenset(), postings=False)
    by_name = {f.name: f for s in specs for f in s.indexed_fields}
    whole: set[int] = set()
    whole_positions: set[int] = set()
    norms: set[int] = set()
    terms: dict[int, set[bytes]] = {}
    term_positions: set[int] = set()
    columns: set[str] | None = {ROW_FIELD}  # the row ids of the hits
    for leaf in fq.leaves:
        if not leaf.field or leaf.kind == NONE:
            continue  # reads no field (all, empty)
        fid = names.index(leaf.field)
        field = by_name.get(leaf.field)
        keys = _leaf_terms(field, leaf) if field is not None else None
        if keys is not None:
            terms.setdefault(fid, set()).update(keys)
            norms.add(fid)
            if leaf.positions:
                term_positions.add(fid)
            continue
        fast_leaf = leaf.node == "exists" or (leaf.node == "range" and field is not None and field.type in _RANGE_TYPES)
        if fast_leaf and field is not None and field.fast and field.type != "json" and leaf.path is None:
            if columns is not None:
                columns.add(field.name)
            continue
        whole.add(fid)
        norms.add(fid)
        if leaf.positions:
            whole_positions.add(fid)
        if leaf.node in ("range", "exists"):
            columns = None  # (a json or not fast field: which columns it reads is not told here)
    return Needs(
        frozenset(whole),
        frozenset(whole_positions),
        terms=tuple(sorted((f, frozenset(ks)) for f, ks in terms.items())),
        term_positions=frozenset(term_positions),
        norms=frozenset(norms),
        columns=frozenset(columns) if columns is not None else None,
    )


@dataclass(frozen=True)
class IndexRead:
    """What a read with pushed filters asks of a split's index (ReadPlan.index_query): the query
    (None: none) and the columns of the filters the split turns into index queries (read/
    tantivy_query.py). A split cache may then hold only what those read (read_needs)."""

    query: SearchQuery | None
    columns: tuple[str, ...] = ()


IndexQuery = SearchQuery | IndexRead  # what a read promises to ask of a split's index (None elsewhere: anything)


def _matches(spec_name: str, column: str) -> bool:
    """Whether a filter on `column` may read the index fields of the column spec `spec_name`: the
    same name in any case, or one a struct path of the other (conservatively more than
    expr/values.lookup_spec finds)."""
    a, b = spec_name.lower(), column.strip("`").replace("``", "`").lower()
    return a == b or b.startswith(a + ".") or a.startswith(b + ".")


def filter_needs(footer: SplitFooter, schema_fields: Sequence[str], columns: Iterable[str]) -> Needs | None:
    """What the index queries of filters on `columns` read on this split, conservatively (a hole
    read gives wrong answers): every index field of each column read whole (its .term, .idx and
    .pos sections), its field norms and its fast field columns (every column of the .fast file
    for a json field: their names are paths); a column without index fields (checked on the rows
    only) nothing. None when the split's index does not line up with its doc mapping."""
    try:
        specs = specs_from_doc_mapping(footer.doc_mapping)
    except (IndexTablesError, ValueError):
        return None
    names = _field_names(specs)
    if names != list(schema_fields):
        return None
    wanted = list(columns)
    fids: set[int] = set()
    fast: set[str] | None = {ROW_FIELD}
    for spec in specs:
        if not any(_matches(spec.name, c) for c in wanted):
            continue
        for field in spec.indexed_fields:
            fids.add(names.index(field.name))
            if field.fast and fast is not None:
                if field.type == "json":
                    fast = None
                else:
                    fast.add(field.name)
    whole = frozenset(fids)
    return Needs(whole, whole, norms=whole, columns=frozenset(fast) if fast is not None else None)


def _union(a: Needs, b: Needs) -> Needs:
    terms: dict[int, frozenset[bytes]] = dict(a.terms)
    for fid, keys in b.terms:
        terms[fid] = terms.get(fid, frozenset()) | keys
    return Needs(
        a.fields | b.fields,
        a.positions | b.positions,
        postings=a.postings and b.postings,
        terms=tuple(sorted(terms.items())),
        term_positions=a.term_positions | b.term_positions,
        norms=a.norms | b.norms if a.norms is not None and b.norms is not None else None,
        columns=a.columns | b.columns if a.columns is not None and b.columns is not None else None,
    )


def read_needs(
    footer: SplitFooter, schema_fields: Sequence[str], query: IndexQuery, postings: bool = True
) -> Needs | None:
    """What a read of `query` (a SearchQuery, or an IndexRead: a query or none and the pushed
    filters' columns) reads on this split: query_needs, with filter_needs of the columns; None
    when either cannot be told."""
    if isinstance(query, SearchQuery):
        return query_needs(footer, schema_fields, query, postings)
    if not postings:  # term lookups: the query text's only (filters are not scored)
        if query.query is None:
            return Needs(frozenset(), frozenset(), postings=False)
        return query_needs(footer, schema_fields, query.query, False)
    base = query_needs(footer, schema_fields, query.query) if query.query is not None else None
    if query.query is not None and base is None:
        return None
    filtered = filter_needs(footer, schema_fields, query.columns)
    if filtered is None:
        return None
    return _union(base, filtered) if base is not None else filtered


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


def ranges(raw: Iterable[Sequence[int]]) -> list[Range]:
    return [(int(r[0]), int(r[1])) for r in raw]


def vector_file(name: str) -> bool:
    """A vector index file (format/vector_index.py): no query reads it, only a vector search,
    which fetches what it reads of it itself (file_pages.py) — on a vector table it is most of
    the split."""
    return name.startswith(VECTOR_FILE_PREFIX)


def _ext(name: str) -> str:
    return name.rsplit(".", 1)[-1] if "." in name else ""


WHOLE: list[TermInfo] = []  # term_infos: the dictionary cannot be read here (compared by identity)


class FetchPlan:
    """The byte ranges of a split's index files a query still lacks, given what its directory
    holds (the state's missing ranges): what opening the index reads (the files' ends, which
    tell where the rest lies), then what the query reads there (its dictionaries, then its
    terms' postings and positions, its field norms and fast field columns). `wanted()` asks for
    what can be told from the bytes present; the caller fetches it and asks again until nothing
    is wanted (one round per dependency level)."""

    def __init__(self, local_dir: str, state: dict[str, Any], lengths: dict[str, int], num_fields: int | None):
        self.dir = local_dir
        self.state = state
        self.lengths = lengths
        self.num_fields = num_fields
        self.missing = {n: ranges(rs) for n, rs in state["missing"].items()}
        self.out: dict[str, list[Range]] = {}

    # -- helpers -----------------------------------------------------------------------------

    def add(self, name: str, ranges: Iterable[Range]) -> None:
        got = intersect(self.missing.get(name, []), ranges)
        if got:
            self.out[name] = sorted(set(self.out.get(name, []) + got))

    def has(self, name: str, r: Range) -> bool:
        return not intersect(self.missing.get(name, []), [r])

    def read(self, name: str, start: int, end: int) -> bytes:
        with open(os.path.join(self.dir, name), "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def opened(self, name: str) -> bytes | None:
        """The file's end that opening it reads, when present (None: asked for; a whole file is
        asked for when its end does not parse)."""
        length = self.lengths[name]
        rs = self.missing.get(name, [])
        known = self.state.get("tails", {}).get(name)
        if known is not None:
            if not self.has(name, (int(known), length)):
                self.add(name, [(int(known), length)])
                return None
            return self.read(name, int(known), length)
        present_from = rs[-1][1] if rs else 0
        if present_from >= length:  # the end is missing: first a guess
            self.add(name, [(max(0, length - TAIL_BYTES), length)])
            return None
        tail = self.read(name, present_from, length)
        try:
            need = open_need(name, length, tail)
        except (ValueError, struct.error):
            self.add(name, [(0, length)])  # not a file we know: whole
            return None
        if need > len(tail):
            self.add(name, [(length - need, present_from)])
            return None
        self.state.setdefault("tails", {})[name] = length - need
        return tail[len(tail) - need :]

    def sections(self, name: str) -> dict[int, Range] | None:
        """Field id -> section of a composite file (the footer's layout, else its offset table)."""
        secs = self.state["sections"].get(name)
        if secs is None:
            tail = self.opened(name)
            if tail is None:
                return None
            if self.num_fields is None:
                return None
            try:
                parsed = composite_sections(self.lengths[name], tail, self.num_fields)
            except (ValueError, struct.error):
                self.add(name, [(0, self.lengths[name])])
                return None
            secs = self.state["sections"][name] = {str(k): list(v) for k, v in parsed.items()}
        elif self.opened(name) is None:
            return None
        return {int(k): (int(v[0]), int(v[1])) for k, v in secs.items()}

    def term_infos(self, segment: str, fid: int, keys: frozenset[bytes]) -> list[TermInfo] | None:
        """The TermInfos of the keys found in the field's dictionary; None while the dictionary
        is missing (asked for); WHOLE when it cannot be read here (an SSTable dictionary, a
        section that does not parse): the field's postings and positions are then read whole."""
        name = f"{segment}.term"
        if name not in self.lengths:
            return WHOLE
        secs = self.sections(name)
        if secs is None:
            return None
        if fid not in secs:
            return []  # the field has no terms in this segment
        s, e = secs[fid]
        if not self.has(name, (s, e)):
            self.add(name, [(s, e)])
            return None
        try:
            return list(lookup_terms(self.read(name, s, e), keys).values())
        except (ValueError, struct.error):
            return WHOLE

    # -- the plan ----------------------------------------------------------------------------

    def wanted(self, needs: Needs | None) -> dict[str, list[Range]]:
        if needs is None:
            return {n: rs for n, rs in self.missing.items() if rs}
        terms = dict(needs.terms) if needs.postings else {}
        whole = needs.fields | (frozenset(terms) if needs.postings else frozenset())
        for name, length in self.lengths.items():
            if not self.missing.get(name) or vector_file(name):
                continue
            ext = _ext(name)
            if ext not in OPENED_BY_END:
                self.add(name, [(0, length)])
                continue
            if ext == "term":
                secs = self.sections(name)
                if secs is not None:
                    self.add(name, [secs[f] for f in whole if f in secs])
            elif ext == "idx":
                secs = self.sections(name)
                if secs is None:
                    continue
                if not needs.postings:  # term lookups: the token counts only
                    self.add(
                        name,
                        [(s, min(e, s + TOKEN_COUNT_BYTES)) for s, e in (secs[f] for f in needs.fields if f in secs)],
                    )
                    continue
                self.add(name, [secs[f] for f in needs.fields if f in secs])
                for fid, keys in terms.items():
                    if fid not in secs or fid in needs.fields:
                        continue
                    s, e = secs[fid]
                    self.add(name, [(s, min(e, s + TOKEN_COUNT_BYTES))])
                    infos = self.term_infos(name[: -len(".idx")], fid, keys)
                    if infos is WHOLE:
                        self.add(name, [(s, e)])
                    elif infos is not None:
                        base = s + TOKEN_COUNT_BYTES
                        self.add(name, [(base + t.postings[0], base + t.postings[1]) for t in infos])
            elif ext == "pos":
                secs = self.sections(name)  # (its offset table: opening reads it)
                if secs is None or not needs.postings:
                    continue
                self.add(name, [secs[f] for f in needs.positions if f in secs])
                for fid in needs.term_positions:
                    if fid not in secs or fid in needs.positions:
                        continue
                    s, e = secs[fid]
                    infos = self.term_infos(name[: -len(".pos")], fid, terms.get(fid, frozenset()))
                    if infos is WHOLE:
                        self.add(name, [(s, e)])
                    elif infos is not None:
                        self.add(name, [(s + t.positions[0], s + t.positions[1]) for t in infos])
            elif ext == "fieldnorm":
                if not needs.postings:
                    self.opened(name)
                elif needs.norms is None:
                    self.add(name, [(0, length)])
                else:
                    secs = self.sections(name)
                    if secs is not None:
                        self.add(name, [secs[f] for f in needs.norms if f in secs])
            elif ext == "fast":
                tail = self.opened(name)
                if tail is None or not needs.postings:
                    continue
                if needs.columns is None:
                    self.add(name, [(0, length)])
                    continue
                found = self._columns(name, tail, needs.columns)
                self.add(name, found if found is not None else [(0, length)])
            else:  # store: opening reads its skip index; a query no block
                self.opened(name)
        return {n: rs for n, rs in self.out.items() if rs}

    def _columns(self, name: str, tail: bytes, columns: frozenset[str]) -> list[Range] | None:
        """The byte ranges of the named columns in a fast field file from its column dictionary
        (an SSTable of `name \\0 type` -> range: format/composite.py); None when a column is not
        found or the dictionary does not parse (then the file is fetched whole)."""

        from indextables_spark.core.split.reference.sstable import read_sstable_ranges  # lazy: numpy, zstandard

        try:
            entries = read_sstable_ranges(columnar_dictionary(tail), self.dir, name)
        except (ValueError, struct.error, SplitFormatError):
            return None
        by_name: dict[str, list[Range]] = {}
        for key, s, e in entries:
            col, sep, _ = key.partition(b"\x00")
            if sep and 0 <= s <= e <= self.lengths[name]:
                by_name.setdefault(col.decode("utf-8", "replace"), []).append((int(s), int(e)))
        if not all(c in by_name for c in columns):
            return None
        return [r for c in columns for r in by_name[c]]
