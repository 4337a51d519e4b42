"""What the `indextables` command line prints (frontends/cli.py runs the commands): results as
tables that read well at the console's width, on a terminal or piped (numbers with thousands
separators, times in UTC as ISO 8601, neither ever wrapped or cut; piped, plain columns without
rules), `--json`, search rows as a table, JSON Lines or CSV (the progress bars on stderr: api/progress.py).

rich is imported on use: `indextables --help` and `--json` runs do not load it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import TYPE_CHECKING, Any, Literal, Sequence

import pyarrow as pa
import pyarrow.csv as pcsv

from indextables_spark.results.record import Record, python_rows

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from indextables_spark.frontends.execute import CommandResult


def _flat_for_csv(table: pa.Table) -> pa.Table:
    """Nested columns (lists, structs, maps) as JSON text: CSV has no nesting."""
    cols = []
    for name, col in zip(table.column_names, table.columns):
        t = col.type
        if pa.types.is_nested(t):
            col = pa.array(
                [None if v is None else json.dumps(_plain(v), default=_json_default) for v in col.to_pylist()],
                pa.string(),
            )
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            col = pa.array([None if v is None else v.hex() for v in col.to_pylist()], pa.string())
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def _plain(v: Any) -> Any:
    """Arrow's map values (lists of pairs) as JSON objects."""
    if isinstance(v, list) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return {str(k): _plain(x) for k, x in v}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def print_rows(out: Console, args: argparse.Namespace, table: pa.Table) -> None:
    if args.csv:
        sys.stdout.flush()
        buf = pa.BufferOutputStream()
        pcsv.write_csv(_flat_for_csv(table), buf)
        sys.stdout.write(buf.getvalue().to_pybytes().decode("utf-8"))
        return
    if args.json:
        for row in table.to_pylist():
            sys.stdout.write(json.dumps({k: _plain(v) for k, v in row.items()}, default=_json_default) + "\n")
        return
    shown = table.slice(0, args.max_rows).to_pylist()
    more = table.num_rows - len(shown)
    title = f"{table.num_rows:,} rows" + (
        f" (first {len(shown):,} shown; --max-rows, --json or --csv for all)" if more else ""
    )
    grid = _grid(out, title)
    for name in table.column_names:
        grid.add_column(name, overflow="fold", max_width=60)
    for row in shown:
        grid.add_row(*(_search_cell(row[c]) for c in table.column_names))
    _show(out, grid, 0)


def _search_cell(v: Any) -> str:
    """A value of a row found: as the table holds it (no thousands separators in an id; times whole)."""
    if isinstance(v, (dt.datetime, dt.date)):
        return v.isoformat()
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, (list, dict)):
        return json.dumps(_plain(v), default=_json_default)
    return _cell(v)


def _json_default(o: Any) -> Any:
    if isinstance(o, Record):  # rows that are not OperationResults (dicts already): their JSON form
        return o.to_dict()
    if isinstance(o, (dt.datetime, dt.date)):
        return o.isoformat()
    if isinstance(o, bytes):
        return o.hex()
    return str(o)


def print_json(raw: Any) -> None:
    if isinstance(raw, pa.Table):
        raw = python_rows(raw)
    print(json.dumps(raw, default=_json_default, indent=2, sort_keys=False))


def _cell(v: Any) -> str:
    """A value in a terminal table: counts with thousands separators, times in UTC as ISO 8601
    (`2024-05-01T12:00:00Z`: one word, never wrapped), lists and maps on one line."""
    if v is None:
        return ""
    if isinstance(v, dt.datetime):  # the results' times are UTC; to the second (--json: to the ms)
        if v.tzinfo is None:
            return v.strftime("%Y-%m-%dT%H:%M:%S")
        return v.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, list):
        if v and isinstance(v[0], dict):
            return f"{len(v):,} entries"
        shown = ", ".join(str(x) for x in v[:5])
        return shown + (f", … ({len(v):,} in all)" if len(v) > 5 else "")
    if isinstance(v, (dict, tuple)):
        items = v.items() if isinstance(v, dict) else v
        return ", ".join(f"{k}={x}" for k, x in items)
    return str(v)


def _header(name: str) -> str:
    """A column's header: words (`num_added_files` → `added files`; --json keeps the field names)."""
    return name.removeprefix("num_").replace("_", " ")


_TEXT_WIDTH = 12  # the narrowest a text column is folded to (when its words are longer)


def _grid(console: Console, title: str, show_header: bool = True) -> Table:
    """A table as the console takes it: boxed on a terminal; piped, plain columns (no rules, which
    wrap badly, and a line per row where the width allows: `grep` and `less` read it)."""
    from rich.table import Table  # lazy: keeps `import indextables_spark.frontends.cli_output` free of rich

    if console.is_terminal:
        return Table(title=title, show_header=show_header)
    return Table(title=title, show_header=show_header, box=None, pad_edge=False, title_justify="left")


def _add_columns(grid: Table, names: Sequence[str], rows: Sequence[Sequence[str]], kinds: Sequence[str]) -> int:
    """Add the columns and rows; returns the width the table needs. kinds: "number" (numbers and
    times: right-aligned), "word" (left-aligned) — both never wrapped, their headers stacked a word
    a line where longer than their values — and "text" (folded where the width asks)."""
    need = 3 * len(names) + 1 if grid.box is not None else 2 * (len(names) - 1)
    for i, name in enumerate(names):
        widest = max((len(r[i]) for r in rows), default=0)
        if kinds[i] == "text":
            grid.add_column(name, overflow="fold")
            need += min(max(widest, len(name)), max(_TEXT_WIDTH, *(len(w) for w in name.split())))
            continue
        header = name.replace(" ", "\n") if len(name) > widest else name
        justify: Literal["left", "right"] = "right" if kinds[i] == "number" else "left"
        grid.add_column(header, justify=justify, no_wrap=True)
        need += max(widest, *(len(line) for line in header.split("\n")))
    for r in rows:
        grid.add_row(*r)
    return need


def _show(console: Console, grid: Table, need: int) -> None:
    """Print a table at the console's width, or wider when its numbers, times and words need it:
    nothing is cut or wrapped mid-number. Piped, without the trailing blanks of padded cells."""
    width = console.width
    console.width = max(width, need)
    try:
        if console.is_terminal:
            console.print(grid, crop=False)
            return
        with console.capture() as captured:
            console.print(grid, crop=False)
        console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    finally:
        console.width = width


def _kind(values: Sequence[Any]) -> str:
    """A column of numbers and times ("number"), of booleans ("word"), or of anything else ("text")."""
    present = [v for v in values if v is not None]
    if all(isinstance(v, bool) for v in present):
        return "word"
    return "number" if all(isinstance(v, (int, float, dt.datetime)) for v in present) else "text"


def _records(console: Console, title: str, items: Sequence[dict[str, Any]], keys: Sequence[str]) -> None:
    """Records as a table, one row each."""
    grid = _grid(console, title)
    cells = [[_cell(item[k]) for k in keys] for item in items]
    _show(
        console,
        grid,
        _add_columns(grid, [_header(k) for k in keys], cells, [_kind([i[k] for i in items]) for k in keys]),
    )


# What a value means where the word alone misleads (operation, field, value → text shown).
_MEANINGS = {("DESCRIBE STATE", "format", "none"): "none (no checkpoint yet: reads replay the version files)"}


def render(console: Console, res: CommandResult) -> None:
    """Many-row results (their row gives the columns to show; --json has all): one table; else one
    property/value table per result (the fields that have a value), nested lists of records and
    maps as tables under it."""
    rows = python_rows(res.table)
    wide = res.operation.cli.columns if res.operation.cli else ()
    if wide:
        _records(console, f"{res.name} ({len(rows):,} rows)", rows, wide)
        return
    for r in rows:
        props: list[list[str]] = []
        nested: list[tuple[str, list[dict[str, Any]]]] = []
        for c in res.result.column_names():
            v = r[c]
            if isinstance(v, list) and v and isinstance(v[0], dict):  # records: a table of their own
                nested.append((c, v))
                continue
            if isinstance(v, dict) and v:  # a map (settings): a table of its own
                nested.append((c, [{"key": k, "value": x} for k, x in v.items()]))
                continue
            if v is None or (isinstance(v, (list, dict)) and not v):
                continue  # not set (--json shows every field)
            props.append([c, _MEANINGS.get((res.name, c, v), v) if isinstance(v, str) else _cell(v)])
        grid = _grid(console, res.name, show_header=False)
        _show(console, grid, _add_columns(grid, ["property", "value"], props, ["word", "text"]))
        for name, items in nested:
            console.print()
            _records(console, name, items, list(items[0]))
