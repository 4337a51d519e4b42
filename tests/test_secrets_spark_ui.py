"""Secrets never print where only a real Spark shows them: a Spark program started with the
planted environment of tests/secret_plants.py (PYSPARK_SUBMIT_ARGS' `--conf` list and its
spark.driver.extraJavaOptions, SPARK_SUBMIT_OPTS, the cloud SDKs' variables, a connection string,
a SAS URL), with fakes in the session conf and in read/write and `IndexTable` options, a
credential provider's answer on S3, and failing reads (tests/secrets_spark_app.py). Searched: every
result, error and log record the program saw, its stdout and stderr (Spark's own log), and the
UI's REST API — the SQL tab (plans and the session conf each execution lists), the jobs (the
descriptions the package sets), the stages (their details: over Spark Connect, the text of each
request, with the reads' and writes' options). The same over a Spark Connect server of its own,
started with the planted environment and Java options, whose log is searched too.

Integration tier (tests/tiers.py): each test starts a Spark of its own (about two minutes).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from secret_plants import FAKES, PREFIX, leaks, planted_env
from spark_servers import ConnectServer, free_port

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"
REDACTED_BY_SPARK = "*********(redacted)"


def run_app(tmp_path: Path, *args: str) -> tuple[dict[str, str], dict[str, Any]]:
    """tests/secrets_spark_app.py in a process started with the planted environment: (every
    output it saw, with its stdout and stderr; the facts it noted)."""
    out = tmp_path / "outputs.json"
    tables = tmp_path / "tables"
    tables.mkdir()
    env = {
        **os.environ,
        **planted_env(),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)]),
    }
    app = [sys.executable, str(TESTS / "secrets_spark_app.py"), str(out), str(tables), *args]
    done = subprocess.run(app, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-5000:]
    saw = json.loads(out.read_text(encoding="utf-8"))
    return {**saw["outputs"], "stdout": done.stdout, "stderr": done.stderr}, saw["facts"]


def check_reached(outputs: dict[str, str], facts: dict[str, Any], conf_keys: list[str], java_option: str) -> None:
    """The planted secrets reached the outputs and were hidden there, not left out: a search of
    outputs they never reached would prove nothing. `conf_keys`: the secret options the session
    conf holds (from the Java options, the `--conf` list and `spark.conf.set`); `java_option`: a
    `-Dname=` of spark.driver.extraJavaOptions."""
    assert facts["count"] == 40
    workers = {r["property_name"]: r["property_value"] for r in facts["worker rows"]}
    driver = {r["property_name"]: r["property_value"] for r in facts["driver rows"]}
    for rows in (workers, driver):  # the workers' environment is the planted one too
        assert rows["AWS_SECRET_ACCESS_KEY"] == "***REDACTED***"
        assert "AccountKey" not in rows["AZURE_STORAGE_CONNECTION_STRING"]
        assert f"-D{PREFIX}azure.accountKey=***" in rows["SPARK_SUBMIT_OPTS"]
        assert "sig=***" in rows["AZURE_BLOB_URL"]
    assert f"{java_option}***" in driver["spark.driver.extraJavaOptions"]
    for key in conf_keys:  # DESCRIBE ENVIRONMENT lists them (the session's conf)
        assert driver[PREFIX + key] == "***REDACTED***", key
    # Spark's SQL tab lists the session conf with each execution, our secret options hidden
    assert f'"{PREFIX}azure.accountKey" : "{REDACTED_BY_SPARK}"' in outputs["Spark UI sql"]
    assert all(v for k, v in outputs.items() if k not in ("stdout", "stderr")), [k for k, v in outputs.items() if not v]


def test_classic_spark_program_started_with_secrets(tmp_path, s3_bucket, s3_endpoint):
    uri = f"s3://{s3_bucket}/secrets-ui-{uuid.uuid4().hex[:10]}"
    outputs, facts = run_app(tmp_path, "--s3-uri", uri, "--s3-endpoint", s3_endpoint)
    # from the Java options, PYSPARK_SUBMIT_ARGS' --conf list, SPARK_SUBMIT_OPTS and spark.conf.set
    conf_keys = ["azure.bearerToken", "azure.clientSecret", "azure.accountKey", "azure.connectionString"]
    check_reached(outputs, facts, conf_keys, "-Dfs.s3a.secret.key=")
    assert facts["s3 count"] == 20  # the provider's credentials were used
    jobs = outputs["Spark UI jobs"]
    assert "MERGE SPLITS " in jobs and "indextables aggregate " in jobs  # the descriptions the package sets
    assert leaks(outputs) == []


def test_spark_connect_server_started_with_secrets(tmp_path):
    ui = free_port()
    # the server withholds from clients the conf entries whose key or value Spark's
    # spark.redaction.regex matches (config/sessions.py): these Java options it hands out
    account_key = "fs.azure.account.key.acct.blob.core.windows.net"
    java_options = " ".join(
        f"-D{k}={FAKES['spark.driver.extraJavaOptions']}" for k in (PREFIX + "aws.externalId", account_key)
    )
    server = ConnectServer(
        tmp_path / "connect",
        extra_conf={
            "spark.ui.enabled": "true",
            "spark.ui.port": str(ui),
            "spark.driver.extraJavaOptions": java_options,
        },
        env=planted_env(),
    )
    server.start()
    try:
        outputs, facts = run_app(tmp_path, "--connect", server.url, "--ui", f"http://127.0.0.1:{ui}")
    finally:
        server.stop()
    check_reached(outputs, facts, ["aws.externalId", "azure.accountKey", "azure.connectionString"], f"-D{account_key}=")
    # each stage shows the request's text, with the reads' and writes' options: ours are hidden
    details = "\n".join(stage.get("details", "") for stage in json.loads(outputs["Spark UI stages"]))
    assert 'source: "indextables"' in details and re.search(r"options \{\s*" + re.escape(REDACTED_BY_SPARK), details)
    # the server's log, without the line the test harness writes (the command that started it)
    log = server.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    outputs["Spark Connect server log"] = "\n".join(line for line in log if not line.startswith("# "))
    assert leaks(outputs) == []
