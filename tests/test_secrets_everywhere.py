"""Secrets never print: a recognisable fake secret is planted in every place a user can put one
(tests/secret_plants.py: the session conf, read/write and `IndexTable` options — registered,
misspelled, unregistered, a pyiceberg catalog's property —, the environment, PYSPARK_SUBMIT_ARGS'
`--conf` list, SPARK_SUBMIT_OPTS' `-D` options, spark.driver.extraJavaOptions, storage URLs, SAS
tokens, connection strings, a credential provider's result), and every output is searched for
them: DESCRIBE ENVIRONMENT and every other DESCRIBE (Python API, SQL, table functions, the CLI's
tables and `--json`), explain, error messages of storage failures, log records at DEBUG (every
logger), warnings, progress reports and bars, reprs, the docs site's hook, stdout and stderr.

This file is the fast tier's part: Spark-free, and the `spark` fixture's session (whose UI is off).
tests/test_secrets_spark_ui.py runs a Spark program started with the planted environment and a
Spark Connect server of its own, and searches the UI's SQL tab, jobs and stages too.
"""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import os
import re
import subprocess
import sys
import traceback
import warnings
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
from secret_plants import (
    FAKES,
    leaks,
    planted_env,
    planted_options,
    read_options,
    sas_failure_options,
    session_conf,
    table_options,
    url_with_credentials,
    write_options,
)

import indextables_spark as it
from indextables_spark.api.progress import TerminalBars
from indextables_spark.config import option_checks
from indextables_spark.config.options import Options, pack_secrets
from indextables_spark.config.redaction import (
    SPARK_OPTIONS_REGEX,
    SPARK_STRING_REGEX,
    redact_text,
    remember_secrets,
    secret_name,
    secret_option,
    spark_redaction_regexes,
)
from indextables_spark.config.sessions import job_description
from indextables_spark.errors import IndexTablesError
from indextables_spark.frontends import cli
from indextables_spark.util.renamed import renamed

ROOT = Path(__file__).resolve().parents[1]
AZURE_PATH = "wasbs://c@acct.blob.core.windows.net/t"


def test_redaction_by_name_and_by_value():
    assert secret_name("spark.indextables.azure.connectionString") and secret_name("AWS_SECRET_ACCESS_KEY")
    assert secret_name("databricks.apiToken") and secret_name("aws.secretAccessKey")
    assert not secret_name("spark.driver.extraJavaOptions") and not secret_name("PYSPARK_SUBMIT_ARGS")
    assert secret_name("spark.my.custom", pattern="(?i)custom")
    texts = [
        f"--conf spark.indextables.aws.secretKey={FAKES['PYSPARK_SUBMIT_ARGS']} pyspark-shell",
        f"-Dspark.hadoop.fs.s3a.secret.key={FAKES['spark.driver.extraJavaOptions']}",
        f"AccountName=a;AccountKey={FAKES['connection string']};",
        f"https://a.blob.core.windows.net/c/k?sv=2020&sig={FAKES['SAS token']}&se=1",
        url_with_credentials(),
        json.dumps({"azure.sasToken": FAKES["SAS token"]}),
        repr({"aws.sessionToken": FAKES["IndexTable option"]}),
        # a pair inside the value of a pair whose name is no secret's (a URL's scheme, a label)
        f"https://b.s3.amazonaws.com/k?X-Amz-Credential={FAKES['SAS token']}&X-Amz-Signature=x",
        f"conf: spark.indextables.aws.secretKey={FAKES['PYSPARK_SUBMIT_ARGS']}",
    ]
    assert leaks({f"text {i}": redact_text(t) for i, t in enumerate(texts)}) == []
    # what is not a secret stays readable
    kept = "partition_key=day tokenizer=default indexing.typemap.body=text max_tokens=5"
    assert redact_text(kept) == kept
    # an error's class before its message is no secret's name (botocore's message read "***")
    kept = "NoCredentialsError: Unable to locate credentials; InvalidSignatureException: The signature"
    assert redact_text(kept) == kept
    # a long run of name characters (a base64 body in an SDK's log) is scanned once: a name pattern
    # that backtracked took seconds per 5,000 characters, and runs on every log record and error
    assert redact_text("Zm9v" * 50_000) == "Zm9v" * 50_000
    assert redact_text("a=" * 50_000) == "a=" * 50_000  # pairs in pairs: each step moves past a name
    # a registered option naming a column is no secret: its value must stay readable everywhere
    Options.of({"spark.indextables.indexing.typemap.session_token": "string"})
    assert redact_text("has type string") == "has type string"
    remember_secrets([FAKES["provider result"]])
    assert FAKES["provider result"] not in redact_text(f"a provider returned {FAKES['provider result']}")


def test_another_librarys_properties_are_judged_by_their_names():
    """`iceberg.catalog.<name>.<key>` is registered, but its keys are pyiceberg's properties: a
    catalog's `token`, `credential` or `s3.secret-access-key` is a secret (it was shown in clear
    by repr(options) and DESCRIBE ENVIRONMENT), its `uri` or `warehouse` is not; the column
    families (`indexing.typemap.<col>`) stay plain whatever the column's name."""
    for key in ("rest.token", "rest.credential", "glue.s3.secret-access-key", "x.adls.account-key"):
        assert secret_name(f"spark.indextables.iceberg.catalog.{key}") and secret_option(f"iceberg.catalog.{key}")
    for key in ("rest.uri", "rest.warehouse", "glue.type"):
        assert not secret_option(f"iceberg.catalog.{key}") and not secret_name(f"iceberg.catalog.{key}")
    assert not secret_option("indexing.typemap.session_token") and not secret_name("indexing.tokenizer.api_key")
    opts = Options.of({"spark.indextables.iceberg.catalog.rest.token": FAKES["iceberg catalog property"]})
    assert leaks({"repr": repr(opts), "text": redact_text(f"token {FAKES['iceberg catalog property']}")}) == []


def test_spark_redaction_patterns_say_what_secret_option_says():
    """The patterns Spark is given (config/sessions.py extend_spark_redaction) hide exactly the
    conf keys whose values the package hides, as a key (options regex) and as a `key: "…" value:
    "…"` pair of a Spark Connect request's text (string regex). Java's regex syntax is Python's for
    what they use; tests/test_secrets_spark_ui.py runs them in Spark."""
    regexes = spark_redaction_regexes()
    as_key, in_text = re.compile(regexes[SPARK_OPTIONS_REGEX]), re.compile(regexes[SPARK_STRING_REGEX])
    keys = [
        *planted_options(),
        *table_options(),
        *read_options(),
        *write_options(),
        *session_conf(),
        "spark.indextables.aws.accessKey",
        "spark.indextables.aws.externalId",
        "spark.indextables.secrets",
        "spark.indextables.aws.region",
        "spark.indextables.aws.roleSessionName",
        "spark.indextables.aws.credentialsProvider",
        "spark.indextables.credentials.refreshBufferSeconds",
        "spark.indextables.indexing.typemap.session_token",
        "spark.indextables.iceberg.catalog.rest.uri",
        "spark.indextables.read.limit",
    ]
    for key in keys:
        secret = secret_option(key)
        assert bool(as_key.search(key)) == secret, key
        pair = f'options {{\n  key: "{key}"\n  value: "a \\"quoted\\" {FAKES["read option"]}"\n}}'
        assert (FAKES["read option"] not in in_text.sub("***", pair)) == secret, key
    assert not as_key.search("spark.other.secretKey") and not as_key.search("x.spark.indextables.aws.secretKey")


def test_unknown_keys_and_log_records_before_any_secret_is_known():
    """A fresh process, where no secret value is known yet: a value given inside an unknown key
    (`k=v` or `k v` given as the key) is not shown by the unknown-option warning, a misspelled
    secret's value never is, and a pair in a log record is hidden from the first record on."""
    program = f"""
import logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(name)s %(message)s")
from indextables_spark.config.options import Options
logging.getLogger("indextables_spark.test").warning("conf: spark.indextables.aws.secretKey={FAKES["environment"]}")
Options.of({{"spark.indextables.aws.secretKey={FAKES["misspelled option"]}": ""}})
Options.of({{"spark.indextables.azure.sasToken {FAKES["SAS token"]}": "x"}})
Options.of({{"spark.indextables.aws.secretAccesKey": "{FAKES["unregistered option"]}"}})
"""
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("unknown option") == 3 and "characters not shown" in out.stdout
    assert leaks({"stdout": out.stdout, "stderr": out.stderr}) == []


def test_packed_secrets_round_trip():
    given = {"spark.indextables.azure.accountKey": "k1234", "spark.indextables.read.limit": "5", "path": "/t"}
    packed = pack_secrets(given)
    assert "spark.indextables.azure.accountKey" not in packed and "k1234" not in json.dumps(
        {k: v for k, v in packed.items() if "secret" not in k}
    )
    opts = Options.of(packed)
    assert opts["azure.accountKey"] == "k1234" and opts["read.limit"] == "5"
    # an option given explicitly wins over the packed copy of the session's
    assert Options.of({**packed, "spark.indextables.azure.accountKey": "mine"})["azure.accountKey"] == "mine"


def _flags(options: dict[str, str]) -> list[str]:
    return [a for k, v in options.items() for a in ("-o", f"{k}={v}")]


def _error_text(e: BaseException) -> str:
    return f"{e}\n{e!r}\n" + "".join(traceback.format_exception(e))


def _docs_hook_output() -> str:
    """The docs site's hook (docs_hooks/options_table.py) filling the options table."""
    spec = importlib.util.spec_from_file_location("options_table_hook", ROOT / "docs_hooks" / "options_table.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = SimpleNamespace(file=SimpleNamespace(src_uri=hook.PAGE))
    return str(hook.on_page_markdown((ROOT / "docs" / hook.PAGE).read_text(encoding="utf-8"), page))


def test_every_spark_free_output(tmp_path, monkeypatch, capfd):
    """Every place a Spark-free program has (options, environment, URLs, SAS tokens, connection
    strings) × every Spark-free output."""
    for k, v in planted_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(option_checks, "_warned", set())  # unknown keys are logged once per process
    monkeypatch.setenv("COLUMNS", "400")  # rich's width: the CLI's tables unfolded (folds are searched too)
    outputs: dict[str, str] = {}
    log_text = io.StringIO()
    handler = logging.StreamHandler(log_text)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    reports: list[str] = []
    bars_text = io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            path = str(tmp_path / "t")
            from rich.console import Console

            with TerminalBars(Console(file=bars_text, force_terminal=True, width=200)) as bars:

                def progress(p: it.Progress) -> None:
                    reports.append(repr(p))
                    bars(p)

                for start in (0, 2):
                    rows = pa.table({"id": [start, start + 1], "body": ["a b", "c d"]})
                    it.write_table(path, rows, options=write_options(), progress=progress)
                t = it.IndexTable(path, table_options())
                outputs["results (Python API)"] = "\n".join(
                    repr(x)
                    for x in (
                        t.inspect.describe(),
                        t.inspect.state(),
                        t.inspect.history(),
                        t.inspect.transaction_log(include_all=True).to_pylist(),
                        t.inspect.component_sizes().to_pylist(),
                        t.files(),
                        t.search('body:"a b"', limit=5).to_pylist(),
                        t.maintenance.merge_splits(progress=progress),
                        t.maintenance.checkpoint(progress=progress),
                        t.maintenance.purge(dry_run=True, progress=progress),
                        it.describe_disk_cache(options=table_options()),
                        it.describe_storage_stats(),
                    )
                )
            outputs["explain (Spark-free)"] = json.dumps(
                t.explain('body:"a b"', "id > 0").to_dict(), default=str
            ) + repr(t.explain('body:"a b"'))
            outputs["reprs"] = " ".join(
                [
                    repr(t),
                    repr(t.options),
                    repr(t.storage),
                    repr(Options.of(table_options())),
                    str(t.options.redacted()),
                ]
            )
            env_rows = it.describe_environment(options=table_options())
            outputs["DESCRIBE ENVIRONMENT (Python API)"] = "\n".join(map(repr, env_rows))
            by_name = {r.property_name: r.property_value for r in env_rows}
            # the planted values reached the rows, hidden (not absent)
            assert by_name["AWS_SECRET_ACCESS_KEY"] == "***REDACTED***"
            assert "spark.indextables.azure.clientSecret=***" in by_name["PYSPARK_SUBMIT_ARGS"]
            assert "-Dspark.indextables.azure.accountKey=***" in by_name["SPARK_SUBMIT_OPTS"]
            assert "sig=***" in by_name["AZURE_BLOB_URL"]
            assert by_name["spark.indextables.iceberg.catalog.rest.token"] == "***REDACTED***"

            # storage failures: credentials in the path, a request to a SAS-signed URL that fails
            sas_only = {**{k: v for k, v in table_options().items() if ".azure." not in k}, **sas_failure_options()}
            failures = {
                "S3 URL with credentials": lambda: it.IndexTable(url_with_credentials(), table_options()).count(),
                "Azure SAS, nothing listening": lambda: it.IndexTable(AZURE_PATH, sas_only).count(),
                "a version that does not exist": lambda: t.snapshot(99),
                "a query quoting a secret": lambda: t.search(
                    f"body:x AND secret={FAKES['IndexTable option']}", limit=0
                ),
            }
            for what, fail in failures.items():
                with pytest.raises(IndexTablesError) as e:
                    fail()
                outputs[f"error: {what}"] = _error_text(e.value)

            # the command line: tables and --json, every DESCRIBE, a search, an error
            for command, options in (
                (["describe-environment"], table_options()),
                (["describe-environment", "--json"], table_options()),
                (["describe", path], table_options()),
                (["describe", path, "--json"], table_options()),
                (["describe-state", path], table_options()),
                (["describe-log", path, "--all", "--json"], table_options()),
                (["history", path], table_options()),
                (["files", path, "--json"], table_options()),
                (["describe-storage-stats"], table_options()),
                (["describe-component-sizes", path], table_options()),
                (["search", path, 'body:"a b"'], table_options()),
                (["sql", f"DESCRIBE INDEXTABLES TABLE '{path}'"], table_options()),
                (["describe", url_with_credentials()], table_options()),
                (["describe", AZURE_PATH], sas_only),
            ):
                code = cli.main(command + _flags(options))
                out, err = capfd.readouterr()
                outputs[f"CLI {' '.join(command)}"] = f"{code}\n{out}\n{err}"
                assert (code == 0) == (url_with_credentials() not in command and AZURE_PATH not in command), err
            assert "--conf spark.indextables.azure.clientSecret=***" in outputs["CLI describe-environment"]
            # usage errors, which quote the arguments: `:` for `=`, a pair given without `-o`
            for mistake in (
                ["-o", f"spark.indextables.aws.secretKey:{FAKES['misspelled option']}"],
                [f"spark.indextables.azure.sasToken=sv=1&sig={FAKES['SAS token']}"],
            ):
                with pytest.raises(SystemExit) as exit_:
                    cli.main(["describe", path, *mistake])
                out, err = capfd.readouterr()
                assert exit_.value.code == 2 and "error:" in err
                outputs[f"CLI usage error {mistake[0]}"] = out + err
            assert "StorageError" in outputs[f"CLI describe {AZURE_PATH}"]  # the request was made, and failed

            # FutureWarning of a renamed argument given a secret-looking value
            renamed("search_join", "vector_column", None, "column", FAKES["read option"])
        outputs["warnings"] = "\n".join(str(w.message) for w in caught)
        assert any(issubclass(w.category, FutureWarning) for w in caught)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    outputs["log records (DEBUG)"] = log_text.getvalue()
    assert "unknown option spark.indextables.aws.secretAccesKey" in log_text.getvalue()  # logged, without its value
    outputs["progress reports"] = "\n".join(reports)
    outputs["progress bars"] = bars_text.getvalue()
    assert reports and "writing" in bars_text.getvalue()
    outputs["docs site hook"] = _docs_hook_output()
    assert all(outputs.values()), [k for k, v in outputs.items() if not v]  # every output was produced
    out, err = capfd.readouterr()  # and whatever else reached the terminal
    assert leaks({**outputs, "stdout": out, "stderr": err}) == []


def test_describe_environment_cli_process_started_with_the_secrets():
    """The command line as a user runs it: a process started with the planted environment, its
    output piped (`--json`; test_every_spark_free_output has the tables)."""
    args = [sys.executable, "-m", "indextables_spark.frontends.cli", "describe-environment", "--json"]
    out = subprocess.run(
        args + _flags(table_options()), capture_output=True, text=True, timeout=120, env={**os.environ, **planted_env()}
    )
    assert out.returncode == 0, out.stderr
    assert "PYSPARK_SUBMIT_ARGS" in out.stdout and "AZURE_STORAGE_CONNECTION_STRING" in out.stdout
    assert leaks({"CLI describe-environment --json": out.stdout + out.stderr}) == []


@pytest.mark.cloud
def test_provider_results_never_show(s3_uri, s3_options, tmp_path, capfd, caplog):
    """A credential provider's answer (`aws.credentialsProvider`, tests/credential_providers.py
    planted) used on S3: its keys are in every request the SDK logs at DEBUG, and must show in
    no output: results, reprs, errors, the CLI (which calls the provider itself), log records."""
    caplog.set_level(logging.DEBUG)
    opts = {
        **{k: v for k, v in s3_options.items() if not k.endswith(("aws.accessKey", "aws.secretKey"))},
        "spark.indextables.aws.credentialsProvider": "credential_providers:planted",
    }
    outputs: dict[str, str] = {}
    it.write_table(s3_uri, pa.table({"id": [1, 2], "body": ["a b", "c d"]}), options=opts)
    t = it.IndexTable(s3_uri, opts)
    outputs["results"] = repr([t.count(), t.inspect.describe(), t.inspect.state(), t.explain('body:"a b"').to_dict()])
    outputs["reprs"] = repr(t) + repr(t.storage) + repr(t.options)
    outputs["DESCRIBE ENVIRONMENT"] = repr(it.describe_environment(options=opts))
    with pytest.raises(IndexTablesError) as e:
        it.IndexTable(s3_uri + "-missing", opts).snapshot()
    outputs["error"] = _error_text(e.value)
    for command in (["describe", s3_uri, "--json"], ["describe-state", s3_uri]):
        code = cli.main(command + _flags(opts))
        out, err = capfd.readouterr()
        outputs[f"CLI {command[0]}"] = f"{code}\n{out}\n{err}"
    assert sum(r.name.startswith("botocore") for r in caplog.records) > 20  # the SDK logged its requests
    outputs["log records (DEBUG)"] = caplog.text
    assert all(outputs.values())
    assert leaks(outputs) == []


def test_spark_session_outputs(spark, tmp_path, capfd):
    """The `spark` fixture's session, the fast tier's share of tests/test_secrets_spark_ui.py
    (which also starts Spark with the planted environment, and searches the UI this session has
    off): the session conf and read/write options planted; DESCRIBE ENVIRONMENT through SQL (the
    workers' rows too) and DESCRIBE TABLE, explain (it.explain, the query execution, the
    Spark-free IndexTable's with the session), the job description the package sets."""
    path = str(tmp_path / "t")
    try:
        for k, v in session_conf().items():
            spark.conf.set(k, v)
        df = spark.createDataFrame([(1, "a b"), (2, "c d")], "id long, body string")
        df.write.format("indextables").options(**write_options()).mode("overwrite").save(path)
        read = spark.read.format("indextables").options(**read_options()).load(path)
        assert read.count() == 2
        outputs: dict[str, str] = {}
        env = it.sql(spark, "DESCRIBE INDEXTABLES ENVIRONMENT").collect()
        outputs["DESCRIBE ENVIRONMENT (SQL)"] = "\n".join(map(str, env))
        assert any(r.role == "worker" for r in env)  # the workers' rows are there
        conf = {r.property_name: r.property_value for r in env if r.property_type == "spark"}
        assert conf["spark.indextables.azure.accountKey"] == "***REDACTED***"  # the session conf reached it
        outputs["DESCRIBE TABLE (SQL)"] = repr(it.sql(spark, f"DESCRIBE INDEXTABLES TABLE '{path}'").collect())
        filtered = read.filter("id > 0")
        outputs["it.explain"] = json.dumps(it.explain(filtered), default=str)
        outputs["query execution"] = filtered._jdf.queryExecution().toString()
        t = it.IndexTable(path, table_options(), spark=spark)
        outputs["IndexTable(spark).explain"] = json.dumps(t.explain('body:"a b"').to_dict(), default=str) + repr(t)
        sc = spark.sparkContext
        statement = (
            f"MERGE SPLITS '{url_with_credentials()}' sas {sas_failure_options()['spark.indextables.azure.sasToken']}"
        )
        with job_description(spark, statement):
            outputs["job description"] = str(sc.getLocalProperty("spark.job.description"))
        assert outputs["job description"].startswith("MERGE SPLITS 's3://")
        # Spark hides our secret options where it shows them itself (checked in its UI by
        # tests/test_secrets_spark_ui.py); the session's own pattern is kept
        ours = spark_redaction_regexes()
        assert spark.conf.get(SPARK_OPTIONS_REGEX) == f"(?i)url|{ours[SPARK_OPTIONS_REGEX]}"
        assert spark.conf.get(SPARK_STRING_REGEX) == ours[SPARK_STRING_REGEX]
        out, err = capfd.readouterr()
        outputs["stdout"], outputs["stderr"] = out, err
        assert leaks({k: v for k, v in outputs.items() if v}) == []
    finally:
        for k in session_conf():
            spark.conf.unset(k)
