"""Parser of the command texts (IndexTables4Spark's, docs/guide/maintenance.md): the generic reader
of the rows of ops/registry.py.

PySpark offers no way to extend Spark's SQL grammar (the reference adds its commands through a
JVM parser extension), so `it.sql(spark, text)` and the command line parse these texts themselves. Keywords are case-insensitive; `INDEXTABLES` and `INDEXTABLE`
are interchangeable, and so is the reference's `TANTIVY4SPARK` except after PURGE and REPAIR (whose
keywords the reference fixes: PURGE INDEXTABLE, REPAIR INDEXFILES); paths are quoted ('…' or "…",
a quote is escaped by doubling it); a trailing `;` is allowed. Grammar (<table> is a quoted path
or a table name `t`, `db.t`, `catalog.db.t`, parts plain or `backquoted`, which `it.sql` /
`spark.sql` resolve through the Spark catalog; a name that is one of the clause words (WHERE,
TARGET, MAX, DRY, ...) needs backquotes; sizes and durations as config/units.py reads them):

    CHECKPOINT INDEXTABLES <table>
    COMPACT INDEXTABLES <table>
    DESCRIBE INDEXTABLES STATE <table>
    DESCRIBE INDEXTABLES TRANSACTION LOG <table> [INCLUDE ALL]
    MERGE SPLITS <table> [WHERE <partition predicate>] [TARGET SIZE <n>[K|M|G|T]]
                         [MAX DEST SPLITS <n>] [MAX SOURCE SPLITS PER MERGE <n>]
    PURGE INDEXTABLE <table> [OLDER THAN <n> DAYS|HOURS]
                             [TRANSACTION LOG RETENTION <n> DAYS|HOURS] [DRY RUN]
    TRUNCATE INDEXTABLES TIME TRAVEL <table> [DRY RUN]
    DROP INDEXTABLES PARTITIONS FROM <table> WHERE <partition predicate>
    DELETE FROM INDEXTABLES <table> WHERE <predicate over any columns>   (ops/write/delete.py)
    REPAIR INDEXFILES TRANSACTION LOG <path>/_transaction_log AT LOCATION <path>
    CONVERT INDEXTABLES TABLE <table> [DRY RUN]                          (ops/maintenance/convert.py)
    PREWARM INDEXTABLES CACHE <table> [WHERE <partition predicate>]      (ops/cluster/cache.py)
    DESCRIBE INDEXTABLES DISK CACHE,  FLUSH INDEXTABLES DISK CACHE
    BUILD INDEXTABLES COMPANION FOR DELTA|ICEBERG|PARQUET <source>
        [CATALOG <name> [TYPE <type>]] [INDEXING MODES ('col':'mode', ...)] [WHERE <partition predicate>]
        [FROM VERSION <n> | FROM SNAPSHOT <id>] [TARGET INPUT SIZE <n>[K|M|G|T]] [DRY RUN]
        AT LOCATION <path> [DRY RUN]                                     (ops/companion/build.py)

(DESC for DESCRIBE; the optional clauses in any order, each at most once.) The first words of each
text are its row's `Sql` (ops/registry.py); the command class's `parse` reads the rest with this
module's primitives. A WHERE predicate is kept as text (it runs to the next clause keyword) and
parsed later against the table's partition columns by `log.partition_filter`. `parse_command`
returns None for text that is not one of these commands, so that it can go to `spark.sql`; once a
text starts like one of ours, every mistake is a `CommandSyntaxError` naming the position.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass

from indextables_spark.config import units
from indextables_spark.errors import IndexTablesError
from indextables_spark.expr.lexer import Lexicon, lex
from indextables_spark.ops import registry
from indextables_spark.ops.command import Command, SqlCommand, TableName, Target, Token
from indextables_spark.ops.registry import claim_pattern


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


_PLAIN_IDENT = re.compile(r"[A-Za-z0-9_]+")


# ---- tokens ----------------------------------------------------------------------------------

_LEXICON = Lexicon(
    number=r"\d+(?:\.\d+)?[A-Za-z]*",  # a unit may follow: 10GB, 7d
    word=r"[A-Za-z_][A-Za-z0-9_]*",
    punct="(),;.",
    double_quoted="string",
    other=True,  # s3://… without quotes: the parser names it
)
_KIND = {"string": "str", "ident": "bq", "number": "num"}  # the lexer's kinds as this parser's


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
    for t in lex(text, _LEXICON):
        if t.kind == "other" and t.text in "'\"`":
            raise CommandSyntaxError(text, t.pos, f"unterminated quoted text starting with {t.text}")
        kind = _KIND.get(t.kind, t.kind)
        value = t.value if kind == "str" else t.text.upper() if kind == "word" else t.text
        out.append(Tok(kind, t.text, t.pos, value))
    return out


# ---- parser ----------------------------------------------------------------------------------

# Words that start the clause after a command's table: a bare one there means the table is missing
# (a table so named needs backquotes).
_CLAUSE_WORDS = frozenset(
    ("WHERE", "TARGET", "MAX", "OLDER", "TRANSACTION", "DRY", "INCLUDE", "PRECOMMIT", "FOR", "ON", "WITH", "AT")
)


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

    def error(self, message: str, tok: Token | None = None) -> CommandSyntaxError:
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

    def whole_number(self, what: str) -> int:
        t = self.next()
        if t.kind != "num" or not t.text.isdigit():
            raise self.error(f"expected a whole number after {what}, found {t.describe()}", t)
        return int(t.text)

    def _number(self, expected: str) -> tuple[Token, str, str]:
        """(token, number, unit) of the next token, a number with an optional unit (`100M`,
        `7d`); else an error saying what was `expected`."""
        t = self.next()
        parts = units.split_number(t.text) if t.kind == "num" else None
        if parts is None:
            raise self.error(f"{expected}, found {t.describe()}", t)
        return t, *parts

    def size(self, clause: str) -> int:
        """`100M`, `2 G`, `1T` (config/units.py), positive."""
        t, number, unit = self._number(f"expected a size such as 100M or 2G after {clause}")
        if not unit and self.peek().kind == "word" and self.peek().value in units.SIZE_UNITS:
            unit = self.next().value  # "100 M"
        try:
            n = units.size_bytes(number, unit)
        except units.UnitError as e:
            raise self.error(str(e), t) from None
        if n <= 0:
            raise self.error(f"{clause} must be positive", t)
        return n

    def hours(self, clause: str) -> float:
        """`7 DAYS`, `36 HOURS`, `7d` (config/units.py); the unit is required."""
        t, number, unit = self._number(f"expected a number after {clause}")
        u = t
        if not unit:
            u = self.next()
            unit = u.value if u.kind == "word" else ""
        if unit.upper() not in units.HOUR_UNITS:
            raise self.error(f"expected DAYS or HOURS after {clause} {number}, found {u.describe()}", u)
        return units.parse_hours(number + unit)

    def dry_run(self) -> bool:
        if self.accept("DRY"):
            self.expect("RUN")
            return True
        return False

    def end(self) -> None:
        if self.peek().kind == "punct" and self.peek().text == ";":
            self.next()
        t = self.peek()
        if t.kind != "end":
            raise self.error(f"unexpected {t.describe()} after the end of the command", t)

    def once(self, seen: set[str], clause: str, tok: Token) -> None:
        if clause in seen:
            raise self.error(f"{clause} is given twice", tok)
        seen.add(clause)

    def predicate(self, stops: tuple[tuple[str, ...], ...] = ()) -> str:
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

    # -- the operations' first words (ops/registry.py Sql), then the command's own parse --
    def command(self) -> Command | None:
        heads = [(op, op.sql) for op in registry.OPERATIONS if op.sql and self._words(op.sql.head.split())]
        if not heads:
            return None
        head = heads[0][1].head
        candidates = [(op, sql.then.split()) for op, sql in heads if sql.head == head]
        self.i += len(head.split())
        shown = [t.text.upper() for t in self.toks[self.i - len(head.split()) : self.i]]
        while any(rest for _, rest in candidates):
            t = self.peek()
            matching = [(op, rest[1:]) for op, rest in candidates if rest and t.is_word(*rest[0].split("|"))]
            if not matching:
                raise self.error(_expected([rest for _, rest in candidates], shown) + f", found {t.describe()}", t)
            shown.append(self.next().text.upper())
            candidates = matching
        cmd = typing.cast("type[SqlCommand]", candidates[0][0].load()).parse(self)
        self.end()
        return cmd

    def _words(self, words: list[str]) -> bool:
        return all(self.peek(k).is_word(*w.split("|")) for k, w in enumerate(words))


def _expected(rests: list[list[str]], shown: list[str]) -> str:
    """ "expected TRAVEL" (one operation left); "expected STATE, TRANSACTION LOG or DISK CACHE after
    DESCRIBE INDEXTABLES" (several, each by its words still to come)."""
    if len(rests) == 1:
        return f"expected {rests[0][0].split('|')[0]}"
    names = [" ".join(w.split("|")[0] for w in rest) for rest in rests if rest]
    listed = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
    return f"expected {listed} after {' '.join(shown)}"


def is_command(text: str) -> bool:
    """Does the text start like one of our commands (so that it must parse as one)?"""
    return bool(claim_pattern().match(text))


def parse_command(text: str) -> Command | None:
    """The command in `text`, or None when the text is not an indextables command."""
    if not isinstance(text, str):
        raise TypeError(f"command text must be a string, got {type(text).__name__}")
    if not is_command(text):
        return None
    cmd = _Parser(text).command()
    if cmd is None:  # the head regex and the parser's dispatch disagree: a bug, not a user error
        raise AssertionError(f"command head recognised but not dispatched: {text[:60]!r}")
    return cmd
