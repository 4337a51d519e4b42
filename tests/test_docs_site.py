"""The documentation site in a real browser: opened from disk and served, at a 1280×800 window.

The site (mkdocs.yml, docs/) is built into a temporary directory, or taken from
INDEXTABLES_DOCS_SITE (a directory `make docs` built), and opened in headless Chromium driven by
Playwright, once from `file://` (what the README tells a reader to open) and once served by a
`http.server` thread. On each:

- navigation: every link of the side navigation opens a page (its `<h1>`), never a directory
  listing (mkdocs' directory URLs do from disk); a few are clicked from the page before; no link in
  a page's content ends in a directory;
- search: the search box finds a word of the guide and lists results (from disk it needs the
  offline plugin's inlined index and a worker shim, docs/javascripts/iframe-worker.js);
- code: at 1280×800, on every page, no code block is cut. The criterion: a `pre` or its `code`
  whose content is wider than its box (`scrollWidth > clientWidth + 1`), or a `pre` reaching past
  the content column, counts as cut, whether or not it could be scrolled: mkdocs-material shows
  a code block's scrollbar only under the pointer, so a reader sees the line end mid-word
  (docs/stylesheets/extra.css wraps long lines instead);
- the build's code (docs_hooks/) is not published: no `.py` file in the site;
- the configuration table: it fits its column (nothing cut, no sideways scrolling), its key cells
  read as the registry's keys, and no cell of it breaks a line between two letters or digits (keys break after `.` or `_`: docs_hooks/options_table.py
  inserts `<wbr>` there).

Chromium is the Debian package `chromium` (/usr/bin/chromium; INDEXTABLES_CHROMIUM names another)
and Playwright for Python is pinned in the `test` extra; `playwright install` is never needed. When
either is missing the tests fail, naming what to install. The integration tier runs them
(tests/tiers.py): the fast tier needs no browser.
"""

from __future__ import annotations

import functools
import http.server
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
from typing import Any, Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}
# nav title -> the page's <h1>: clicked one after the other from the sidebar
CLICKED = {
    "Quickstart": "Quickstart",
    "Spark-free API": "Spark-free API",
    "Aggregations": "Aggregations",
    "Configuration": "Configuration",
    "IndexTable": "IndexTable",
}
SEARCH_WORD = "tantivy"  # on many pages


# --- the site, the browser, the server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    given = os.environ.get("INDEXTABLES_DOCS_SITE")
    if given:
        path = pathlib.Path(given).resolve()
        assert (path / "index.html").is_file(), f"INDEXTABLES_DOCS_SITE={given} holds no built site (index.html)"
        return path
    out = tmp_path_factory.mktemp("docs-site") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build failed:\n{done.stdout}\n{done.stderr}"
    return out


def chromium_path() -> str:
    path = os.environ.get("INDEXTABLES_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"no Chromium at {path}: install it (Debian: apt-get install -y --no-install-recommends chromium; "
            ".ci/run does) or point INDEXTABLES_CHROMIUM at a Chromium binary",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "Playwright for Python is not installed: `make install` (the test extra pins it), or "
            "pip install playwright; its own browser download (`playwright install`) is not needed",
            pytrace=False,
        )
    executable = chromium_path()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: pathlib.Path) -> Iterator[str]:
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(params=["file", "http"])
def base(request: pytest.FixtureRequest, site: pathlib.Path) -> str:
    """The site's root URL: from disk, or served."""
    if request.param == "file":
        return site.as_uri() + "/"
    return str(request.getfixturevalue("served"))


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT)
    # nothing leaves the machine: a page must not need the network (fonts, CDN scripts)
    external: list[str] = []

    def route(r: Any) -> None:
        external.append(r.request.url)
        r.abort()

    context.route("http*://**", lambda r: r.continue_() if "127.0.0.1" in r.request.url else route(r))
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.set_default_timeout(15_000)
    try:
        yield p
    finally:
        context.close()
    assert not external, f"pages asked the network for {sorted(set(external))}"
    assert not errors, f"JavaScript errors: {errors}"


def site_pages(site: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html") if p.name != "404.html")


def is_listing(p: Any) -> bool:
    return bool(p.title().startswith("Index of ") or p.locator("#parentDirLinkBox, #listingParsingErrorBox").count())


# --- the checks ----------------------------------------------------------------------------------------

NAV_LINKS = "() => [...document.querySelectorAll('.md-sidebar--primary a.md-nav__link[href]')].map(a => a.href)"
# One look at a page: a directory listing or not, its heading, its content links that end in a
# directory, and its cut code blocks (the longest line of each, shortened).
LOOK = """() => {
  const listing = document.title.startsWith('Index of ') || !!document.querySelector('#parentDirLinkBox');
  const h1 = document.querySelector('article h1');
  const dirs = [...document.querySelectorAll('.md-content a[href]')].map(a => a.href.split('#')[0])
    .filter(h => (h.startsWith('file:') || h.startsWith('http://127.0.0.1')) && h.endsWith('/'));
  const column = document.querySelector('.md-content');
  const right = column ? column.getBoundingClientRect().right : Infinity;
  const cut = [];
  for (const pre of document.querySelectorAll('.md-content pre')) {
    const code = pre.querySelector('code') || pre;
    const wide = [pre, code].some(el => el.scrollWidth > el.clientWidth + 1);
    const past = pre.getBoundingClientRect().right > right + 1;
    if (wide || past) {
      const line = code.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '');
      cut.push(line.slice(0, 100));
    }
  }
  return {listing, h1: h1 ? h1.textContent : null, dirs, cut};
}"""


def test_every_page_opens_and_no_code_is_cut(page, base, site):
    """Every side-navigation link opens a page with a heading (never a directory listing), no
    content link ends in a directory, and at 1280×800 no code block of any page is cut."""
    page.goto(base + "index.html")
    links = sorted(set(page.evaluate(NAV_LINKS)))
    pages = site_pages(site)
    assert len(links) >= len(pages) - 1, links  # every page is in the nav (the home page aside)
    broken, dir_links, cut = [], {}, {}
    for url in links:
        page.goto(url)
        look = page.evaluate(LOOK)
        if look["listing"] or not look["h1"]:
            broken.append(url)
            continue
        name = url[len(base) :] or "index.html"
        dir_links[name], cut[name] = look["dirs"], look["cut"]
    dir_links = {k: v for k, v in dir_links.items() if v}
    cut = {k: v for k, v in cut.items() if v}
    problems = []
    if broken:
        problems.append(f"{len(broken)} of {len(links)} navigation links open no page: {broken}")
    if dir_links:
        problems.append(f"content links to a directory (a listing from disk): {dir_links}")
    if cut:
        n = sum(len(v) for v in cut.values())
        problems.append(f"{n} code blocks cut at 1280 px on {len(cut)} pages: {cut}")
    assert not problems, "\n".join(problems)


def test_clicking_the_navigation(page, base):
    """Nav links clicked one after the other, each from the page the last one opened."""
    page.goto(base + "index.html")
    for title, h1 in CLICKED.items():
        link = page.locator(".md-sidebar--primary a.md-nav__link").filter(has_text=re.compile(f"^\\s*{title}\\s*$"))
        link.first.click()
        page.wait_for_load_state()
        assert not is_listing(page), f"{title}: a directory listing at {page.url}"
        assert page.locator("article h1").first.inner_text().strip().rstrip("¶") == h1, page.url
        assert page.url.endswith(".html"), page.url


def test_search_finds_a_word(page, base):
    page.goto(base + "index.html")
    page.locator("input.md-search__input").click()
    page.locator("input.md-search__input").press_sequentially(SEARCH_WORD)  # keys: the theme listens to keyup
    results = page.locator(".md-search-result__item")
    results.first.wait_for(state="visible")
    assert results.count() >= 2
    meta = page.locator(".md-search-result__meta").inner_text()
    assert "No matching" not in meta, meta
    results.first.locator("a").first.click()  # a result opens its page
    page.wait_for_load_state()
    assert not is_listing(page) and page.locator("article h1").count(), page.url


def test_the_site_publishes_no_build_code(site):
    """mkdocs copies every file under docs/: the build's own code (the options-table hook) lives
    outside it, in docs_hooks/."""
    assert not sorted(str(p.relative_to(site)) for p in site.rglob("*.py"))


# Each cell's lines: where the text moves to a new line, the characters either side of the break.
BREAKS = """(table) => [...table.querySelectorAll('tbody tr')].map(tr => [...tr.cells].map(td => {
  const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
  const chars = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    for (let i = 0; i < n.data.length; i++) {
      const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
      const rect = r.getClientRects()[0];
      if (rect) chars.push([n.data[i], rect.top]);
    }
  }
  const breaks = [];
  for (let i = 1; i < chars.length; i++)
    if (chars[i][1] > chars[i - 1][1] + 2) breaks.push(chars[i - 1][0] + chars[i][0]);
  return {text: td.textContent, breaks};
}))"""


def test_configuration_table_breaks_keys_between_words(page, base):
    from indextables_spark.config.registry import OPTIONS

    page.goto(base + "configuration.html")
    table = page.locator("article table", has=page.locator("th", has_text="meaning")).first
    width = table.evaluate(
        "t => ({table: t.scrollWidth, box: (t.closest('.md-typeset__scrollwrap') || t.parentElement).clientWidth})"
    )
    assert width["table"] <= width["box"] + 1, f"the table is wider than its column at 1280 px (cut): {width}"
    rows = table.evaluate(BREAKS)
    keys = [o.key for o in OPTIONS if o.readme]
    assert [r[0]["text"] for r in rows] == keys
    mid_word = [
        (row[0]["text"], cell["text"][:60], b)
        for row in rows
        for cell in row
        for b in cell["breaks"]
        if b[0].isalnum() and b[1].isalnum()
    ]
    assert not mid_word, f"{len(mid_word)} line breaks inside a word: {mid_word[:20]}"
