"""The nearest-neighbour index kinds a vector column may declare, and their parameters: the option
`indexing.vector.<col>` = `<dimensions>[,<metric>[,<kind>[,<name>=<value>...]]]` (parsed in
indexing.py; built and searched in vector_index.py). Free of numpy and faiss: the option checks
of every route import it.

- `ivf_pq` (the default): a faiss `IndexIVFPQFastScan`, an inverted file of `nlist` lists over
  product-quantizer codes of `m` sub-vectors of 4 bits (m / 2 bytes a vector; by default m = the
  dimensions: half a byte a dimension, 64 bytes for 128), no float32 copy: its candidates are
  re-ranked exactly from the split's float32 vectors file. `nlist` defaults to sqrt(n) per
  split (n: the split's vectors), at most n / 39 (faiss's fewest training points a list).
- `hnsw`: a faiss `IndexHNSWFlat`, the graph with its own float32 copy of the vectors (what every
  split written before the kinds existed holds: a footer without `kind` reads as it).

Which is the default, and why: bench/vector_index_choice.py (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from indextables_spark.errors import InvalidOptionError


@dataclass(frozen=True)
class IndexKind:
    """One kind: its parameters (name -> default; None: chosen per split from its vectors),
    whether the faiss index holds float32 vectors of its own (else codes only) and whether it is
    trained on the split's vectors (its quantizers)."""

    name: str
    params: Mapping[str, int | None]
    holds_vectors: bool
    trains: bool
    what: str  # in words, for errors and docs


KINDS: dict[str, IndexKind] = {
    "ivf_pq": IndexKind(
        "ivf_pq",
        {"nlist": None, "m": None},
        False,
        True,
        "an inverted file over 4-bit product-quantizer codes (faiss IndexIVFPQFastScan)",
    ),
    "hnsw": IndexKind(
        "hnsw",
        {"m": 16, "ef_construction": 128},
        True,
        False,
        "an HNSW graph with its own float32 vectors (faiss IndexHNSWFlat)",
    ),
}
DEFAULT_KIND = "ivf_pq"
LEGACY_KIND = "hnsw"  # a split footer's vector index without `kind`
MAX_PARAM = 1 << 20


def parse_kind(parts: list[str], key: str, raw: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """(kind, its given parameters sorted by name) of an option's parts after the metric:
    `<kind>[,<name>=<value>...]` (none: the default kind); InvalidOptionError naming the key."""
    if not parts:
        return DEFAULT_KIND, ()
    name = parts[0]
    kind = KINDS.get(name)
    if kind is None:
        raise InvalidOptionError(
            f"option {key}={raw!r}: unknown vector index kind {name!r} (expected one of {', '.join(KINDS)}; "
            f"e.g. '768,cosine,{DEFAULT_KIND}')"
        )
    params: dict[str, int] = {}
    for part in parts[1:]:
        param, sep, value = part.partition("=")
        param = param.strip()
        if not sep or param not in kind.params:
            raise InvalidOptionError(
                f"option {key}={raw!r}: {part!r} is not a parameter of {name} (expected <name>=<value>, names: "
                f"{', '.join(kind.params)})"
            )
        try:
            number = int(value.strip())
        except ValueError:
            number = 0
        if not 1 <= number <= MAX_PARAM or param in params:
            raise InvalidOptionError(
                f"option {key}={raw!r}: {param} must be given once, a whole number 1-{MAX_PARAM}, got {value.strip()!r}"
            )
        params[param] = number
    return name, tuple(sorted(params.items()))


def check_params(kind: str, params: Mapping[str, int], dims: int, key: str) -> None:
    """The parameters fit the dimensions (InvalidOptionError naming the option key)."""
    m = params.get("m")
    if kind == "ivf_pq" and m is not None and dims % m:
        raise InvalidOptionError(f"option {key}: ivf_pq m={m} must divide the {dims} dimensions")


def spec_text(dims: int, metric: str, kind: str | None, params: tuple[tuple[str, int], ...]) -> str:
    """The option value that declares this (the inverse of the parse)."""
    given = [f"{n}={v}" for n, v in params]
    return ",".join([str(dims), metric, *([kind] if kind else []), *given])
