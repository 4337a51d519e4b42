"""The option registry (issue 17, criterion 2): every option read is registered with its one
default, the documentation's options table (docs/configuration.md) is generated from it, unknown
keys are named with the closest known key, secrets are redacted from its flags."""

from __future__ import annotations

import ast
import importlib.util
import logging
import pathlib

import pytest

from indextables_spark.config import registry as reg
from indextables_spark.config.options import Options, UnregisteredOptionError

ROOT = pathlib.Path(__file__).resolve().parent.parent
GETTERS = {"get_int", "get_bool", "get_float", "get_size", "get_duration_ms", "get_str", "with_prefix"}


def option_reads():
    """(file, line, method, key, default node) of every literal-key option read in the package."""
    for path in sorted((ROOT / "src" / "indextables_spark").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in GETTERS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                yield path.name, node.lineno, node.func.attr, node.args[0].value, (node.args[1:2] or [None])[0]


def test_every_read_option_is_registered_with_one_default():
    reads = list(option_reads())
    assert len(reads) > 100
    for name, line, method, key, default in reads:
        if method == "with_prefix":
            assert reg.spec(key + ".x") is not None, f"{name}:{line}: option family {key}.<…> is not registered"
            continue
        spec = reg.spec(key)
        assert spec is not None, f"{name}:{line}: option {key!r} is read but not registered"
        # the registry holds the default: a literal default where it is read would be a second one
        if default is not None and method != "get_str":
            assert not isinstance(default, ast.Constant), (
                f"{name}:{line}: {key!r} read with its own default {ast.unparse(default)}; the registry's is {spec.default!r}"
            )


def _options_hook():
    spec = importlib.util.spec_from_file_location("options_table", ROOT / "docs_hooks" / "options_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_table_is_the_registry():
    """The table the site shows (the mkdocs hook fills it from the registry at build time) and the
    copy committed in docs/configuration.md (what GitHub shows) are the registry's."""
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    hook = _options_hook()
    start = page.index(hook.BEGIN)
    committed = page[page.index("\n", start) + 1 : page.index(hook.END)].strip()
    assert committed == reg.markdown_table(), "regenerate it: .venv/bin/python docs_hooks/options_table.py"
    built = hook.fill(page.replace(committed, "(stale)"), hook.registry_table())
    assert built == page and hook.registry_table() == reg.markdown_table()


def test_defaults_come_from_the_registry():
    o = Options.of({"checkpoint.interval": "5"})
    assert o.get_int("checkpoint.interval") == 5 and o.get_int("state.read.parallelism") == 8
    assert o.get_size("cache.disk.maxSize") == 10 << 30 and o.get_bool("checkpoint.enabled") is True
    assert o.get_str("query") is None and o.get_str("indexing.typemap.body") is None  # get_str: as given
    with pytest.raises(UnregisteredOptionError, match="nope.x"):
        o.get_int("nope.x")


def test_unknown_keys_are_named_with_the_closest(caplog):
    with caplog.at_level(logging.WARNING, logger="indextables_spark.config.options"):
        Options.of(
            {
                "spark.indextables.checkpoint.intervall": "3",
                "spark.indextables.indexing.typemap.body": "text",
                "path": "/t",
            }
        )
    msgs = [r.getMessage() for r in caplog.records]
    assert any("checkpoint.intervall" in m and "did you mean spark.indextables.checkpoint.interval" in m for m in msgs)
    assert not any("typemap" in m or "path" in m for m in msgs)
    assert reg.unknown_keys(["aws.secrtKey", "query"]) == [("aws.secrtKey", "aws.secretKey")]


def test_secrets_follow_the_registry_flags():
    secret = {o.key.lower() for o in reg.OPTIONS if o.secret}
    assert {"aws.secretkey", "azure.accountkey", "azure.connectionstring"} <= secret
    given = {f"spark.indextables.{k}": "s3cr3t" for k in secret if k != "secrets"}  # secrets: packed JSON
    o = Options.of(given | {"aws.region": "eu"})
    assert "s3cr3t" not in repr(o) and o.redacted()["aws.region"] == "eu"


@pytest.mark.parametrize(
    "text, size",
    [
        ("1T", 1 << 40),
        ("100M", 100 << 20),
        (" 2 g ", 2 << 30),
        ("1.5G", 3 << 29),
        (".5k", 512),
        ("1e3", 1000),
        ("7", 7),
    ],
)
def test_one_size_grammar_for_options_sql_and_the_command_line(text, size):
    """config/units.py reads sizes everywhere: an option, a SQL clause and a CLI flag agree."""
    from indextables_spark.frontends import cli
    from indextables_spark.frontends.sql_parser import parse_command

    assert Options.of({"merge.targetSize": text}).get_size("merge.targetSize") == size
    if text[0].isdigit() and "e" not in text:  # the SQL lexer reads `.5k` and `1e3` as several tokens
        assert parse_command(f"MERGE SPLITS '/t' TARGET SIZE {text.strip()}").target_size == size
    args = cli.build_parser().parse_args(["merge-splits", "/t", "--target-size", text])
    assert args.target_size == size


@pytest.mark.parametrize("text", ["1X", "-1", "big", "inf", "1e400"])
def test_sizes_outside_the_grammar_are_refused(text):
    from indextables_spark.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="merge.targetSize"):
        Options.of({"merge.targetSize": text}).get_size("merge.targetSize")


@pytest.mark.parametrize(
    "text, hours", [("7d", 168.0), ("36h", 36.0), ("2 days", 48.0), ("1.5 DAY", 36.0), ("12", 12.0)]
)
def test_one_duration_grammar(text, hours):
    from indextables_spark.config.units import parse_hours
    from indextables_spark.frontends.sql_parser import parse_command

    assert parse_hours(text) == hours
    if not text.isdigit():  # the SQL clause requires the unit
        assert parse_command(f"PURGE INDEXTABLE '/t' OLDER THAN {text}").older_than_hours == hours
