"""Secrets never print: recognisable fake secrets are planted in every place a user can put them —
read/write and `IndexTable` options (registered names, a misspelled one, one the registry does not
know), the environment (the cloud SDKs' variables, PYSPARK_SUBMIT_ARGS' `--conf` list,
SPARK_SUBMIT_OPTS' `-D` options, an Azure connection string), storage URLs (an S3 key pair in
the URL, an Azure SAS URL), a credential provider's result, the Spark session's conf (with
spark.driver.extraJavaOptions) — and every output is searched for them: DESCRIBE ENVIRONMENT (API,
CLI `--json`, SQL), repr of options and tables, error messages and their chained causes, log
records of every level, the job descriptions the package sets, Spark's plans and SQL tab."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import traceback
import urllib.request

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.config.options import Options, pack_secrets
from indextables_spark.config.redaction import redact_text, remember_secrets, secret_name
from indextables_spark.errors import IndexTablesError

FAKES = {
    "option": "FAKEOPTSECRET0001",
    "misspelled": "FAKEMISSPELLED0002",
    "api_token": "FAKEAPITOKEN0003",
    "env_key": "FAKEENVSECRET0004",
    "submit_args": "FAKESUBMITARGS0005",
    "submit_opts": "FAKESUBMITOPTS0006",
    "conn_key": "FAKECONNKEY0007+/=",
    "url_secret": "FAKEURLSECRET0008",
    "sas_sig": "FAKESASSIG0009",
    "provider": "FAKEPROVIDER0010",
    "java_opts": "FAKEJAVAOPTS0011",
    "session": "FAKESESSION0012",
}


def planted_env() -> dict[str, str]:
    return {
        "AWS_SECRET_ACCESS_KEY": FAKES["env_key"],
        "PYSPARK_SUBMIT_ARGS": f"--conf spark.indextables.aws.secretKey={FAKES['submit_args']} pyspark-shell",
        "SPARK_SUBMIT_OPTS": f"-Dspark.indextables.azure.accountKey={FAKES['submit_opts']} -Xmx1g",
        "AZURE_STORAGE_CONNECTION_STRING": (
            f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={FAKES['conn_key']};EndpointSuffix=x"
        ),
    }


def planted_options() -> dict[str, str]:
    return {
        "spark.indextables.aws.secretKey": FAKES["option"],
        "spark.indextables.aws.secretAccessKey": FAKES["misspelled"],  # not a registered key
        "spark.indextables.databricks.apiToken": FAKES["api_token"],  # not a registered key
    }


def leaked(texts: list[str]) -> list[tuple[str, str]]:
    """(which fake, where) for every planted value found in the texts."""
    return [(name, t[:200]) for t in texts for name, v in FAKES.items() if v in t or v.split("+")[0] in t]


def test_redaction_by_name_and_by_value():
    assert secret_name("spark.indextables.azure.connectionString") and secret_name("AWS_SECRET_ACCESS_KEY")
    assert secret_name("databricks.apiToken") and secret_name("aws.secretAccessKey")
    assert not secret_name("spark.driver.extraJavaOptions") and not secret_name("PYSPARK_SUBMIT_ARGS")
    assert secret_name("spark.my.custom", pattern="(?i)custom")
    texts = [
        f"--conf spark.indextables.aws.secretKey={FAKES['submit_args']} pyspark-shell",
        f"-Dspark.hadoop.fs.s3a.secret.key={FAKES['java_opts']}",
        f"AccountName=a;AccountKey={FAKES['conn_key']};",
        f"https://a.blob.core.windows.net/c/k?sv=2020&sig={FAKES['sas_sig']}&se=1",
        f"s3://AKIAFAKE:{FAKES['url_secret']}@bucket/t",
        json.dumps({"azure.sasToken": FAKES["sas_sig"]}),
        repr({"aws.sessionToken": FAKES["session"]}),
        # a pair inside the value of a pair whose name is no secret's (a URL's scheme, a label)
        f"https://b.s3.amazonaws.com/k?X-Amz-Credential={FAKES['sas_sig']}&X-Amz-Signature=x",
        f"conf: spark.indextables.aws.secretKey={FAKES['submit_args']}",
    ]
    assert leaked([redact_text(t) for t in texts]) == []
    # what is not a secret stays readable
    kept = "partition_key=day tokenizer=default indexing.typemap.body=text max_tokens=5"
    assert redact_text(kept) == kept
    # a long run of name characters (a base64 body in an SDK's log) is scanned once: a name pattern
    # that backtracked took seconds per 5,000 characters, and runs on every log record and error
    assert redact_text("Zm9v" * 50_000) == "Zm9v" * 50_000
    assert redact_text("a=" * 50_000) == "a=" * 50_000  # pairs in pairs: each step moves past a name
    # a registered option naming a column is no secret: its value must stay readable everywhere
    Options.of({"spark.indextables.indexing.typemap.session_token": "string"})
    assert redact_text("has type string") == "has type string"
    remember_secrets([FAKES["provider"]])
    assert FAKES["provider"] not in redact_text(f"a provider returned {FAKES['provider']}")


def test_options_and_errors_never_show_secrets(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    opts = Options.of(planted_options())
    shown = [repr(opts), str(opts.redacted())]
    path = str(tmp_path / "t")
    it.write_table(path, pa.table({"id": [1, 2], "body": ["a b", "c d"]}), options=planted_options())
    t = it.IndexTable(path, planted_options())
    shown += [repr(t), repr(t.options)]
    for bad in (
        lambda: t.snapshot(99),
        lambda: it.IndexTable(f"s3://AKIAFAKE:{FAKES['url_secret']}@no-such-bucket-here/t", planted_options()).count(),
        lambda: t.search(f"body:x AND secret={FAKES['option']}", limit=0),
        lambda: it.IndexTable(  # an Azure SDK error: its text carries the request URL, SAS included
            "wasbs://c@acct.blob.core.windows.net/t",
            {
                "spark.indextables.azure.sasToken": f"sv=2020-08-04&ss=b&sig={FAKES['sas_sig']}",
                "spark.indextables.azure.endpoint": "http://127.0.0.1:9/acct",
                "spark.indextables.storage.retry.maxAttempts": "1",
                "spark.indextables.storage.connectTimeoutMs": "500",
            },
        ).count(),
    ):
        with pytest.raises(IndexTablesError) as e:
            bad()
        shown += [str(e.value), repr(e.value), "".join(traceback.format_exception(e.value))]
    shown += [r.getMessage() for r in caplog.records]
    assert leaked(shown) == []


def test_describe_environment_hides_secrets_in_env_rows_and_cli(monkeypatch, tmp_path):
    for k, v in planted_env().items():
        monkeypatch.setenv(k, v)
    rows = it.describe_environment(options=planted_options())
    shown = [f"{r.property_name}={r.property_value}" for r in rows]
    assert leaked(shown) == []
    by_name = {r.property_name: r.property_value for r in rows}
    assert by_name["PYSPARK_SUBMIT_ARGS"] == "--conf spark.indextables.aws.secretKey=*** pyspark-shell"
    assert by_name["AWS_SECRET_ACCESS_KEY"] == "***REDACTED***"
    assert by_name["AZURE_STORAGE_CONNECTION_STRING"] == "***REDACTED***"
    args = [sys.executable, "-m", "indextables_spark.frontends.cli", "describe-environment", "--json"]
    for k, v in planted_options().items():
        args += ["-o", f"{k}={v}"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, env={**os.environ, **planted_env()})
    assert out.returncode == 0, out.stderr
    assert leaked([out.stdout, out.stderr]) == []
    assert "PYSPARK_SUBMIT_ARGS" in out.stdout


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


def test_spark_plans_sql_tab_job_descriptions_and_describe_sql_hide_secrets(spark, tmp_path):
    path = str(tmp_path / "t")
    it.write_table(path, pa.table({"id": [1, 2], "body": ["a b", "c d"]}))
    planted = {
        "spark.indextables.azure.accountKey": FAKES["option"],
        "spark.indextables.azure.connectionString": f"AccountName=a;AccountKey={FAKES['conn_key']};",
        "spark.indextables.databricks.apiToken": FAKES["api_token"],
    }
    try:
        for k, v in planted.items():
            spark.conf.set(k, v)
        df = spark.read.format("indextables").load(path)
        assert df.count() == 2
        it.sql(spark, f"CREATE OR REPLACE TEMPORARY VIEW secrets_v USING indextables OPTIONS (path '{path}')")
        spark.sql("SELECT count(*) FROM secrets_v").collect()
        env = it.sql(spark, "DESCRIBE INDEXTABLES ENVIRONMENT").collect()
        shown = [str(r) for r in env]
        shown.append(df._jdf.queryExecution().toString())
        sc = spark.sparkContext
        shown.append(str(sc.getLocalProperty("spark.job.description")))
        url = sc.uiWebUrl
        if url:  # the SQL tab: every statement's plan description, through the UI's REST API
            api = f"{url}/api/v1/applications/{sc.applicationId}/sql?details=true&planDescription=true"
            shown.append(urllib.request.urlopen(api, timeout=30).read().decode())
        assert leaked(shown) == []
    finally:
        for k in planted:
            spark.conf.unset(k)
