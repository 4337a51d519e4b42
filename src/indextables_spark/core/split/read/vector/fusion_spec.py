"""What a hybrid search's `fusion` argument is, and its one parse (`parse_fusion`) shared by every
route: IndexTable.search / search_many / explain, it.search_join and its SQL form, the Spark read
options (`fusion`, `fusion.*`) and the SQL table functions. Free of numpy (the Spark driver's option
checks import it); the fusion itself is fusion.py.

The default, on every route: a search given both a full-text query and a query vector fuses their
two rankings by reciprocal rank fusion (`"rrf"`, as LanceDB's hybrid search); `"none"` asks for the
other meaning, the query only selects the rows the vector search ranks (as a `where` does)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, TypeAlias, Union

from indextables_spark.errors import InvalidOptionError

FUSIONS = ("rrf", "weighted")
FusionMethod = Literal["rrf", "weighted", "none"]
DEFAULT_FUSION: Literal["rrf", "weighted"] = "rrf"


@dataclass(frozen=True)
class Fusion:
    """How a hybrid search combines its full-text and vector rankings (fusion.py): `rrf`
    (reciprocal rank fusion, 1 / (rrf_k + rank) summed) or `weighted` (text_weight x the min-max
    scaled BM25 + (1 - text_weight) x the scaled closeness), each ranking cut to its `window` best."""

    method: Literal["rrf", "weighted"] = "rrf"
    rrf_k: int = 60
    text_weight: float = 0.5
    window: int | None = None  # the best rows of each ranking fused (None: max(k, 50) of each)

    def __post_init__(self) -> None:
        if self.method not in FUSIONS:
            raise InvalidOptionError(f"fusion {self.method!r}: expected one of {FUSIONS} (or 'none')")
        if self.rrf_k < 1:
            raise InvalidOptionError(f"fusion rrf_k={self.rrf_k}: expected a positive integer")
        if not 0.0 <= self.text_weight <= 1.0:
            raise InvalidOptionError(f"fusion text_weight={self.text_weight}: expected a weight in [0, 1]")
        if self.window is not None and self.window < 1:
            raise InvalidOptionError(f"fusion window={self.window}: expected a positive integer")

    def window_for(self, k: int) -> int:
        return self.window if self.window is not None else max(k, 50)


# A `fusion` argument: a method name, a Fusion, or a mapping of Fusion's fields (method, rrf_k,
# text_weight, window; method "none" too). None (every route's default): DEFAULT_FUSION.
FusionArg: TypeAlias = Union[FusionMethod, Fusion, Mapping[str, Any]]


def parse_fusion(value: FusionArg | None, *, with_query: bool, where: str = "search()") -> Fusion | None:
    """The Fusion a search with `value` runs (None: no fusion), for every route. None is the
    default: DEFAULT_FUSION when the search has a full-text query (`with_query`; a caller asks this
    only of a search with a query vector), else no fusion. `"none"` (or a mapping whose method is
    "none"): no fusion, the query only selects the rows. Any other explicit value needs the query
    (InvalidOptionError naming `where`, the route's name for the argument)."""
    if value is None:
        return Fusion(DEFAULT_FUSION) if with_query else None
    fusion = _fusion_of(value, where)
    if fusion is not None and not with_query:
        raise InvalidOptionError(
            f"{where}: fusion combines a full-text query with the vector ranking: give a query (or leave fusion out)"
        )
    return fusion


def _fusion_of(value: FusionArg, where: str) -> Fusion | None:
    if isinstance(value, Fusion):
        return value
    if isinstance(value, str):
        method = value.strip().lower()
        if method == "none":
            return None
        if method not in FUSIONS:
            raise InvalidOptionError(f"{where}: fusion {value!r}: expected 'rrf', 'weighted' or 'none'")
        return Fusion(method)  # type: ignore[arg-type]  # (checked just above)
    if isinstance(value, Mapping):
        fields = dict(value)
        method = str(fields.get("method", DEFAULT_FUSION)).strip().lower()
        if method == "none":
            return None
        if method not in FUSIONS:
            raise InvalidOptionError(f"{where}: fusion {fields.get('method')!r}: expected 'rrf', 'weighted' or 'none'")
        try:
            return Fusion(**{**fields, "method": method})
        except TypeError as e:
            raise InvalidOptionError(
                f"{where}: fusion {fields!r}: {e} (keys: method, rrf_k, text_weight, window)"
            ) from None
    raise InvalidOptionError(
        f"{where}: fusion must be 'rrf', 'weighted', 'none', an it.Fusion or a mapping, got {value!r}"
    )
