"""Credentials the way platforms hand them out: what both clouds share (Spark-free). The AWS side
is in aws_auth.py, the Azure side in azure_auth.py.

- A credentials provider: option `aws.credentialsProvider` / `azure.credentialsProvider` names a
  Python callable as `module:function`. It is imported and called on whichever process builds a
  client (the driver, a Python worker, a CLI), as `function(uri, options)`: `uri` is the table path,
  `options` the table's options (a read-only mapping, keys without the `spark.indextables.` prefix,
  lower-cased). It returns `AwsCredentials` (S3) or `AzureToken` (Azure); they are used until
  `credentials.refreshBufferSeconds` before their expiry, then the function is called again, by
  the clients already built too. The module must be importable on the executors.
- AWS profiles (`aws.profile`) and assumed roles (`aws.roleArn`, through STS, refreshed).
- Azure managed identity and workload identity through azure-identity (`azure.authType`).

Credentials are shared within a process per provider, table path and the provider's inputs (see
`provider_scope`), so one table's tasks call the provider once per expiry, not once per task.
Nothing here logs or shows a credential: the result types hide their values in `repr`, errors
name the option and the provider, never what it returned, and every credential obtained is
registered with `redaction.remember_secrets` (kept out of the SDKs' debug logs).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import logging
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping, TypeVar

from indextables_spark.config.options import Options
from indextables_spark.config.registry import spec as option_spec
from indextables_spark.config.redaction import Redactor, remember_secrets, secret_name
from indextables_spark.errors import InvalidOptionError, StorageError
from indextables_spark.util.lru import LruCache

log = logging.getLogger("indextables_spark.core.storage.credentials")

UTC = dt.timezone.utc
# A credential "without expiry" still needs an expiry time for the SDKs' refresh logic.
NEVER_EXPIRES = dt.datetime(9999, 1, 1, tzinfo=UTC)
Answer = TypeVar("Answer", "AwsCredentials", "AzureToken")


@dataclass(frozen=True)
class AwsCredentials:
    """What an S3 credentials provider returns. `expiry`: when the credentials stop working
    (a naive datetime is taken as UTC); None: they do not expire (the provider is not called again)."""

    access_key: str
    secret_key: str
    session_token: str | None = None
    expiry: dt.datetime | None = None

    def __repr__(self) -> str:  # never show a credential
        return f"AwsCredentials(access_key=***, secret_key=***, session_token=***, expiry={self.expiry!r})"


@dataclass(frozen=True)
class AzureToken:
    """What an Azure credentials provider returns: an OAuth bearer token for Azure Storage
    (audience `https://storage.azure.com`) and its expiry (naive = UTC; None: never expires)."""

    token: str
    expiry: dt.datetime | None = None

    def __repr__(self) -> str:  # never show a credential
        return f"AzureToken(token=***, expiry={self.expiry!r})"


ProviderFunction = Callable[[str, Mapping[str, str]], Any]


# -- provider specs ------------------------------------------------------------------------------


def load_provider(spec: str, option: str) -> ProviderFunction:
    """The callable named by `module:function` (`module:Class.method` works too), or an
    InvalidOptionError naming the option."""
    where = f"option 'spark.indextables.{option}'"
    text = spec.strip()
    module_name, sep, attr_path = text.partition(":")
    if not sep or not module_name.strip() or not attr_path.strip():
        raise InvalidOptionError(
            f"{where} must name a Python callable as 'module:function' (e.g. 'my_creds:aws_credentials'), got {text!r}"
        )
    module_name, attr_path = module_name.strip(), attr_path.strip()
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise InvalidOptionError(
            f"{where}: cannot import module {module_name!r} of credentials provider {text!r} ({type(e).__name__}: "
            f"{e}); it must be importable on the driver and on every executor"
        ) from None
    for part in attr_path.split("."):
        if not hasattr(target, part):
            raise InvalidOptionError(f"{where}: module {module_name!r} has no attribute {attr_path!r}")
        target = getattr(target, part)
    if not callable(target):
        raise InvalidOptionError(
            f"{where}: {text!r} is a {type(target).__name__}, not a callable taking (uri, options)"
        )
    function: ProviderFunction = target
    return function


def _call_provider(spec: str, option: str, uri: str, options: Options, result_type: type[Any], what: str) -> Any:
    """Call the provider once and check its answer (errors never show the answer)."""
    function = load_provider(spec, option)
    try:
        # a copy: a Mapping without setters, secret values hidden in its repr, keys looked up as Options does
        result = function(uri, Options(dict(options.values)))
    except Exception as e:
        # Not chained: the provider's exception may carry what it was handling; its message is
        # kept with the known secrets removed.
        text = (str(e).splitlines() or [""])[0]
        detail = f": {_option_redactor(options)(text)}" if text else ""
        raise StorageError(
            f"credentials provider {spec!r} (option 'spark.indextables.{option}') failed for {uri}: "
            f"{type(e).__name__}{detail}"
        ) from None
    if isinstance(result, Mapping):
        try:
            result = result_type(**result)
        except TypeError:
            raise InvalidOptionError(
                f"credentials provider {spec!r} (option 'spark.indextables.{option}') returned a mapping with keys "
                f"{sorted(map(str, result))}; expected {what}"
            ) from None
    if not isinstance(result, result_type):
        raise InvalidOptionError(
            f"credentials provider {spec!r} (option 'spark.indextables.{option}') returned a "
            f"{type(result).__name__}; expected {what}"
        )
    return result


def ask_provider(
    spec: str, option: str, uri: str, options: Options, result_type: type[Answer], required: tuple[str, ...]
) -> tuple[Answer, dt.datetime]:
    """The provider's answer, checked (the `required` fields are non-empty strings; not expired)
    and its secrets protected, with its expiry in UTC."""
    what = f"an {result_type.__name__}"
    got: Answer = _call_provider(spec, option, uri, options, result_type, what)
    for name in required:
        if not isinstance(getattr(got, name), str) or not getattr(got, name):
            raise InvalidOptionError(
                f"credentials provider {spec!r} (option 'spark.indextables.{option}') returned no {name}"
            )
    remember_secrets(getattr(got, f.name) for f in fields(got) if f.name != "expiry")
    expiry = utc_expiry(got.expiry, spec, option)
    _check_not_expired(expiry, spec, option)
    log.debug("credentials provider %s answered for %s (expiry %s)", spec, uri, expiry.isoformat())
    return got, expiry


def _option_redactor(options: Options) -> Redactor:
    """Hides the values of the options whose names are secrets' (config/redaction.py secret_name:
    the secret options, and unregistered ones named so, e.g. a provider's own API token)."""
    return Redactor(v for k, v in options.values.items() if secret_name(k))


def utc_expiry(expiry: dt.datetime | None, spec: str, option: str) -> dt.datetime:
    if expiry is None:
        return NEVER_EXPIRES
    if not isinstance(expiry, dt.datetime):
        raise InvalidOptionError(
            f"credentials provider {spec!r} (option 'spark.indextables.{option}') returned an expiry of type "
            f"{type(expiry).__name__}; expected a datetime or None"
        )
    return expiry.replace(tzinfo=UTC) if expiry.tzinfo is None else expiry.astimezone(UTC)


def _check_not_expired(expiry: dt.datetime, spec: str, option: str) -> None:
    if expiry <= dt.datetime.now(UTC):
        raise StorageError(
            f"credentials provider {spec!r} (option 'spark.indextables.{option}') returned credentials that "
            f"expired at {expiry.isoformat()}"
        )


def provider_scope(spec: str, uri: str, options: Options) -> tuple[str, str, str]:
    """What a provider's answer may depend on: its name, the table path, and the options that are
    not ordinary table settings (unregistered keys, the provider's own, and secret ones such as a
    token). Per-read settings (query, limit, ...) stay out, so every read of a table shares the
    credentials. Hashed: the key is kept in memory only, but needs no secret in clear."""
    inputs = sorted(
        (k, v)
        for k, v in options.values.items()
        if (found := option_spec(k)) is None or found.secret or k.startswith(("aws.", "azure.", "credentials."))
    )
    digest = hashlib.sha256(repr(inputs).encode("utf-8", "surrogateescape")).hexdigest()
    return spec.strip(), uri, digest


# -- a process-wide cache of credential objects ----------------------------------------------------

_shared: LruCache[Any] = LruCache(64, per_process=True)


def shared(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """One credential object per key in this process (least recently used dropped past 64; a
    forked child builds its own: the objects hold locks and connections). `build` may call a
    provider or STS, outside the cache's lock."""
    return _shared.get_or_build(key, build)


def clear_shared() -> None:
    """Forget every shared credential object (the next client asks its source again)."""
    _shared.clear()


__all__ = [
    "AwsCredentials",
    "AzureToken",
    "NEVER_EXPIRES",
    "ask_provider",
    "clear_shared",
    "load_provider",
    "provider_scope",
    "shared",
    "utc_expiry",
]
