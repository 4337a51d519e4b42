"""Fake secrets, one for each place a user can put a secret, and the search of outputs for them
(tests/test_secrets_everywhere.py; tests/test_secrets_spark_ui.py and the program it runs,
tests/secrets_spark_app.py).

Each fake is recognisable and distinct, so a leak names the place it came from. `leaks` searches a
text as printed, with its whitespace removed (a terminal table folds a long value over lines),
and for the URL-encoded and URL-decoded forms of each fake.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

# place -> its fake secret
FAKES = {
    "session conf": "FAKESESSIONCONF01",
    "session conf (connection string)": "FAKESESSIONCONN02",
    "write option": "FAKEWRITEOPT03",
    "read option": "FAKEREADOPT04",
    "misspelled option": "FAKEMISSPELLED05",
    "unregistered option": "FAKEAPITOKEN06",
    "iceberg catalog property": "FAKEICEBERG07",
    "IndexTable option": "FAKETABLEOPT08",
    "environment": "FAKEENVSECRET09",
    "PYSPARK_SUBMIT_ARGS": "FAKESUBMITARGS10",
    "SPARK_SUBMIT_OPTS": "FAKESUBMITOPTS11",
    "spark.driver.extraJavaOptions": "FAKEJAVAOPTS12",
    "storage URL": "FAKEURLSECRET13",
    "SAS token": "FAKESASSIG14",
    "connection string": "FAKECONNKEY15+/=",
    "provider result": "FAKEPROVIDER16",
}
PREFIX = "spark.indextables."


def planted_env() -> dict[str, str]:
    """The environment of a Spark program (or of any process) with a secret in each variable a
    user sets: the cloud SDKs' own, a `--conf` list (with Java options inside), `-D` options, a
    connection string, a SAS URL under a name that says nothing of secrets."""
    return {
        "AWS_SECRET_ACCESS_KEY": FAKES["environment"],
        "PYSPARK_SUBMIT_ARGS": (
            f"--conf {PREFIX}azure.clientSecret={FAKES['PYSPARK_SUBMIT_ARGS']} "
            f'--conf "spark.driver.extraJavaOptions=-D{PREFIX}azure.bearerToken={FAKES["spark.driver.extraJavaOptions"]} '
            f'-Dfs.s3a.secret.key={FAKES["spark.driver.extraJavaOptions"]}" pyspark-shell'
        ),
        "SPARK_SUBMIT_OPTS": f"-D{PREFIX}azure.accountKey={FAKES['SPARK_SUBMIT_OPTS']} -Duser.timezone=UTC",
        "AZURE_STORAGE_CONNECTION_STRING": (
            f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={FAKES['connection string']};"
            "EndpointSuffix=core.windows.net"
        ),
        "AZURE_BLOB_URL": f"https://acct.blob.core.windows.net/c?sv=2020-08-04&sr=c&sig={FAKES['SAS token']}&se=x",
    }


def planted_options() -> dict[str, str]:
    """Options with secrets the registry does not name: misspelled, unregistered, and a
    property of another library (a pyiceberg catalog's token)."""
    return {
        f"{PREFIX}aws.secretAccesKey": FAKES["misspelled option"],
        f"{PREFIX}databricks.apiToken": FAKES["unregistered option"],
        f"{PREFIX}iceberg.catalog.rest.token": FAKES["iceberg catalog property"],
        f"{PREFIX}azure.connectionString": f"AccountName=acct;AccountKey={FAKES['connection string']};",
    }


def table_options() -> dict[str, str]:
    """The options of an `IndexTable(path, options)` (and of a Spark-free write)."""
    return {f"{PREFIX}aws.sessionToken": FAKES["IndexTable option"], **planted_options()}


def write_options() -> dict[str, str]:
    return {f"{PREFIX}azure.accountKey": FAKES["write option"], **planted_options()}


def read_options() -> dict[str, str]:
    return {f"{PREFIX}azure.bearerToken": FAKES["read option"], **planted_options()}


def session_conf() -> dict[str, str]:
    """Secrets set in a Spark session's conf (`spark.conf.set`)."""
    return {
        f"{PREFIX}azure.accountKey": FAKES["session conf"],
        f"{PREFIX}azure.connectionString": f"AccountName=acct;AccountKey={FAKES['session conf (connection string)']};",
    }


def sas_failure_options(sas: str = FAKES["SAS token"]) -> dict[str, str]:
    """An Azure table whose requests fail at once (nothing listens on port 9): its errors carry
    the request URL, and the URL the SAS token."""
    return {
        f"{PREFIX}azure.sasToken": f"sv=2020-08-04&ss=b&sig={sas}",
        f"{PREFIX}azure.endpoint": "http://127.0.0.1:9/acct",
        f"{PREFIX}storage.retry.maxAttempts": "1",
        f"{PREFIX}storage.connectTimeoutMs": "500",
    }


def url_with_credentials(bucket: str = "no-such-bucket-here") -> str:
    return f"s3://AKIAFAKEURL:{FAKES['storage URL']}@{bucket}/t"


_SPACE = re.compile(r"\s+")


def _forms(secret: str) -> set[str]:
    return {secret, quote(secret, safe=""), unquote(secret), secret.split("+")[0]}


def leaks(outputs: dict[str, str]) -> list[str]:
    """`place -> output: …context…` for every fake found in the outputs (empty: none)."""
    found = []
    for output, text in outputs.items():
        for view in (text, _SPACE.sub("", text)):
            for place, secret in FAKES.items():
                for form in _forms(secret):
                    i = view.find(form)
                    if i >= 0:
                        context = view[max(0, i - 120) : i].replace("\n", " | ")
                        found.append(f"{place} -> {output}: …{context}<{place}>")
    return sorted(set(found))
