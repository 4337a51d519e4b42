"""BUILD INDEXTABLES COMPANION: the command of ops/companion.py (kept apart from it while that
module is reworked; fold it in there)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar

from indextables_spark.api.results import CompanionBuildResult
from indextables_spark.ops.registry import CommandParser, Context, size


@dataclass(frozen=True)
class BuildCompanion:
    """BUILD INDEXTABLES COMPANION FOR DELTA|ICEBERG|PARQUET <source> [CATALOG <name> [TYPE <type>]]
    [INDEXING MODES ('col':'mode', ...)] [WHERE …] [FROM VERSION n | FROM SNAPSHOT id]
    [TARGET INPUT SIZE …] [DRY RUN] AT LOCATION <path>."""

    result: ClassVar[type[CompanionBuildResult]] = CompanionBuildResult
    format: str  # delta | iceberg | parquet
    source: str  # path, or Iceberg table identifier with CATALOG
    location: str
    _: KW_ONLY
    catalog: str | None = None
    catalog_type: str | None = None
    indexing: tuple[tuple[str, str], ...] = ()  # INDEXING MODES, in order
    where: str | None = None
    from_version: int | None = None
    from_snapshot: int | None = None
    target_input_size: int | None = size()
    dry_run: bool = False

    @classmethod
    def parse(cls, p: CommandParser) -> BuildCompanion:
        p.expect("FOR")
        fmt = p.expect("DELTA", "ICEBERG", "PARQUET", what="DELTA, ICEBERG or PARQUET").value.lower()
        source = p.path("the quoted source table path" + (" or identifier" if fmt == "iceberg" else ""))
        seen: set[str] = set()
        args: dict[str, Any] = {}
        stops = (
            ("FROM", "VERSION"),
            ("FROM", "SNAPSHOT"),
            ("TARGET", "INPUT"),
            ("DRY", "RUN"),
            ("AT", "LOCATION"),
            ("INDEXING", "MODES"),
            ("CATALOG",),
        )
        location = None
        while p.peek().kind == "word":
            t = p.next()
            if t.is_word("CATALOG"):
                p.once(seen, "CATALOG", t)
                args["catalog"] = p.path("a quoted catalog name")
                if p.accept("TYPE"):
                    args["catalog_type"] = p.path("a quoted catalog type")
            elif t.is_word("INDEXING"):
                p.once(seen, "INDEXING MODES", t)
                p.expect("MODES")
                args["indexing"] = _indexing_modes(p)
            elif t.is_word("WHERE"):
                p.once(seen, "WHERE", t)
                args["where"] = p.predicate(stops)
            elif t.is_word("FROM"):
                p.once(seen, "FROM VERSION/SNAPSHOT", t)
                kind = p.expect("VERSION", "SNAPSHOT", what="VERSION or SNAPSHOT after FROM")
                n = p.whole_number(f"FROM {kind.value}")
                args["from_version" if kind.value == "VERSION" else "from_snapshot"] = n
            elif t.is_word("TARGET"):
                p.once(seen, "TARGET INPUT SIZE", t)
                p.expect("INPUT")
                p.expect("SIZE")
                args["target_input_size"] = p.size("TARGET INPUT SIZE")
            elif t.is_word("DRY"):
                p.once(seen, "DRY RUN", t)
                p.expect("RUN")
                args["dry_run"] = True
            elif t.is_word("AT"):
                p.once(seen, "AT LOCATION", t)
                p.expect("LOCATION")
                location = p.path("the quoted location of the companion index")
            else:
                raise p.error(
                    f"expected CATALOG, INDEXING MODES, WHERE, FROM VERSION, FROM SNAPSHOT, TARGET INPUT "
                    f"SIZE, DRY RUN or AT LOCATION, found {t.describe()}",
                    t,
                )
        if location is None:
            raise p.error("BUILD INDEXTABLES COMPANION needs AT LOCATION '<index path>'")
        if "catalog" in args and fmt != "iceberg":
            raise p.error("CATALOG is for ICEBERG sources")
        return cls(fmt, source, location, **args)

    def run(self, ctx: Context) -> CompanionBuildResult:
        from indextables_spark.ops.companion import build_companion  # lazy: the source readers load on use

        return build_companion(
            self.source,
            self.location,
            self.format,
            dict(self.indexing) or None,
            self.where,
            ctx.spark,
            ctx.options,
            from_version=self.from_version,
            from_snapshot=self.from_snapshot,
            catalog=self.catalog,
            catalog_type=self.catalog_type,
            target_input_size=self.target_input_size,
            dry_run=self.dry_run,
        )


def _indexing_modes(p: CommandParser) -> tuple[tuple[str, str], ...]:
    """('col':'mode', …); names and modes quoted or bare."""
    t = p.next()
    if not (t.kind == "punct" and t.text == "("):
        raise p.error(f"expected '(' after INDEXING MODES, found {t.describe()}", t)
    out: list[tuple[str, str]] = []
    while True:
        name = p.next()
        if name.kind not in ("str", "word", "bq"):
            raise p.error(f"expected a column name in INDEXING MODES, found {name.describe()}", name)
        colon = p.next()
        if colon.text != ":":
            raise p.error(f"expected ':' after the column name in INDEXING MODES, found {colon.describe()}", colon)
        mode = p.next()
        if mode.kind not in ("str", "word"):
            raise p.error(
                f"expected an indexing mode (text, string, …) in INDEXING MODES, found {mode.describe()}", mode
            )
        col = name.value if name.kind == "str" else name.text.strip("`")
        out.append((col, mode.value if mode.kind == "str" else mode.text.lower()))
        sep = p.next()
        if sep.kind == "punct" and sep.text == ")":
            return tuple(out)
        if not (sep.kind == "punct" and sep.text == ","):
            raise p.error(f"expected ',' or ')' in INDEXING MODES, found {sep.describe()}", sep)
