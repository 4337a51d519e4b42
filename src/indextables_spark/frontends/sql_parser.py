"""Parser of the maintenance command texts (table-protocol.txt "SQL commands").

PySpark has no custom SQL grammar (platform-facts), so `it.sql(spark, text)` and the command
line parse these texts themselves. Keywords are case-insensitive; `INDEXTABLES` and `INDEXTABLE`
are interchangeable, and so is the reference's `TANTIVY4SPARK` except after PURGE and REPAIR (whose
keywords the reference fixes: PURGE INDEXTABLE, REPAIR INDEXFILES); paths are quoted ('…' or "…",
a quote is escaped by doubling it); a trailing `;` is allowed. Grammar (<table> is a quoted path
or a table name `t`, `db.t`, `catalog.db.t`, parts plain or `backquoted`, which `it.sql` /
`spark.sql` resolve through the Spark catalog; a name that is one of the clause words (WHERE,
TARGET, MAX, DRY, ...) needs backquotes):

    CHECKPOINT INDEXTABLES <table>
    COMPACT INDEXTABLES <table>
    DESCRIBE INDEXTABLES STATE <table>
    DESCRIBE INDEXTABLES TRANSACTION LOG <table> [INCLUDE ALL]
    MERGE SPLITS <table> [WHERE <partition predicate>] [TARGET SIZE <n>[K|M|G]]
                         [MAX DEST SPLITS <n>] [MAX SOURCE SPLITS PER MERGE <n>]
    PURGE INDEXTABLE <table> [OLDER THAN <n> DAYS|HOURS]
                             [TRANSACTION LOG RETENTION <n> DAYS|HOURS] [DRY RUN]
    TRUNCATE INDEXTABLES TIME TRAVEL <table> [DRY RUN]
    DROP INDEXTABLES PARTITIONS FROM <table> WHERE <partition predicate>
    DELETE FROM INDEXTABLES <table> WHERE <predicate over any columns>   (ops/delete.py)
    REPAIR INDEXFILES TRANSACTION LOG <path>/_transaction_log AT LOCATION <path>
    CONVERT INDEXTABLES TABLE <table> [DRY RUN]                          (ops/convert.py)
    PREWARM INDEXTABLES CACHE <table> [WHERE <partition predicate>]      (ops/cache.py)
    DESCRIBE INDEXTABLES DISK CACHE,  FLUSH INDEXTABLES DISK CACHE
    BUILD INDEXTABLES COMPANION FOR DELTA|ICEBERG|PARQUET <source>
        [CATALOG <name> [TYPE <type>]] [INDEXING MODES ('col':'mode', ...)] [WHERE <partition predicate>]
        [FROM VERSION <n> | FROM SNAPSHOT <id>] [TARGET INPUT SIZE <n>[K|M|G]] [DRY RUN]
        AT LOCATION <path> [DRY RUN]                                     (ops/companion.py)

(DESC for DESCRIBE; the optional clauses in any order, each at most once.) A WHERE predicate is
kept as text (it runs to the next clause keyword) and parsed later against the table's partition
columns by `log.partition_filter`. `parse_command` returns None for text that is not one of these
commands, so that it can go to `spark.sql`; once a text starts like one of ours, every mistake is a
`CommandSyntaxError` naming the position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from indextables_spark.errors import IndexTablesError


class CommandSyntaxError(IndexTablesError):
    """A command text that cannot be parsed; names the position (0-based offset, line, column)."""

    def __init__(self, text: str, position: int, message: str):
        self.text = text
        self.position = position
        line_no = text.count("\n", 0, position) + 1
        line_start = text.rfind("\n", 0, position) + 1
        line_end = text.find("\n", position)
        line = text[line_start : line_end if line_end >= 0 else len(text)]
        column = position - line_start
        super().__init__(
            f"syntax error at position {position} (line {line_no}, column {column + 1}): {message}\n"
            f"  {line}\n  {' ' * column}^"
        )


# ---- commands --------------------------------------------------------------------------------

_PLAIN_IDENT = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class TableName:
    """A table identifier where a command takes a table (`t`, `db.t`, `catalog.db.t`), as in the
    reference's grammar; `it.sql` / `spark.sql` resolve it to the table's path through the Spark
    catalog (spark/table_names.py) before the command runs."""

    parts: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join(p if _PLAIN_IDENT.fullmatch(p) else "`" + p.replace("`", "``") + "`" for p in self.parts)


# Where a command takes a table: a quoted path, or a table name still to be resolved.
Target = str | TableName


@dataclass(frozen=True)
class Checkpoint:
    path: Target


@dataclass(frozen=True)
class Compact:
    path: Target


@dataclass(frozen=True)
class DescribeState:
    path: Target


@dataclass(frozen=True)
class DescribeTransactionLog:
    path: Target
    include_all: bool = False


@dataclass(frozen=True)
class MergeSplits:
    path: Target
    where: str | None = None
    target_size: int | None = None
    max_dest_splits: int | None = None
    max_source_splits_per_merge: int | None = None


@dataclass(frozen=True)
class Purge:
    path: Target
    older_than_hours: float | None = None
    tx_log_retention_hours: float | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class TruncateTimeTravel:
    path: Target
    dry_run: bool = False


@dataclass(frozen=True)
class DropPartitions:
    path: Target
    where: str


@dataclass(frozen=True)
class RepairTransactionLog:
    source: str
    target: str


@dataclass(frozen=True)
class Delete:
    path: Target
    where: str


@dataclass(frozen=True)
class Convert:
    path: Target
    dry_run: bool = False


@dataclass(frozen=True)
class PrewarmCache:
    path: Target
    where: str | None = None


@dataclass(frozen=True)
class BuildCompanion:
    format: str  # delta | iceberg | parquet
    source: str  # path, or Iceberg table identifier with CATALOG
    location: str
    catalog: str | None = None
    catalog_type: str | None = None
    indexing: tuple[tuple[str, str], ...] = ()  # INDEXING MODES, in order
    where: str | None = None
    from_version: int | None = None
    from_snapshot: int | None = None
    target_input_size: int | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class DescribeDiskCache:
    pass


@dataclass(frozen=True)
class FlushDiskCache:
    pass


Command = (
    Checkpoint
    | Compact
    | DescribeState
    | DescribeTransactionLog
    | MergeSplits
    | Purge
    | TruncateTimeTravel
    | DropPartitions
    | RepairTransactionLog
    | Delete
    | Convert
    | PrewarmCache
    | DescribeDiskCache
    | FlushDiskCache
    | BuildCompanion
)


# ---- tokens ----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<str>'(?:[^']|'')*'|"(?:[^"]|"")*")
  | (?P<bq>`(?:[^`]|``)*`)
  | (?P<num>\d+(?:\.\d+)?[A-Za-z]*)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|<>|!=|==|=|<|>)
  | (?P<punct>[(),;.])
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Tok:
    kind: str  # word, str, bq, num, op, punct, other, end
    text: str  # raw text (quotes included)
    pos: int
    value: str = ""  # unquoted string / upper-cased word / number text

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.value in words

    def describe(self) -> str:
        return "end of input" if self.kind == "end" else repr(self.text)


def tokenize(text: str) -> list[Tok]:
    out: list[Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        kind = m.lastgroup
        raw = m.group()
        if kind == "other" and raw in "'\"`":
            raise CommandSyntaxError(text, pos, f"unterminated quoted text starting with {raw}")
        if kind == "str":
            out.append(Tok("str", raw, pos, raw[1:-1].replace(raw[0] * 2, raw[0])))
        elif kind == "word":
            out.append(Tok("word", raw, pos, raw.upper()))
        elif kind != "ws":
            out.append(Tok(kind, raw, pos, raw))
        pos = m.end()
    out.append(Tok("end", "", len(text)))
    return out


# ---- parser ----------------------------------------------------------------------------------

TABLE_WORDS = ("INDEXTABLES", "INDEXTABLE")
# The keyword of most commands; the reference's grammar (indexTablesKeyword) also takes TANTIVY4SPARK.
KEYWORDS = (*TABLE_WORDS, "TANTIVY4SPARK")
# Words that start the clause after a command's table: a bare one there means the table is missing
# (a table so named needs backquotes).
_CLAUSE_WORDS = frozenset(
    ("WHERE", "TARGET", "MAX", "OLDER", "TRANSACTION", "DRY", "INCLUDE", "PRECOMMIT", "FOR", "ON", "WITH", "AT")
)
_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "T": 1 << 40,
    "TB": 1 << 40,
}
_HOURS = {"HOUR": 1.0, "HOURS": 1.0, "DAY": 24.0, "DAYS": 24.0}


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = tokenize(text)
        self.i = 0

    # -- primitives --
    def peek(self, k: int = 0) -> Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Tok:
        t = self.peek()
        self.i = min(self.i + 1, len(self.toks) - 1)
        return t

    def error(self, message: str, tok: Tok | None = None) -> CommandSyntaxError:
        tok = tok or self.peek()
        return CommandSyntaxError(self.text, tok.pos, message)

    def expect(self, *words: str, what: str | None = None) -> Tok:
        t = self.next()
        if not t.is_word(*words):
            wanted = what or " or ".join(words)
            raise self.error(f"expected {wanted}, found {t.describe()}", t)
        return t

    def accept(self, *words: str) -> bool:
        if self.peek().is_word(*words):
            self.next()
            return True
        return False

    def path(self, what: str = "a quoted table path") -> str:
        t = self.next()
        if t.kind != "str":
            hint = " (put the path in quotes)" if t.kind in ("word", "bq", "punct", "other", "num") else ""
            raise self.error(f"expected {what}, found {t.describe()}{hint}", t)
        if not t.value.strip():
            raise self.error("the path is empty", t)
        return t.value

    def target(self) -> Target:
        """A quoted table path, or a table name (1 to 3 parts, plain or backquoted)."""
        t = self.peek()
        if t.kind == "str":
            return self.path()
        starts_name = t.kind == "bq" or (
            t.kind in ("word", "num")
            and _PLAIN_IDENT.fullmatch(t.text)
            and not (t.kind == "word" and t.value in _CLAUSE_WORDS and not self.dot_follows())
        )
        if not starts_name:
            if t.kind == "word" and t.value in _CLAUSE_WORDS:
                raise self.error(
                    f"expected a quoted table path or a table name before {t.text} (a table so named needs "
                    f"backquotes: `{t.text}`)",
                    t,
                )
            hint = " (put the path in quotes)" if t.kind in ("punct", "other", "num") else ""
            raise self.error(f"expected a quoted table path or a table name, found {t.describe()}{hint}", t)
        parts = [self.name_part()]
        while self.peek().kind == "punct" and self.peek().text == ".":
            self.next()
            parts.append(self.name_part())
        after = self.peek()
        if after.kind == "other" and after.text in ":/":  # s3://bucket/t, /data/t written without quotes
            raise self.error(f"unexpected {after.describe()} in a table name (put a table path in quotes)", after)
        if len(parts) > 3:
            raise self.error(f"a table name has at most 3 parts (catalog.db.table), got {len(parts)}", t)
        return TableName(tuple(parts))

    def dot_follows(self) -> bool:
        nxt = self.peek(1)
        return nxt.kind == "punct" and nxt.text == "."

    def name_part(self) -> str:
        t = self.next()
        if t.kind == "bq":
            name = t.text[1:-1].replace("``", "`")
            if not name:
                raise self.error("empty `` in a table name", t)
            return name
        if t.kind in ("word", "num") and _PLAIN_IDENT.fullmatch(t.text):
            name = t.text
            # `2024_t` comes as a number and a word with nothing between them: one name part
            while (
                self.peek().kind in ("word", "num")
                and self.peek().pos == t.pos + len(name)
                and _PLAIN_IDENT.fullmatch(self.peek().text)
            ):
                name += self.next().text
            return name
        raise self.error(f"expected a name part after '.', found {t.describe()}", t)

    def positive_int(self, what: str) -> int:
        t = self.next()
        if t.kind != "num" or not t.text.isdigit():
            raise self.error(f"expected a whole number for {what}, found {t.describe()}", t)
        n = int(t.text)
        if n <= 0:
            raise self.error(f"{what} must be at least 1, got {n}", t)
        return n

    def size(self) -> int:
        t = self.next()
        if t.kind != "num":
            raise self.error(f"expected a size such as 100M or 2G after TARGET SIZE, found {t.describe()}", t)
        m = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z]*)", t.text)
        unit = m.group(2).upper()
        if not unit and self.peek().kind == "word" and self.peek().value in _UNITS and self.peek().value:
            unit = self.next().value  # "100 M"
        if unit not in _UNITS:
            raise self.error(f"unknown size unit {m.group(2)!r} (use K, M, G or T)", t)
        n = int(float(m.group(1)) * _UNITS[unit])
        if n <= 0:
            raise self.error("TARGET SIZE must be positive", t)
        return n

    def duration_hours(self, clause: str) -> float:
        t = self.next()
        if t.kind != "num" or not re.fullmatch(r"\d+(?:\.\d+)?", t.text):
            raise self.error(f"expected a number after {clause}, found {t.describe()}", t)
        u = self.next()
        if not u.is_word(*_HOURS):
            raise self.error(f"expected DAYS or HOURS after {clause} {t.text}, found {u.describe()}", u)
        return float(t.text) * _HOURS[u.value]

    def end(self) -> None:
        if self.peek().kind == "punct" and self.peek().text == ";":
            self.next()
        t = self.peek()
        if t.kind != "end":
            raise self.error(f"unexpected {t.describe()} after the end of the command", t)

    def once(self, seen: set[str], clause: str, tok: Tok) -> None:
        if clause in seen:
            raise self.error(f"{clause} is given twice", tok)
        seen.add(clause)

    def predicate(self, stops: tuple[tuple[str, ...], ...]) -> str:
        """Raw text of a WHERE predicate: up to a clause keyword sequence at nesting depth 0."""
        start = self.peek()
        depth = 0
        while True:
            t = self.peek()
            if t.kind == "end" or (depth == 0 and t.kind == "punct" and t.text == ";"):
                break
            if depth == 0 and any(all(self.peek(k).is_word(w) for k, w in enumerate(seq)) for seq in stops):
                break
            if t.kind == "punct" and t.text == "(":
                depth += 1
            elif t.kind == "punct" and t.text == ")":
                depth -= 1
                if depth < 0:
                    raise self.error("unbalanced ')' in the WHERE predicate", t)
            self.next()
        if depth > 0:
            raise self.error("missing ')' in the WHERE predicate")
        end = self.peek().pos
        text = self.text[start.pos : end].strip()
        if not text:
            raise self.error("expected a partition predicate after WHERE", start)
        return text

    # -- commands --
    def parse(self) -> Command | None:
        head = self.peek()
        nxt = self.peek(1)
        if head.is_word("CHECKPOINT", "COMPACT"):
            self.next()
            self.expect(*KEYWORDS, what="INDEXTABLES")
            cmd = (Checkpoint if head.value == "CHECKPOINT" else Compact)(self.target())
        elif head.is_word("DESCRIBE", "DESC") and nxt.is_word(*KEYWORDS):
            self.next(), self.next()
            cmd = self.describe()
        elif head.is_word("PREWARM") and nxt.is_word(*KEYWORDS):
            self.next(), self.next()
            self.expect("CACHE")
            path = self.target()
            cmd = PrewarmCache(path, self.predicate(()) if self.accept("WHERE") else None)
        elif head.is_word("FLUSH") and nxt.is_word(*KEYWORDS):
            self.next(), self.next()
            self.expect("DISK")
            self.expect("CACHE")
            cmd = FlushDiskCache()
        elif head.is_word("MERGE") and nxt.is_word("SPLITS"):
            self.next(), self.next()
            cmd = self.merge()
        elif head.is_word("PURGE"):
            self.next()
            self.expect(*TABLE_WORDS, what="INDEXTABLE")
            cmd = self.purge()
        elif head.is_word("TRUNCATE") and nxt.is_word(*KEYWORDS):
            self.next(), self.next()
            self.expect("TIME")
            self.expect("TRAVEL")
            path = self.target()
            cmd = TruncateTimeTravel(path, self.dry_run_clause())
        elif head.is_word("DROP") and nxt.is_word(*KEYWORDS):
            self.next(), self.next()
            cmd = self.drop_partitions()
        elif head.is_word("REPAIR") and nxt.is_word("INDEXFILES", *TABLE_WORDS):
            self.next(), self.next()
            self.expect("TRANSACTION")
            self.expect("LOG")
            src = self.path("the quoted path of the source _transaction_log directory")
            self.expect("AT")
            self.expect("LOCATION")
            cmd = RepairTransactionLog(src, self.path("the quoted target location"))
        elif head.is_word("BUILD") and nxt.is_word(*KEYWORDS):
            self.next(), self.next()
            self.expect("COMPANION")
            cmd = self.build_companion()
        elif head.is_word("CONVERT") and nxt.is_word(*KEYWORDS):
            self.next(), self.next()
            self.expect("TABLE")
            path = self.target()
            cmd = Convert(path, self.dry_run_clause())
        elif head.is_word("DELETE") and nxt.is_word("FROM") and self.peek(2).is_word(*KEYWORDS):
            self.next(), self.next(), self.next()
            path = self.target()
            t = self.peek()
            if not t.is_word("WHERE"):
                raise self.error(f"DELETE FROM INDEXTABLES needs a WHERE clause, found {t.describe()}", t)
            self.next()
            cmd = Delete(path, self.predicate(()))
        else:
            return None
        self.end()
        return cmd

    def describe(self) -> Command:
        t = self.next()
        if t.is_word("STATE"):
            return DescribeState(self.target())
        if t.is_word("DISK"):
            self.expect("CACHE")
            return DescribeDiskCache()
        if t.is_word("TRANSACTION"):
            self.expect("LOG")
            path = self.target()
            include_all = False
            if self.accept("INCLUDE"):
                self.expect("ALL")
                include_all = True
            return DescribeTransactionLog(path, include_all)
        raise self.error(
            f"expected STATE, TRANSACTION LOG or DISK CACHE after DESCRIBE INDEXTABLES, found {t.describe()}", t
        )

    def dry_run_clause(self) -> bool:
        if self.accept("DRY"):
            self.expect("RUN")
            return True
        return False

    def merge(self) -> MergeSplits:
        path = self.target()
        seen: set[str] = set()
        where = target = max_dest = max_src = None
        stops = (("TARGET", "SIZE"), ("MAX", "DEST"), ("MAX", "SOURCE"))
        while self.peek().kind == "word":
            t = self.peek()
            if t.is_word("WHERE"):
                self.once(seen, "WHERE", self.next())
                where = self.predicate(stops)
            elif t.is_word("TARGET"):
                self.once(seen, "TARGET SIZE", self.next())
                self.expect("SIZE")
                target = self.size()
            elif t.is_word("MAX"):
                self.next()
                kind = self.expect("DEST", "SOURCE", what="DEST SPLITS or SOURCE SPLITS PER MERGE after MAX")
                self.expect("SPLITS")
                if kind.value == "DEST":
                    self.once(seen, "MAX DEST SPLITS", t)
                    max_dest = self.positive_int("MAX DEST SPLITS")
                else:
                    self.once(seen, "MAX SOURCE SPLITS PER MERGE", t)
                    self.expect("PER")
                    self.expect("MERGE")
                    max_src = self.positive_int("MAX SOURCE SPLITS PER MERGE")
                    if max_src < 2:
                        raise self.error("MAX SOURCE SPLITS PER MERGE must be at least 2 (a merge needs two splits)", t)
            else:
                raise self.error(
                    f"expected WHERE, TARGET SIZE, MAX DEST SPLITS or MAX SOURCE SPLITS PER MERGE, "
                    f"found {t.describe()}",
                    t,
                )
        return MergeSplits(path, where, target, max_dest, max_src)

    def purge(self) -> Purge:
        path = self.target()
        seen: set[str] = set()
        older = tx = None
        dry = False
        while self.peek().kind == "word":
            t = self.next()
            if t.is_word("OLDER"):
                self.once(seen, "OLDER THAN", t)
                self.expect("THAN")
                older = self.duration_hours("OLDER THAN")
            elif t.is_word("TRANSACTION"):
                self.once(seen, "TRANSACTION LOG RETENTION", t)
                self.expect("LOG")
                self.expect("RETENTION")
                tx = self.duration_hours("TRANSACTION LOG RETENTION")
            elif t.is_word("DRY"):
                self.once(seen, "DRY RUN", t)
                self.expect("RUN")
                dry = True
            else:
                raise self.error(f"expected OLDER THAN, TRANSACTION LOG RETENTION or DRY RUN, found {t.describe()}", t)
        return Purge(path, older, tx, dry)

    def build_companion(self) -> BuildCompanion:
        self.expect("FOR")
        fmt = self.expect("DELTA", "ICEBERG", "PARQUET", what="DELTA, ICEBERG or PARQUET").value.lower()
        source = self.path("the quoted source table path" + (" or identifier" if fmt == "iceberg" else ""))
        seen: set[str] = set()
        args: dict = {}
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
        while self.peek().kind == "word":
            t = self.next()
            if t.is_word("CATALOG"):
                self.once(seen, "CATALOG", t)
                args["catalog"] = self.path("a quoted catalog name")
                if self.accept("TYPE"):
                    args["catalog_type"] = self.path("a quoted catalog type")
            elif t.is_word("INDEXING"):
                self.once(seen, "INDEXING MODES", t)
                self.expect("MODES")
                args["indexing"] = self.indexing_modes()
            elif t.is_word("WHERE"):
                self.once(seen, "WHERE", t)
                args["where"] = self.predicate(stops)
            elif t.is_word("FROM"):
                self.once(seen, "FROM VERSION/SNAPSHOT", t)
                kind = self.expect("VERSION", "SNAPSHOT", what="VERSION or SNAPSHOT after FROM")
                n = self.next()
                if n.kind != "num" or not n.text.isdigit():
                    raise self.error(f"expected a whole number after FROM {kind.value}, found {n.describe()}", n)
                args["from_version" if kind.value == "VERSION" else "from_snapshot"] = int(n.text)
            elif t.is_word("TARGET"):
                self.once(seen, "TARGET INPUT SIZE", t)
                self.expect("INPUT")
                self.expect("SIZE")
                args["target_input_size"] = self.size()
            elif t.is_word("DRY"):
                self.once(seen, "DRY RUN", t)
                self.expect("RUN")
                args["dry_run"] = True
            elif t.is_word("AT"):
                self.once(seen, "AT LOCATION", t)
                self.expect("LOCATION")
                location = self.path("the quoted location of the companion index")
            else:
                raise self.error(
                    f"expected CATALOG, INDEXING MODES, WHERE, FROM VERSION, FROM SNAPSHOT, TARGET INPUT "
                    f"SIZE, DRY RUN or AT LOCATION, found {t.describe()}",
                    t,
                )
        if location is None:
            raise self.error("BUILD INDEXTABLES COMPANION needs AT LOCATION '<index path>'")
        if "catalog" in args and fmt != "iceberg":
            raise self.error("CATALOG is for ICEBERG sources")
        return BuildCompanion(fmt, source, location, **args)

    def indexing_modes(self) -> tuple[tuple[str, str], ...]:
        """('col':'mode', …); names and modes quoted or bare."""
        t = self.next()
        if not (t.kind == "punct" and t.text == "("):
            raise self.error(f"expected '(' after INDEXING MODES, found {t.describe()}", t)
        out: list[tuple[str, str]] = []
        while True:
            name = self.next()
            if name.kind not in ("str", "word", "bq"):
                raise self.error(f"expected a column name in INDEXING MODES, found {name.describe()}", name)
            colon = self.next()
            if colon.text != ":":
                raise self.error(
                    f"expected ':' after the column name in INDEXING MODES, found {colon.describe()}", colon
                )
            mode = self.next()
            if mode.kind not in ("str", "word"):
                raise self.error(
                    f"expected an indexing mode (text, string, …) in INDEXING MODES, found {mode.describe()}", mode
                )
            col = name.value if name.kind == "str" else name.text.strip("`")
            out.append((col, mode.value if mode.kind == "str" else mode.text.lower()))
            sep = self.next()
            if sep.kind == "punct" and sep.text == ")":
                return tuple(out)
            if not (sep.kind == "punct" and sep.text == ","):
                raise self.error(f"expected ',' or ')' in INDEXING MODES, found {sep.describe()}", sep)

    def drop_partitions(self) -> DropPartitions:
        self.expect("PARTITIONS")
        self.expect("FROM")
        path = self.target()
        t = self.peek()
        if not t.is_word("WHERE"):
            raise self.error(
                f"DROP INDEXTABLES PARTITIONS needs a WHERE clause naming the partitions to drop, found {t.describe()}",
                t,
            )
        self.next()
        return DropPartitions(path, self.predicate(()))


_OURS = re.compile(
    r"^\s*(?:CHECKPOINT|COMPACT|PURGE|MERGE\s+SPLITS|(?:DESCRIBE|DESC|TRUNCATE|DROP|PREWARM|FLUSH)\s+(?:INDEXTABLES?|TANTIVY4SPARK)"
    r"|REPAIR\s+(?:INDEXFILES|INDEXTABLES?)|DELETE\s+FROM\s+(?:INDEXTABLES?|TANTIVY4SPARK)"
    r"|(?:BUILD|CONVERT)\s+(?:INDEXTABLES?|TANTIVY4SPARK))(?![A-Za-z0-9_])",
    re.IGNORECASE,
)


def table_name_of(cmd: Command) -> TableName | None:
    """The table name a command was given instead of a path (None for a path, or no table)."""
    path = getattr(cmd, "path", None)
    return path if isinstance(path, TableName) else None


def with_table_path(cmd: Command, path: str) -> Command:
    """The command with its table name replaced by the table's path."""
    import dataclasses

    return dataclasses.replace(cmd, path=path)  # type: ignore[type-var]


def is_command(text: str) -> bool:
    """Does the text start like one of our commands (so that it must parse as one)?"""
    return bool(_OURS.match(text))


def parse_command(text: str) -> Command | None:
    """The command in `text`, or None when the text is not an indextables command."""
    if not isinstance(text, str):
        raise TypeError(f"command text must be a string, got {type(text).__name__}")
    if not is_command(text):
        return None
    cmd = _Parser(text).parse()
    if cmd is None:  # is_command and the parser's dispatch disagree: a bug, not a user error
        raise AssertionError(f"command head recognised but not dispatched: {text[:60]!r}")
    return cmd
