"""Nothing in the product cites a document its users do not have: the design documents the table
format was first written down in, or any path outside this repository. The format is described in
docs/reference/table-format.md and docs/reference/split-format.md, which code and docs cite by
heading instead.

Checked: every text file of the source, tests, benchmarks, examples, scripts and docs, and the
top-level files. Not checked: NOTES.md (the team's working notes, which may name the team's own
documents), tests/data (fixtures written by other programs) and this file (it has to name them).
"""

from __future__ import annotations

import os
import re

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DIRS = ("src", "tests", "bench", "examples", "scripts", "docs", "docs_hooks", "conf", ".ci")
TOP_FILES = (
    "README.md",
    "CHANGELOG.md",
    "RELIABILITY.md",
    "Makefile",
    "mkdocs.yml",
    "pyproject.toml",
    "MANIFEST.in",
    "constraints.txt",
)
SKIPPED = {os.path.join("tests", "data"), "__pycache__", os.path.join("tests", os.path.basename(__file__))}
TEXT_EXTS = {"", ".py", ".md", ".yml", ".yaml", ".toml", ".txt", ".cfg", ".ini", ".sh", ".conf", ".js", ".css", ".html"}

# (pattern, what it is): the design documents by name, the notes, and paths outside the repository
FORBIDDEN = [
    (re.compile(r"(?<![\w/.-])protocol\.md"), "a design document (protocol.md)"),
    (re.compile(r"protocol-rendered\.txt"), "a design document (protocol-rendered.txt)"),
    (re.compile(r"table-protocol\.txt"), "a design document (table-protocol.txt)"),
    (re.compile(r"avro-state-file"), "a design document (avro-state-file.md)"),
    (re.compile(r"manifest-extension-plan"), "a design document (manifest-extension-plan.md)"),
    (re.compile(r"\bspec README\b"), "the design documents' README"),
    (re.compile(r"Test Plan §"), "a design document's test plan"),
    (re.compile(r"notes/split-format|platform-facts"), "the team's notes"),
    (re.compile(r"(?<![\w/.-])API\.md"), "the API contract document (API.md)"),
    (re.compile(r"\.\./shared\b|(?<![\w.])/work/"), "a path outside the repository"),
]


def checked_files() -> list[str]:
    out = [f for f in TOP_FILES if os.path.isfile(os.path.join(ROOT, f))]
    for top in DIRS:
        for d, subdirs, files in os.walk(os.path.join(ROOT, top)):
            rel_dir = os.path.relpath(d, ROOT)
            subdirs[:] = [s for s in subdirs if os.path.join(rel_dir, s) not in SKIPPED and s not in SKIPPED]
            for f in files:
                rel = os.path.join(rel_dir, f)
                if rel not in SKIPPED and os.path.splitext(f)[1] in TEXT_EXTS:
                    out.append(rel)
    return sorted(out)


def citations(text: str) -> list[tuple[int, str, str]]:
    """(line number, the text found, what it is) for each forbidden citation in text."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for pattern, what in FORBIDDEN:
            for m in pattern.finditer(line):
                found.append((n, m.group(0), what))
    return found


def test_no_citation_of_documents_outside_the_repository():
    files = checked_files()
    assert len(files) > 300 and "README.md" in files and os.path.join("docs", "index.md") in files
    wrong = []
    for rel in files:
        try:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue  # not text
        wrong += [f"{rel}:{n}: {found!r} ({what})" for n, found, what in citations(text)]
    assert wrong == [], (
        "cite docs/reference/table-format.md or split-format.md by heading, e.g. "
        '(docs/reference/table-format.md, "Actions"), not documents users do not have:\n' + "\n".join(wrong)
    )


# a citation of our format pages: the page and the first heading it names (may span lines, in comments)
CITATION = re.compile(r'docs/reference/(table-format|split-format)\.md,\s*(?:#\s*)?"([^"]+)"')


def headings(page: str) -> set[str]:
    with open(os.path.join(ROOT, "docs", "reference", page + ".md"), encoding="utf-8") as f:
        return {m.group(1).replace("`", "").strip() for m in re.finditer(r"^#+ (.+)$", f.read(), re.M)}


def test_citations_of_the_format_pages_name_their_headings():
    known = {page: headings(page) for page in ("table-format", "split-format")}
    cited, wrong = 0, []
    for rel in checked_files():
        if not rel.endswith((".py", ".md")):
            continue
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            text = f.read()
        for m in CITATION.finditer(text):
            cited += 1
            name = re.sub(r"\s+#?\s*", " ", m.group(2))
            if name not in known[m.group(1)]:
                wrong.append(f"{rel}: {m.group(1)}.md has no heading {name!r}")
    assert cited > 20 and wrong == [], wrong


# a path outside the repository and one inside it that shares a segment name, made of parts so
# that this file names no machine's path itself
OUTSIDE_PATHS = f"python3 {'..'}/{'shared'}/tools/x.py; git clone /{'work'}/main"
INSIDE_PATH = f"src/{'work'}/x"


def test_the_patterns_find_what_they_forbid_and_only_that():
    assert [w for _, _, w in citations('see protocol.md "Actions" and avro-state-file.md')] == [
        "a design document (protocol.md)",
        "a design document (avro-state-file.md)",
    ]
    assert citations("(manifest-extension-plan.md DeltaLog), spec README, Test Plan §6") != []
    assert len(citations(OUTSIDE_PATHS)) == 2
    assert len(citations("API.md and notes/split-format.md")) == 2
    # our own pages and unrelated names are fine
    assert citations("docs/reference/split-format.md, (split-format.md), table-format.md") == []
    assert citations(f"docs/reference/protocol.md, myprotocol.md, {INSIDE_PATH}, OPENAPI.md, the spec's kind") == []
