"""mkdocs hook: the options table of docs/configuration.md, generated from the option registry.

At build time the text between `<!-- options:begin` and `<!-- options:end -->` is replaced by
`indextables_spark.config.registry.markdown_table()`, so the site always shows the registry. The
committed copy between the markers (what GitHub shows) is the same table, checked by
tests/test_option_registry.py; regenerate it with `python docs_hooks/options_table.py`.

In the built page the table's code (keys such as `indexing.typemap.<col>`) gets a `<wbr>` after
each `.` and `_`, and the table a `div.options-table` around it, whose code
docs/stylesheets/extra.css breaks only there: at 1280 px a key wraps between its parts, never
mid-word (tests/test_docs_site.py checks it in a browser).

This file lives outside docs/ (mkdocs.yml `hooks:`), so the site does not publish it.
"""

from __future__ import annotations

import pathlib
import re
import sys
from typing import Any

BEGIN = "<!-- options:begin"
END = "<!-- options:end -->"
PAGE = "configuration.md"
ROOT = pathlib.Path(__file__).resolve().parents[1]
WRAPPER = '<div class="options-table">'
CODE = re.compile(r"<code>(.*?)</code>", re.DOTALL)


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


def break_points(html: str) -> str:
    """The options table's HTML with `<wbr>` after each `.` and `_` inside its code, and the
    wrapper that styles it (the table is the first after the begin marker)."""
    start = html.index(BEGIN)
    table = html.index("<table>", start)
    end = html.index("</table>", table) + len("</table>")

    def code(m: re.Match[str]) -> str:
        return "<code>" + re.sub(r"([._])", r"\1<wbr>", m.group(1)) + "</code>"  # escaped text, no tags

    inner = CODE.sub(code, html[table:end])
    return html[:table] + WRAPPER + inner + "</div>" + html[end:]


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    return fill(markdown, registry_table())


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri != PAGE:
        return html
    return break_points(html)


if __name__ == "__main__":  # rewrite the committed copy
    path = ROOT / "docs" / PAGE
    path.write_text(fill(path.read_text(encoding="utf-8"), registry_table()), encoding="utf-8")
