"""mkdocs hook: the options table of docs/configuration.md, generated from the option registry.

At build time the text between `<!-- options:begin` and `<!-- options:end -->` is replaced by
`indextables_spark.config.registry.markdown_table()`, so the site always shows the registry. The
committed copy between the markers (what GitHub shows) is the same table, checked by
tests/test_option_registry.py; regenerate it with `python docs/hooks/options_table.py`.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

BEGIN = "<!-- options:begin"
END = "<!-- options:end -->"
PAGE = "configuration.md"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def registry_table() -> str:
    src = str(ROOT / "src")
    if src not in sys.path:  # mkdocs may run without the package installed
        sys.path.insert(0, src)
    from indextables_spark.config.registry import markdown_table

    return markdown_table()


def fill(markdown: str, table: str) -> str:
    """`markdown` with the text between the markers replaced by `table`."""
    start = markdown.index(BEGIN)
    body = markdown.index("\n", start) + 1
    end = markdown.index(END, body)
    return markdown[:body] + table.strip() + "\n" + markdown[end:]


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    return fill(markdown, registry_table())


if __name__ == "__main__":  # rewrite the committed copy
    path = ROOT / "docs" / PAGE
    path.write_text(fill(path.read_text(encoding="utf-8"), registry_table()), encoding="utf-8")
