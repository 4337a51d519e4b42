"""Issue #37's term dictionary transcoder (core/split/reference/transcode.py): the reference's SSTable
term dictionaries rewritten as tantivy-py's FST ones.

- the 17 fixture tables IndexTables4Spark v0.5.4 wrote: every split's `.term` file transcodes, then
  every term query on every indexed field returns exactly the documents holding the value (they all
  fail on the untouched split);
- a generated index of more than 500k terms written by tantivy-py: its `.term` file rewritten the
  reference's way by an independent writer (tests/sstable_writer.py: zstd blocks, multi-block
  indexes) and transcoded back is byte for byte tantivy-py's own, and queries of every kind give the
  same hits and scores;
- one field transcoded alone, the others kept byte for byte;
- damaged SSTables raise SplitFormatError naming the split and the field, never return terms.
"""

from __future__ import annotations

import glob
import json
import os
import random
import shutil
import struct
from pathlib import Path

import pytest
import sstable_writer as sw
import tantivy

from indextables_spark.core.split.reference.quickwit import check_file_footer, extract_bundle
from indextables_spark.core.split.reference.sstable import read_sstable_keys
from indextables_spark.core.split.format.composite import DICT_TYPE_FST, DICT_TYPE_SSTABLE
from indextables_spark.core.split.reference.transcode import (
    term_dict_types,
    transcode_index,
    transcode_term_file,
)
from indextables_spark.errors import SplitFormatError

ROOT = Path(__file__).parent / "data" / "reference_v0.5.4"
SPLITS = sorted(glob.glob(str(ROOT / "**" / "*.split"), recursive=True))
SSTABLE_REFUSED = "compiled tantivy with Fst, but got SSTable"
DOCS = 170_000  # about 4 terms a document over the four fields


def term_file(index_dir: str | Path) -> str:
    (name,) = [n for n in os.listdir(index_dir) if n.endswith(".term")]
    return os.path.join(index_dir, name)


def replace_file(path: str | Path, data: bytes) -> None:
    """Write a new file over path by renaming: tantivy maps index files, and rewriting one in place
    under a live mapping kills the process (SIGBUS)."""
    tmp = f"{path}.new"
    Path(tmp).write_bytes(data)
    os.replace(tmp, path)


def field_names(index_dir: str | Path) -> dict[int, str]:
    with open(os.path.join(index_dir, "meta.json")) as f:
        return {i: x["name"] for i, x in enumerate(json.load(f)["schema"])}


def searcher(index_dir: str | Path) -> tuple[tantivy.Index, tantivy.Searcher]:
    index = tantivy.Index.open(str(index_dir))
    index.reload()
    return index, index.searcher()


# ---- the fixture tables ------------------------------------------------------------------------


def test_fixture_splits_are_all_there():
    assert len(SPLITS) == 176 and len({Path(s).relative_to(ROOT).parts[0] for s in SPLITS}) == 17


def test_fixture_splits_transcode_and_every_term_query_is_exact(tmp_path):
    checked = 0
    for k, split in enumerate(SPLITS):
        where = str(Path(split).relative_to(ROOT))
        d = tmp_path / str(k)
        extract_bundle(split, str(d), where)
        path = term_file(d)
        data = Path(path).read_bytes()
        names = field_names(d)
        assert set(term_dict_types(data, where).values()) == {DICT_TYPE_SSTABLE}
        index, s = searcher(d)
        docs = [(addr, s.doc(addr).to_dict()) for _, addr in s.search(tantivy.Query.all_query(), 10_000).hits]
        assert docs
        first_field, first_values = next(iter(docs[0][1].items()))
        with pytest.raises(ValueError, match=SSTABLE_REFUSED):
            s.search(tantivy.Query.term_query(index.schema, first_field, first_values[0]), 10)

        out = transcode_term_file(data, None, names, where)
        assert set(term_dict_types(out, where).values()) == {DICT_TYPE_FST}
        replace_file(path, out)
        check_file_footer(path, where)  # the footer's CRC is right
        index, s = searcher(d)
        for _, doc in docs:
            for name, values in doc.items():
                for value in values:
                    got = {
                        (a.segment_ord, a.doc)
                        for _, a in s.search(tantivy.Query.term_query(index.schema, name, value), 10_000).hits
                    }
                    want = {(a.segment_ord, a.doc) for a, other in docs if value in other.get(name, [])}
                    assert got == want, (where, name, value)
                    checked += 1
    assert checked > 1000


def test_transcode_index_field_by_field_under_a_live_index(tmp_path):
    split = sorted((ROOT / "02_five_appends").glob("*.split"))[0]
    extract_bundle(str(split), str(tmp_path), "s2")
    index, s = searcher(tmp_path)  # maps the files: they must be replaced, not rewritten
    (_, addr), *_ = s.search(tantivy.Query.all_query(), 1).hits
    doc = s.doc(addr).to_dict()
    assert transcode_index(str(tmp_path), {"text"}, "s2") == ["text"]
    assert s.doc(addr).to_dict() == doc  # the old mapping still reads
    index, s = searcher(tmp_path)
    assert s.search(tantivy.Query.term_query(index.schema, "text", doc["text"][0]), 10).count >= 1
    with pytest.raises(ValueError, match=SSTABLE_REFUSED):
        s.search(tantivy.Query.term_query(index.schema, "id", doc["id"][0]), 10)
    assert transcode_index(str(tmp_path), None, "s2") == ["id", "score"]
    assert transcode_index(str(tmp_path), None, "s2") == []
    index, s = searcher(tmp_path)
    assert s.search(tantivy.Query.term_query(index.schema, "id", doc["id"][0]), 10).count == 1
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".transcoding")]


def test_every_segment_is_transcoded(tmp_path):
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("a", stored=True)
    sb.add_integer_field("n", stored=True, indexed=True)
    index = tantivy.Index(sb.build(), str(tmp_path))
    writer = index.writer(heap_size=50_000_000, num_threads=1)
    for batch in range(3):  # a commit each: three segments
        for i in range(200):
            writer.add_document(tantivy.Document(a=f"w{i % 7} b{batch}", n=batch * 1000 + i))
        writer.commit()
    writer.wait_merging_threads()
    paths = sorted(tmp_path.glob("*.term"))
    assert len(paths) == 3
    originals = [p.read_bytes() for p in paths]
    for p, data in zip(paths, originals):
        replace_file(p, sw.term_file_as_reference(data))
    assert transcode_index(str(tmp_path), None, "segments") == ["a", "n"]
    assert [p.read_bytes() for p in paths] == originals


def test_a_file_that_is_not_a_composite_file_is_refused():
    split = sorted((ROOT / "01_single_write").glob("*.split"))[0]
    with pytest.raises(SplitFormatError, match="split s1: the .term file does not parse"):
        term_dict_types(Path(split).read_bytes()[:100], "s1")


def test_sstable_code_matches_tantivys_own_sstables(tmp_path):
    """tantivy-py writes SSTables too: the dictionary of a fast string column (tantivy-columnar, a
    VoidSSTable: keys, no values; the same Writer with zstd and the v3 index). The tests' writer
    reproduces it byte for byte, and the product's reader reads it, checking its index."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("s", stored=False, fast=True, tokenizer_name="raw", index_option="basic")
    index = tantivy.Index(sb.build(), str(tmp_path))
    writer = index.writer(heap_size=100_000_000, num_threads=1)
    rnd = random.Random(3)
    values = {f"{rnd.getrandbits(96):024x}" for _ in range(60_000)}
    for v in values:
        writer.add_document(tantivy.Document(s=v))
    writer.commit()
    writer.wait_merging_threads()
    (fast,) = tmp_path.glob("*.fast")
    data = fast.read_bytes()
    (json_len,) = struct.unpack_from("<I", data, len(data) - 8)
    body = data[: len(data) - 8 - json_len]  # [columns][column directory][u64 its length][u32 rows][u32 version][magic]
    (directory_len,) = struct.unpack_from("<Q", body, len(body) - 20)
    column = body[: len(body) - 20 - directory_len]  # the only column: [dictionary][values][u32 dictionary length]
    (dictionary_len,) = struct.unpack_from("<I", column, len(column) - 4)
    dictionary = column[:dictionary_len]
    keys = sorted(v.encode() for v in values)
    blocks = sw.sstable_blocks_void(dictionary)
    assert len(blocks) > 2 * sw.STORE_BLOCK_LEN and all(compressed for _, _, compressed in blocks)
    assert sw.write_sstable(keys) == dictionary
    assert read_sstable_keys(dictionary, "col", "s") == keys
    index_offset, _, _ = struct.unpack_from("<QQI", dictionary, len(dictionary) - 20)
    (fst_len,) = struct.unpack_from("<Q", dictionary, len(dictionary) - 28)
    meta = index_offset + fst_len + 8 + 36  # the second block address meta (blocks 128..255)
    damaged = dictionary[: meta + 16] + struct.pack("<Q", 129) + dictionary[meta + 24 :]  # its first ordinal
    with pytest.raises(SplitFormatError, match="split col: field 's': SSTable: the index puts block 128"):
        read_sstable_keys(damaged, "col", "s")


def test_odd_keys_and_an_empty_dictionary(tmp_path):
    """The empty key, keys over 15 bytes (LEB128 keep/add), non-ASCII and JSON terms round-trip;
    a dictionary of no terms (tantivy-py writes no section for a field without terms, the
    reference might) transcodes to one tantivy-py opens."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("a", stored=True)
    sb.add_json_field("j", stored=True)
    sb.add_text_field("long", stored=True, tokenizer_name="raw")
    index = tantivy.Index(sb.build(), str(tmp_path))
    writer = index.writer(heap_size=50_000_000, num_threads=1)
    writer.add_document(tantivy.Document(a="x y", j={"k": "v", "n": 3, "f": 1.5, "b": True}, long="L" * 300 + "é" * 40))
    writer.add_document(tantivy.Document(a="", long=""))
    writer.commit()
    writer.wait_merging_threads()
    path = term_file(tmp_path)
    original = Path(path).read_bytes()
    reference = sw.term_file_as_reference(original)
    assert transcode_term_file(reference, None, field_names(tmp_path), "odd") == original
    sections, footer = sw.read_composite(reference)
    empty = sw.write_sstable([]) + struct.pack("<I", 2)
    no_terms = sw.write_composite([(f, x, empty if f == 0 else s) for f, x, s in sections], footer)
    replace_file(path, transcode_term_file(no_terms, None, field_names(tmp_path), "odd"))
    index, s = searcher(tmp_path)
    assert s.search(tantivy.Query.term_query(index.schema, "a", "x"), 10).count == 0
    assert s.search(tantivy.Query.term_query(index.schema, "long", "L" * 300 + "é" * 40), 10).count == 1
    assert s.search(tantivy.Query.term_query(index.schema, "long", ""), 10).count == 1


# ---- a large generated index -------------------------------------------------------------------


class Big:
    """A tantivy-py index of DOCS documents (id i64, title tokenized with positions, tag raw, score
    f64), its `.term` file and that file written the reference's way."""

    def __init__(self, root: Path):
        self.dir = root / "tantivy"
        self.dir.mkdir()
        sb = tantivy.SchemaBuilder()
        sb.add_integer_field("id", stored=True, indexed=True, fast=True)
        sb.add_text_field("title", stored=True, index_option="position")
        sb.add_text_field("tag", stored=True, tokenizer_name="raw")
        sb.add_float_field("score", stored=True, indexed=True, fast=True)
        self.schema = sb.build()
        index = tantivy.Index(self.schema, str(self.dir))
        writer = index.writer(heap_size=400_000_000, num_threads=1)
        rnd = random.Random(37)
        words = [f"w{n}" for n in range(3000)]
        self.titles, self.tags, self.scores = [], [], []
        for i in range(DOCS):
            title = " ".join(rnd.choices(words, k=6)) + f" t{i}"
            tag = f"tag/{(i * 7919) % DOCS:06d}/{rnd.choice(['red', 'green', 'blue'])}"
            score = i * 0.25 + rnd.random() / 8
            self.titles.append(title)
            self.tags.append(tag)
            self.scores.append(score)
            writer.add_document(tantivy.Document(id=i, title=title, tag=tag, score=score))
        writer.commit()
        writer.wait_merging_threads()
        self.names = field_names(self.dir)
        self.ids = {v: k for k, v in self.names.items()}
        self.original = Path(term_file(self.dir)).read_bytes()
        self.reference = sw.term_file_as_reference(self.original)

    def copy(self, name: str, term_bytes: bytes) -> Path:
        d = self.dir.parent / name
        shutil.copytree(self.dir, d)
        replace_file(term_file(d), term_bytes)
        return d

    def with_section(self, field: str, section: bytes) -> bytes:
        """The reference-like .term file with one field's section replaced (offsets and CRC redone)."""
        sections, footer = sw.read_composite(self.reference)
        fid = self.ids[field]
        return sw.write_composite([(f, x, section if f == fid else s) for f, x, s in sections], footer)

    def sstable(self, field: str) -> bytes:
        """The field's SSTable in the reference-like file (its u32 type dropped)."""
        (section,) = [s for f, _, s in sw.read_composite(self.reference)[0] if f == self.ids[field]]
        return section[:-4]


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    return Big(tmp_path_factory.mktemp("transcode"))


def test_generated_reference_file_has_zstd_blocks_and_multi_block_indexes(big):
    assert set(term_dict_types(big.reference, "big").values()) == {DICT_TYPE_SSTABLE}
    total = 0
    for field in big.names.values():
        sst = big.sstable(field)
        blocks = sw.sstable_blocks(sst)
        index_offset, num_terms, version = struct.unpack_from("<QQI", sst, len(sst) - 20)
        (fst_len,) = struct.unpack_from("<Q", sst, len(sst) - 28)
        assert (sum(b[3] for b in blocks), version) == (num_terms, 3)
        assert len(blocks) > 1 and fst_len > 0  # a multi-block index
        total += num_terms
    assert total >= 500_000
    tag_blocks = sw.sstable_blocks(big.sstable("tag"))
    assert len(tag_blocks) > 2 * sw.STORE_BLOCK_LEN  # several metas in the block address store
    assert any(b[2] for b in tag_blocks) and sum(b[2] for b in tag_blocks) > len(tag_blocks) // 2


def test_round_trip_is_byte_identical_to_tantivy_py(big):
    assert transcode_term_file(big.reference, None, big.names, "big") == big.original


def test_transcoded_index_gives_the_same_hits_and_scores(big):
    transcoded = big.copy("transcoded", transcode_term_file(big.reference, None, big.names, "big"))
    reference = big.copy("reference", big.reference)
    index_a, a = searcher(big.dir)
    index_b, b = searcher(transcoded)
    schema = index_a.schema
    rnd = random.Random(5)
    queries = []
    for _ in range(40):
        i = rnd.randrange(DOCS)
        words = big.titles[i].split()
        j = rnd.randrange(len(words) - 1)
        queries += [
            tantivy.Query.term_query(schema, "id", i),
            tantivy.Query.term_query(schema, "tag", big.tags[i]),
            tantivy.Query.term_query(schema, "score", big.scores[i]),
            tantivy.Query.term_query(schema, "title", words[j]),
            tantivy.Query.phrase_query(schema, "title", words[j : j + 2]),
            index_a.parse_query(f"{words[0]} AND {words[1]}", ["title"]),
            index_a.parse_query(f'title:{words[2]} OR tag:"{big.tags[i]}"', ["title"]),
            tantivy.Query.regex_query(schema, "tag", f"tag/{i % 1000:03d}.*"),
            tantivy.Query.fuzzy_term_query(schema, "title", words[j], distance=1),
            tantivy.Query.range_query(schema, "id", tantivy.FieldType.Integer, i, i + 50, use_inverted_index=True),
            tantivy.Query.range_query(
                schema, "score", tantivy.FieldType.Float, big.scores[i], big.scores[i] + 20, use_inverted_index=True
            ),
        ]
    hits = 0
    for q in queries:
        ra, rb = a.search(q, 100), b.search(q, 100)
        assert (ra.count, [(s, x.segment_ord, x.doc) for s, x in ra.hits]) == (
            rb.count,
            [(s, x.segment_ord, x.doc) for s, x in rb.hits],
        ), q
        hits += ra.count
    assert len(queries) >= 400 and hits > 10_000
    index_r, r = searcher(reference)
    with pytest.raises(ValueError, match=SSTABLE_REFUSED):
        r.search(tantivy.Query.term_query(schema, "tag", big.tags[0]), 10)


def test_one_field_transcoded_leaves_the_others_byte_for_byte(big):
    out = transcode_term_file(big.reference, {big.ids["title"]}, big.names, "big")
    types = term_dict_types(out, "big")
    assert types == {f: DICT_TYPE_FST if n == "title" else DICT_TYPE_SSTABLE for f, n in big.names.items()}
    original = {f: s for f, _, s in sw.read_composite(big.original)[0]}
    reference = {f: s for f, _, s in sw.read_composite(big.reference)[0]}
    for f, _, s in sw.read_composite(out)[0]:
        assert s == (original[f] if big.names[f] == "title" else reference[f])
    d = big.copy("title_only", out)
    check_file_footer(term_file(d), "title_only")
    index, s = searcher(d)
    word = big.titles[7].split()[0]
    want = sum(1 for t in big.titles if word in t.split())
    assert s.search(tantivy.Query.term_query(index.schema, "title", word), 10).count == want
    assert s.search(tantivy.Query.phrase_query(index.schema, "title", big.titles[7].split()[:2]), 10).count >= 1
    with pytest.raises(ValueError, match=SSTABLE_REFUSED):
        s.search(tantivy.Query.term_query(index.schema, "tag", big.tags[7]), 10)
    # an FST section asked for again is left alone; nothing to do gives the very same bytes back
    assert transcode_term_file(out, {big.ids["title"]}, big.names, "big") is out


# ---- damaged dictionaries ----------------------------------------------------------------------

FAULT = r"split s1: field 'tag'"


def refuses(big: Big, data: bytes, match: str = FAULT) -> None:
    with pytest.raises(SplitFormatError, match=match):
        transcode_term_file(data, None, big.names, "s1")


def patched(sst: bytes, at: int, value: bytes) -> bytes:
    return sst[:at] + value + sst[at + len(value) :]


def test_flipped_bytes_fail_the_checksum_naming_the_field(big):
    (start, end) = [(s, e) for f, (s, e) in _offsets(big.reference).items() if f == big.ids["tag"]][0]
    rnd = random.Random(11)
    for _ in range(20):
        at = rnd.randrange(start, end - 4)  # the dictionary, not its type (an unknown type is refused as such)
        data = bytearray(big.reference)
        data[at] ^= 1 << rnd.randrange(8)
        with pytest.raises(SplitFormatError, match=FAULT + ".*CRC-32"):
            transcode_term_file(bytes(data), {big.ids["tag"]}, big.names, "s1")


def test_damaged_blocks_are_refused(big):
    sst = big.sstable("tag")
    blocks = sw.sstable_blocks(sst)
    size = len(sst)
    index_offset, num_terms, _ = struct.unpack_from("<QQI", sst, size - 20)
    compressed = next(b for b in blocks if b[2])
    # truncated: the whole dictionary, or one block cut short
    refuses(big, big.with_section("tag", sst[: size // 2] + struct.pack("<I", 2)))
    cut = sst[: compressed[1] - 7] + sst[compressed[1] :]
    refuses(big, big.with_section("tag", cut + struct.pack("<I", 2)))
    # a broken zstd frame: its magic number, or a block that says compressed and is not
    refuses(big, big.with_section("tag", patched(sst, compressed[0] + 5, b"\x00") + b"\x02\0\0\0"), FAULT + ".*zstd")
    small = sw.write_sstable([b"a", b"b"], [(b"a", 1, 0, 3, 0, 0), (b"b", 1, 3, 5, 0, 0)])
    refuses(big, big.with_section("tag", patched(small, 4, b"\x01") + b"\x02\0\0\0"), FAULT + ".*zstd")
    # the footer: terms counted wrong, another version
    wrong = patched(sst, size - 12, struct.pack("<Q", num_terms + 1))
    refuses(big, big.with_section("tag", wrong + b"\x02\0\0\0"), FAULT + ".*footer says")
    refuses(big, big.with_section("tag", patched(sst, size - 4, struct.pack("<I", 2)) + b"\x02\0\0\0"), "version 2")
    # a dictionary type tantivy does not know
    refuses(big, big.with_section("tag", sst + struct.pack("<I", 7)), FAULT + ": unknown term dictionary type 7")
    # the index: a block address moved
    (fst_len,) = struct.unpack_from("<Q", sst, size - 28)
    meta = index_offset + fst_len + 8  # the first block address meta: u64 offset, u64 start ...
    refuses(big, big.with_section("tag", patched(sst, meta + 8, struct.pack("<Q", 1)) + b"\x02\0\0\0"), "index")


def test_malformed_values_and_keys_are_refused(big):
    terms = sw.read_fst_section([s for f, _, s in sw.read_composite(big.original)[0] if f == big.ids["tag"]][0])
    terms = terms[:3000]
    keys = [t[0] for t in terms]
    # keys out of order (two neighbours swapped)
    swapped = keys[:100] + [keys[101], keys[100]] + keys[102:]
    bad = sw.write_sstable(swapped, terms, check_order=False)
    refuses(big, big.with_section("tag", bad + b"\x02\0\0\0"), FAULT + ".*out of order")
    # postings not contiguous: every term from the second block on moved 5 bytes further
    good = sw.write_sstable(keys, terms)
    second = sw.sstable_blocks(good)[0][3]
    moved = terms[:second] + [(k, df, ps + 5, pe + 5, qs, qe) for k, df, ps, pe, qs, qe in terms[second:]]
    refuses(big, big.with_section("tag", sw.write_sstable(keys, moved) + b"\x02\0\0\0"), FAULT + ".*contiguous")
    # VInts without their last byte's stop bit, in an uncompressed block
    small = sw.write_sstable(keys[:3], terms[:3])
    values = len(sw.term_info_values(terms[:3]))
    broken = small[:5] + bytes(b & 0x7F for b in small[5 : 5 + values]) + small[5 + values :]
    refuses(big, big.with_section("tag", broken + b"\x02\0\0\0"))
    # the control: the same writer's well-formed dictionary goes through
    ok = big.with_section("tag", good + b"\x02\0\0\0")
    assert term_dict_types(transcode_term_file(ok, None, big.names, "s1"), "s1")[big.ids["tag"]] == DICT_TYPE_FST


def _offsets(data: bytes) -> dict[int, tuple[int, int]]:
    """Field id -> [start, end) of its section in a composite file (the test's own parse)."""
    sections, _ = sw.read_composite(data)
    out, pos = {}, 0
    for f, _, s in sections:
        out[f] = (pos, pos + len(s))
        pos += len(s)
    return out
