"""Credentials providers for tests/test_cloud_credentials.py (named there as `credential_providers:...`).

They are real provider callables: imported by name from the option, called as `fn(uri, options)`.
Settings come through the table options (unregistered keys, the way a provider's own settings
travel to the executors): `test.credentials.lifetimeSeconds` (how long each answer is valid),
`test.credentials.callLog` (a file each call appends "pid uri" to, so calls made in Spark's Python
workers are seen by the test).
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import json
import os
import threading
import time

from indextables_spark.core.storage.credentials import AwsCredentials, AzureToken

UTC = dt.timezone.utc
_counter = itertools.count(1)
_lock = threading.Lock()
CALLS: list[str] = []  # the uri of every call made in this process


def _record(uri: str, options) -> int:
    with _lock:
        n = next(_counter)
        CALLS.append(uri)
    log = options.get("test.credentials.callLog")
    if log:
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {uri}\n")
    return n


def access_key_of(n: int) -> str:
    """The access key of the provider's n-th answer in a process (distinctive, for the tests to look for)."""
    return f"AKIAITPROVIDER{n:06d}"


def short_lived(uri: str, options) -> AwsCredentials:
    """Fresh S3 credentials on every call, valid for `test.credentials.lifetimeSeconds` (default 3)."""
    n = _record(uri, options)
    lifetime = float(options.get("test.credentials.lifetimeSeconds", "3"))
    return AwsCredentials(
        access_key=access_key_of(n),
        secret_key=f"providerSecret/{n}/{os.getpid()}+x",
        session_token=f"providerToken{n}x{os.getpid()}",
        expiry=dt.datetime.now(UTC) + dt.timedelta(seconds=lifetime),
    )


def as_mapping(uri: str, options) -> dict:
    """The same answer as a mapping with AwsCredentials' field names (accepted too)."""
    n = _record(uri, options)
    return {"access_key": access_key_of(n), "secret_key": "mappingSecretValue", "expiry": None}


def planted(uri: str, options) -> AwsCredentials:
    """The provider-result fake of tests/secret_plants.py in each credential (moto accepts any)."""
    from secret_plants import FAKES  # lazy: only the secrets tests name this provider

    secret = FAKES["provider result"]
    return AwsCredentials(access_key=f"AKIA{secret}", secret_key=f"{secret}/secret+x", session_token=f"{secret}token")


LEAKY_SECRET = "leakySecretValue-9f3b2c"


def wrong_shape(uri: str, options):
    """Answers a tuple holding a secret: the error must not show it."""
    return ("AKIAWRONGSHAPE", LEAKY_SECRET, None)


def failing(uri: str, options):
    """Fails with a message that quotes the provider's own API token (an option): it must be redacted."""
    raise PermissionError(f"token {options['my.provider.apiToken']} was refused by the credential service")


def already_expired(uri: str, options) -> AwsCredentials:
    return AwsCredentials("AKIAEXPIRED", "expiredSecret", None, dt.datetime.now(UTC) - dt.timedelta(seconds=5))


NOT_CALLABLE = 42


# -- Azure ------------------------------------------------------------------------------------------


def storage_jwt(lifetime_s: float, marker: str = "") -> tuple[str, dt.datetime]:
    """An unsigned JWT shaped like an Entra ID token for Azure Storage (what Azurite's `--oauth basic`
    checks: audience, issuer, not-before and expiry; not the signature), and its expiry."""
    now = time.time()
    exp = int(now + lifetime_s)

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = {"alg": "RS256", "typ": "JWT"}
    claims = {
        "aud": "https://storage.azure.com",
        "iss": "https://sts.windows.net/00000000-0000-0000-0000-000000000000/",
        "iat": int(now) - 60,
        "nbf": int(now) - 60,
        "exp": exp,
        "oid": marker or "indextables-test",
    }
    token = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}.{b64(b'not-checked')}"
    return token, dt.datetime.fromtimestamp(exp, UTC)


def azure_short_lived(uri: str, options) -> AzureToken:
    """A bearer token valid for `test.credentials.lifetimeSeconds` (default 3)."""
    n = _record(uri, options)
    lifetime = float(options.get("test.credentials.lifetimeSeconds", "3"))
    token, expiry = storage_jwt(lifetime, marker=f"call-{n}")
    return AzureToken(token, expiry)
