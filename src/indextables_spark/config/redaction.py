"""The one redaction of everything the package shows: result rows (DESCRIBE …), `repr(Options)`,
error messages, log records, the CLI's output, the job descriptions it sets in Spark.

A secret is caught two ways:
- by name: an option or a property whose name says it holds a secret (`secret_name`: the
  registry's secret options, names containing secret, password, token, credential, signature,
  access/account/api key, connection string or SAS, and a `spark.redaction.regex` given by the
  session), whose whole value is hidden;
- by value inside any text (`redact_text`): every secret value the process has been given
  (`remember_secrets`: options under secret names, credentials the storage backends and the
  credential providers hand out), `name=value` / `"name": value` pairs under such names (a
  `--conf k=v` list, `-Dk=v` Java options, `AccountKey=…;` in a connection string, `sig=…` in a SAS
  URL), and the password of a URL's `user:password@`.

Log records of this package and of the storage SDKs (which log request URLs and headers at DEBUG)
are cleaned by a record factory installed when this module is first imported
(`install_log_redaction`): before any secret value is known too, a record may hold a pair."""

from __future__ import annotations

import functools
import logging
import re
import threading
from typing import Any, Iterable, Mapping
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from indextables_spark.config.registry import OPTIONS, PREFIX, SECRET_KEYS, spec
from indextables_spark.errors import show_messages_through

HIDDEN = "***"
_MIN_SECRET = 4  # shorter values are not secrets worth matching in text (and would match everywhere)

# words that make a name a secret's: the reference's CredentialRedaction list (secret, key,
# password, token, credential, session), Spark's default spark.redaction.regex, Azure's spellings
_NAME_WORDS = re.compile(
    r"(?i)secret|password|passwd|token|credential(?!s?[._-]?provider)|session|signature|key|"
    r"connection[._-]?string|(?<![a-z])sas(?![a-z])"
)
# inside text, narrower ("key" alone would hide `partition_key=…` in a message): a `name=value`
# or `"name": value` pair; the value runs to whitespace, a separator (& ; ,) or a quote, or is
# a quoted string
_TEXT_WORDS = (
    r"secret|password|passwd|token(?![a-z])|credential(?!s?[._-]?provider)|signature|(?<![a-z])sig(?![a-z])|(?<![a-z])sas(?![a-z])|"
    r"access[._-]?key|account[._-]?key|api[._-]?key|private[._-]?key|connection[._-]?string"
)
_PAIR = re.compile(
    r"""(?x)
    (?P<name>(?<![\w.\-])[\w.\-]++)   # a whole name (from its first character: linear in the text)
    (?P<sep>["']?\s*[=:]\s*)          # = or : (after a quoted name)
    """
)
_VALUE = re.compile(r""""[^"]*"|'[^']*'|[^\s&;,'"]+""")  # read only after a secret's name
_TEXT_NAME = re.compile(rf"(?i){_TEXT_WORDS}")  # the names among them whose values are hidden
# an error's class before its message (`NoCredentialsError: Unable to locate credentials`) is no pair
_ERROR_NAME = re.compile(r"(?i)(?:error|exception|warning)$")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/@\s:]*:[^/@\s]+@")


def secret_name(name: str, pattern: str | None = None) -> bool:
    """Whether a property or option named so holds a secret: one of the registry's secret options,
    a name with a secret word, or one `pattern` (e.g. the session's spark.redaction.regex) finds."""
    low = name.lower()
    if low.removeprefix(PREFIX) in SECRET_KEYS:
        return True
    if _registered_plain(low):
        return False  # e.g. indexing.typemap.session_token: a column's name, not a secret's
    return _NAME_WORDS.search(low) is not None or (pattern is not None and re.search(pattern, name) is not None)


def _registered_plain(low: str) -> bool:
    """A registered option that is not a secret (its name may still hold a column's name). A key
    of a family of another library's properties (`iceberg.catalog.<name>.<key>`) is not one: its
    property's name says whether it is a secret (`…rest.token`, `…s3.secret-access-key`)."""
    found = spec(low.removeprefix(PREFIX))
    return found is not None and not found.secret and not found.names_properties


@functools.lru_cache(maxsize=4096)  # Options.of asks it of every key it is given; the names repeat
def secret_option(name: str) -> bool:
    """Whether an option's value is a secret to hide in every text from now on: a registered
    secret option or a name with a narrow secret word (not `key` or `session` alone: the value of
    `aws.roleSessionName` is no secret, and hiding it would hide that word everywhere)."""
    low = name.lower()
    if low.removeprefix(PREFIX) in SECRET_KEYS:
        return True
    return not _registered_plain(low) and _TEXT_NAME.search(low) is not None


class _Known:
    """The secret values this process has been given (options, credentials), longest first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self.ordered: tuple[str, ...] = ()

    def add(self, values: Iterable[str | None]) -> None:
        new = _forms(values) - self._values
        if not new:
            return
        with self._lock:
            self._values |= new
            self.ordered = _longest_first(self._values)


def _forms(values: Iterable[str | None]) -> set[str]:
    """Secrets as they may appear: as given, URL-decoded and URL-encoded (SAS tokens, keys with /+=)."""
    given = [v for v in values if v and len(v) >= _MIN_SECRET]
    return {f for v in given for f in (v, unquote(v), quote(v, safe="")) if len(f) >= _MIN_SECRET}


def _longest_first(secrets: Iterable[str]) -> tuple[str, ...]:
    """Longest first, so a secret containing another is replaced whole."""
    return tuple(sorted(secrets, key=len, reverse=True))


_known = _Known()


def remember_secrets(values: Iterable[str | None]) -> None:
    """Hide these values wherever they appear in what the package shows from now on (log records
    too)."""
    _known.add(values)


def redact_text(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every secret in it replaced by ***: the known values (and `extra`), the values
    of secret-named pairs, URL passwords."""
    for s in (*extra, *_known.ordered):
        if s in text:
            text = text.replace(s, HIDDEN)
    text = _USERINFO.sub(rf"\1{HIDDEN}@", text)
    return _hidden_pairs(text)


def _hidden_pairs(text: str) -> str:
    """The values of secret-named pairs hidden. A pair whose name is no secret's gives up only its
    name and separator: its value may hold a pair of its own (`https://h/k?X-Amz-Credential=…`
    is `https` `:` then a URL; `conf: spark.secret=…`). A value is read only after a secret's
    name, and each step moves past a name: linear in the text."""
    out: list[str] = []
    pos = 0
    while (m := _PAIR.search(text, pos)) is not None:
        name = m.group("name")
        value = _VALUE.match(text, m.end()) if _TEXT_NAME.search(name) and not _ERROR_NAME.search(name) else None
        if value is None:
            out.append(text[pos : m.end()])
            pos = m.end()
            continue
        out.append(text[pos : m.end()] + _hidden_value(value.group(0)))
        pos = value.end()
    out.append(text[pos:])
    return "".join(out)


def _hidden_value(value: str) -> str:
    return value[0] + HIDDEN + value[0] if value[:1] in ("'", '"') else HIDDEN


show_messages_through(redact_text)  # every IndexTablesError's text (errors.py)


def redact_value(name: str, value: str | None, marker: str = HIDDEN, pattern: str | None = None) -> str | None:
    """A property's value as shown: `marker` when the name is a secret's, else the text redacted."""
    if value is None:
        return None
    return marker if secret_name(name, pattern) else redact_text(value)


def redact_mapping(values: Mapping[str, Any], pattern: str | None = None) -> dict[str, Any]:
    """Options or properties as shown (values that are not text are kept)."""
    return {k: redact_value(k, v, pattern=pattern) if isinstance(v, str) else v for k, v in values.items()}


class Redactor:
    """redact_text with some secrets of its own (a storage backend's credentials): callable on text."""

    def __init__(self, secrets: Iterable[str | None] = ()):
        self._secrets = _longest_first(_forms(secrets))

    def __call__(self, text: str) -> str:
        return redact_text(text, self._secrets)


def redact_uri(uri: str) -> str:
    """The URI without credentials: user:password@ → user@ (an S3 'key:secret@bucket' loses both
    parts), and query strings (SAS tokens) dropped."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return redact_text(uri)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = HIDDEN + "@" + host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# ---- what Spark shows itself ---------------------------------------------------------------------

# Spark's runtime settings of its own redaction (a session's SQL conf): the first hides the values
# of options and conf entries whose key (or value) it matches — the session conf a SQL execution
# lists (`modifiedConfigs` in the SQL tab) and data source options in plans; the second hides what
# it matches inside the text of plans and, over Spark Connect, of the request each job shows in
# the UI (its stage details: the reads' and writes' options as `key: "…"  value: "…"` pairs).
SPARK_OPTIONS_REGEX = "spark.sql.redaction.options.regex"
SPARK_STRING_REGEX = "spark.sql.redaction.string.regex"


def spark_redaction_regexes() -> dict[str, str]:
    """Java regexes of the `spark.indextables.*` keys whose values are secrets (secret_option's
    rule: the registered secret options, names with a narrow secret word, minus the registered
    options that are no secret), for Spark's two settings above (config/sessions.py adds them)."""
    end = r'(?="|$)'  # a key ends at its closing quote (in a plan's text) or at the end (a conf key)
    plain = [re.escape(o.key.lower()) + end for o in OPTIONS if not (o.secret or o.family) and _TEXT_NAME.search(o.key)]
    plain += [re.escape(o.prefix) for o in OPTIONS if o.family and not (o.secret or o.names_properties)]
    secret = [re.escape(k) + end for k in sorted(SECRET_KEYS)] + [rf'[^"\s]*?(?:{_TEXT_WORDS})']
    key = rf"{re.escape(PREFIX)}(?!{'|'.join(plain)})(?:{'|'.join(secret)})"
    return {
        SPARK_OPTIONS_REGEX: rf"(?i:^{key})",
        SPARK_STRING_REGEX: rf'(?i:key: "{key}[^"]*"\s*value: "(?:[^"\\]|\\.)*")',
    }


# ---- log records ---------------------------------------------------------------------------------

# Loggers whose records are cleaned: this package's, and the libraries under the storage backends
# (at DEBUG botocore logs request headers — X-Amz-Security-Token, the access key id — and urllib3
# request URLs with Azure SAS signatures).
LOGGERS = ("indextables_spark", "botocore", "boto3", "s3transfer", "urllib3", "requests", "azure")
_install_lock = threading.Lock()
_installed = False


def install_log_redaction() -> None:
    """Install (once per process) a log record factory that wraps the current one: records of
    LOGGERS have their message formatted and redacted. Records are only built for enabled levels,
    so nothing is paid for a level that is off."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if record.name.startswith(LOGGERS):
                _scrub(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True


def _scrub(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed record: logging reports it when it is emitted
        return
    clean = redact_text(message)
    if clean != message:
        record.msg, record.args = clean, None


install_log_redaction()  # records logged before any secret is known hold pairs too
