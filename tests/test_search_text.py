"""Text filters on tokenized columns: narrowing through the index, exact results.

Differential at the split level (no Spark): for many contains/startswith/endswith/=/IN patterns
on `text` columns (tokenizers default, en_stem, whitespace), SplitReader.read returns exactly the
rows plain Python string matching returns, the index narrowing is a superset of them, and the
narrowing really narrows (selective patterns read far fewer rows than the split holds).
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from indextables_spark.config.options import Options
from indextables_spark.expr.model import EqualTo, In, StringContains, StringEndsWith, StringStartsWith
from indextables_spark.core.split.read.tantivy_query import build_query
from indextables_spark.expr import text
from indextables_spark.core.split.write.builder import SplitWriter
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.schema.types import ROW_FIELD
from indextables_spark.core.storage.local import LocalStorage

N_ROWS = 3000
VOCAB = [
    "Spark",
    "spark",
    "sparkling",
    "SQL",
    "sql-engine",
    "data",
    "lake",
    "search",
    "Tantivy",
    "index",
    "émoji🚀",
    "été",
    "naïve",
    "ΣΑΣ",
    "x_y",
    "a.b",
    "foo\u00a0bar",
    "12345",
    "v2",
    "park",
]
LONG_WORD = "supercalifragilisticexpialidocious" * 2  # 68 bytes: dropped by the default analyzer


def field(name, t="string"):
    return {"name": name, "type": t, "nullable": True, "metadata": {}}


SCHEMA = {
    "type": "struct",
    "fields": [
        field("id", "long"),
        field("body", "string"),
        field("stem", "string"),
        field("ws", "string"),
        field("longy", "string"),
    ],
}
OPTIONS = Options.of(
    {
        "indexing.typemap.body": "text",
        "indexing.typemap.stem": "text",
        "indexing.typemap.ws": "text",
        "indexing.typemap.longy": "text",
        "indexing.tokenizer.stem": "en_stem",
        "indexing.tokenizer.ws": "whitespace",
        # longy keeps the 40-byte limit, so its 68-byte words are dropped
        "indexing.tokenLength.legacy": "longy",
    }
)
SEPARATORS = [" ", " ", " ", ", ", "-", "  ", "\t", "/", "\u00a0"]


def sentence(rng: random.Random, long_words: bool = False) -> str:
    words = [rng.choice(VOCAB) for _ in range(rng.randint(0, 6))]
    if long_words and rng.random() < 0.2:
        words.insert(rng.randint(0, len(words)), LONG_WORD)
    out = ""
    for i, w in enumerate(words):
        out += (rng.choice(SEPARATORS) if i else "") + w
    return out


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    rng = random.Random(11)
    rows = {"id": [], "body": [], "stem": [], "ws": [], "longy": []}
    for i in range(N_ROWS):
        rows["id"].append(i)
        for c in ("body", "stem", "ws"):
            rows[c].append(None if rng.random() < 0.05 else sentence(rng))
        rows["longy"].append(sentence(rng, long_words=True))
    batch = pa.record_batch(
        {
            "id": pa.array(rows["id"], pa.int64()),
            **{c: pa.array(rows[c], pa.string()) for c in ("body", "stem", "ws", "longy")},
        }
    )
    root = tmp_path_factory.mktemp("text")
    storage = LocalStorage(str(root / "t"))
    w = SplitWriter(storage, SCHEMA, [], OPTIONS)
    w.write_batch(batch)
    (add,) = w.finish()
    reader = SplitReader(get_cache({"cache.disk.path": str(root / "cache")}).local_dir(storage, add))
    return reader, rows


def reference(values: list, f) -> set[int]:
    def ok(v):
        if v is None:
            return False
        if isinstance(f, StringContains):
            return f.value in v
        if isinstance(f, StringStartsWith):
            return v.startswith(f.value)
        if isinstance(f, StringEndsWith):
            return v.endswith(f.value)
        if isinstance(f, EqualTo):
            return v == f.value
        if isinstance(f, In):
            return v in [x for x in f.values if x is not None]
        raise AssertionError(f)

    return {i for i, v in enumerate(values) if ok(v)}


def patterns(rows: dict, column: str) -> list:
    """Fixed tricky patterns plus random substrings/prefixes/suffixes of stored values."""
    rng = random.Random(5)
    fixed = [
        "spark",
        "Spark",
        "park",
        "Spark ",
        " spark",
        "SQL",
        "sql-",
        "-engine",
        "l-e",
        "émoji",
        "🚀",
        "été",
        "ΣΑΣ",
        "σας",
        "x_y",
        "a.b",
        "foo\u00a0bar",
        "o\u00a0b",
        "123",
        "v2",
        "data lake",
        "a lake",
        "ta la",
        "Tantivy index",
        "ling",
        "",
        " ",
        ",",
        "nothing-like-this",
        LONG_WORD[:45],
        "califragil",
        "naïve",
    ]
    out = []
    for p in fixed:
        out += [StringContains(column, p), StringStartsWith(column, p), StringEndsWith(column, p)]
    values = [v for v in rows[column] if v]
    for _ in range(60):
        v = rng.choice(values)
        a = rng.randint(0, len(v))
        b = rng.randint(a, min(len(v), a + 20))
        out += [StringContains(column, v[a:b]), StringStartsWith(column, v[:b]), StringEndsWith(column, v[a:])]
    out += [EqualTo(column, rng.choice(values)) for _ in range(10)]
    out += [EqualTo(column, "Spark"), In(column, (values[0], values[1], None, "nope"))]
    return out


@pytest.mark.parametrize("column", ["body", "stem", "ws", "longy"])
def test_text_filters_exact_and_narrowed(split, column):
    reader, rows = split
    narrowed_any = 0
    for f in patterns(rows, column):
        want = reference(rows[column], f)
        got = [i for b in reader.read([f], None, ["id"]) for i in b.column(0).to_pylist()]
        assert sorted(got) == sorted(want), f"{f}: {len(got)} rows, expected {len(want)}"
        q, exact = build_query(reader.index.schema, [f], reader.specs)
        assert not exact  # a tokenized column is never exact: the raw filter is always re-checked
        if q is not None:
            s = reader.index.searcher()
            candidates = {r for r, _ in s.search(q, N_ROWS, order_by_field=ROW_FIELD).hits}
            assert want <= candidates, f"{f}: the index narrowing lost rows {sorted(want - candidates)[:5]}"
            if len(candidates) < N_ROWS / 2:
                narrowed_any += 1
    assert narrowed_any >= 20, f"{column}: only {narrowed_any} patterns narrowed through the index"


def test_fragments_need_fully_tokenized_columns(split):
    reader, _ = split
    specs = {s.name: s for s in reader.specs}
    # body has no token of 40+ bytes: fragments narrow through term regexes
    assert specs["body"].fully_tokenized and specs["ws"].fully_tokenized
    # longy holds 68-byte words its 40-byte limit drops: a fragment must not narrow
    assert not specs["longy"].fully_tokenized
    q_body, _ = build_query(reader.index.schema, [StringContains("body", "parkl")], reader.specs)
    q_long, _ = build_query(reader.index.schema, [StringContains("longy", "califragil")], reader.specs)
    assert q_body is not None and q_long is None


def test_pattern_terms_units():
    pt = text.pattern_terms("Data Lake", "default", False, False, True)
    # "Data" is cut on the left, "Lake" on the right: both are fragments (regexes)
    assert pt.terms == () and pt.regexes == ("(?s).*data", "(?s)lake.*")
    pt = text.pattern_terms("a Data Lake b", "default", False, False, True)
    assert pt.terms == ("data", "lake") and pt.regexes == ("(?s).*a", "(?s)b.*")
    assert text.pattern_terms("Running fast", "en_stem", True, True, True).terms == ("run", "fast")
    assert text.pattern_terms("Runn", "en_stem", False, False, True).empty  # stems: no fragments
    assert text.pattern_terms("été x", "default", False, False, True).regexes == ("(?s)x.*",)  # not "été"
    assert text.pattern_terms("été x", "default", True, False, True).terms == ("été",)
    assert text.pattern_terms("Foo Bar", "whitespace", False, False, True).regexes == ("(?s).*Foo", "(?s)Bar.*")
    assert text.max_token_bytes(pa.array(["ab cd", None, "é" * 30]), "default") == 60
    assert text.max_token_bytes(pa.array([None], pa.string()), "default") == 0


def test_has_long_token_agrees_with_max_token_bytes():
    """The regex check (builder's fullyTokenized) = max_token_bytes >= the tokenizer's limit."""
    import random

    rng = random.Random(3)
    alphabet = ["a", "é", "東", " ", ".", "-", "\t", "Z", "9"]
    for tok in ("default", "en_stem", "whitespace"):
        limit = text.MAX_TOKEN_BYTES[tok]
        for _ in range(200):
            n = rng.choice([5, 30, 50, 120])
            vals = pa.array(["".join(rng.choice(alphabet) for _ in range(n)) for _ in range(3)] + [None])
            assert text.has_long_token(vals, tok) == (text.max_token_bytes(vals, tok) >= limit), (tok, vals)
        assert text.has_long_token(pa.array(["x" * limit]), tok)
        assert not text.has_long_token(pa.array(["x" * (limit - 1), None]), tok)
        assert not text.has_long_token(pa.array([None], pa.string()), tok)
