"""S3 reads (GET, ranged GET, LIST) as presigned requests over botocore's HTTP session, without
building a boto3 client.

Opening and searching a table on S3 is a listing and dozens of small reads. Through boto3's client
each read costs ~2 ms of CPU (its event hooks, header parsing, response dates), held under the
GIL: at a low first-byte latency that is most of a cold search, and at 20 ms it serialises the
parallel reads. Building the client costs more again (0.12-0.45 s per process: it loads S3's
service model, endpoint rules and partitions, JSON of several MB), which every cold open and every
Spark Python worker paid. The same requests signed here with SigV4 query authentication
(`botocore.auth.S3SigV4QueryAuth`, what `generate_presigned_url` uses, with the session's
refreshing credentials) and sent through `botocore.httpsession.URLLib3Session` (the connection pool
a client uses) cost ~0.35 ms each and need no client; one object's URL is signed once and reused
for its ranges for a few minutes, while the credentials that signed it are current (the range
header is not signed).

Plain answers are taken from this path (200/206, 416 for a range past the end, a listing page),
and so are a missing object or bucket (404), throttling and timeouts (429, 408) and server errors
(5xx), raised as the SDK raises them (a ClientError with S3's code: S3Storage and retry.py translate
them, and retry all but the 404 with backoff, as for the SDK's answers). Anything
else (redirects, refusals) goes to the SDK, which owns those. The path is used only where the URL is certain:
an `s3.endpoint`, or AWS with a known region and none of the settings that move S3's endpoint
(FIPS, dual-stack, accelerate, `AWS_ENDPOINT_URL*`, a profile's `endpoint_url`); anonymous access
and the rest take the SDK. `s3.presignedReads=false` sends every read through the SDK.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote_plus, urlencode, urlsplit

from indextables_spark.core.storage.object_store import ObjectEntry
from indextables_spark.config.redaction import Redactor
from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    import botocore.session
    from botocore.awsrequest import AWSResponse
    from botocore.credentials import Credentials, ReadOnlyCredentials
    from botocore.httpsession import URLLib3Session

URL_EXPIRES_S = 900  # what a presigned URL is signed for
URL_REUSE_S = 300  # how long one is reused (at most; new credentials sign anew)
MAX_URLS = 4096  # objects whose URL is kept (a split is one object)
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_DNS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


@dataclass
class S3Reads:
    """GETs and LIST pages of one bucket (see the module doc)."""

    credentials: Credentials  # refreshed by botocore when they expire
    region: str
    bucket_url: str  # scheme://host[:port][/bucket], no trailing slash
    http: URLLib3Session
    # an object's URL: (url, when signed, the signing credentials' (access key, token))
    urls: LruCache[tuple[str, float, tuple[str, str | None]]] = field(default_factory=lambda: LruCache(MAX_URLS))
    off: bool = False  # S3 answered a redirect or a 400: the SDK does every read (see _refused)

    def get(self, name: str, start: int | None, end: int | None) -> bytes | None:
        """The object's bytes [start, end) (all without a range), b"" for a range past its end, or
        None when S3 answered anything else (the caller asks the SDK, which raises its error)."""
        headers = range_header(start, end)
        ranged = bool(headers)
        resp = self._send(self._object_url(name), headers)
        status = resp.status_code
        if status == 206 or (status == 200 and not ranged):
            data: bytes = resp.content
            return data
        if status == 200:  # the range was ignored (some S3-compatible services): the whole object
            whole: bytes = resp.content
            return whole[start:end]
        if ranged and status == 416:
            return b""
        if _raised(status):
            raise _service_error(resp, "GetObject")  # as the SDK raises it (retry.py reads its code)
        self._refused(status)
        self.urls.pop(name)  # e.g. signed with credentials since revoked: sign anew next time
        return None

    def list_page(self, prefix: str, token: str | None, page: int) -> tuple[list[ObjectEntry], str | None] | None:
        """One ListObjectsV2 page: (key, size, last modified) of each object, and the continuation
        token when more follow; None when S3 answered anything but a page (the SDK answers)."""
        query = {"list-type": "2", "prefix": prefix, "max-keys": str(page), "encoding-type": "url"}
        if token:
            query["continuation-token"] = token
        resp = self._send(self._sign(f"{self.bucket_url}/?{urlencode(query, quote_via=quote)}"), {})
        if _raised(resp.status_code):
            raise _service_error(resp, "ListObjectsV2")
        if resp.status_code != 200:
            self._refused(resp.status_code)
            return None
        root = ET.fromstring(resp.content)
        entries = [
            (
                unquote_plus(c.findtext(f"{_NS}Key", "")),  # as botocore decodes encoding-type=url
                int(c.findtext(f"{_NS}Size", "0")),
                _timestamp(c.findtext(f"{_NS}LastModified")),
            )
            for c in root.iter(f"{_NS}Contents")
        ]
        truncated = root.findtext(f"{_NS}IsTruncated", "false").lower() == "true"
        following = root.findtext(f"{_NS}NextContinuationToken") if truncated else None
        if truncated and not following:
            return None  # the SDK's path names this error
        return entries, following

    def _refused(self, status: int) -> None:
        """A redirect or a 400 says the URL is wrong for this bucket (another region, an endpoint
        the SDK resolves differently): every later read goes to the SDK (`off`) instead of paying
        two requests each."""
        if 300 <= status < 400 or status == 400:
            self.off = True

    def _object_url(self, name: str) -> str:
        # a URL lives as long as the credentials that signed it: reused only while botocore still
        # hands out those (it refreshes them ahead of their expiry)
        now, frozen = time.monotonic(), self.credentials.get_frozen_credentials()
        hit = self.urls.get(name)
        if hit is not None and now - hit[1] < URL_REUSE_S and hit[2] == (frozen.access_key, frozen.token):
            return hit[0]
        url = self._sign(f"{self.bucket_url}/{quote(name, safe='/~')}", frozen)
        self.urls.put(name, (url, now, (frozen.access_key, frozen.token)))
        return url

    def _sign(self, url: str, frozen: ReadOnlyCredentials | None = None) -> str:
        from botocore.auth import S3SigV4QueryAuth  # lazy: SDK loaded on first use
        from botocore.awsrequest import AWSRequest  # lazy: as above

        request = AWSRequest(method="GET", url=url)
        frozen = frozen or self.credentials.get_frozen_credentials()
        S3SigV4QueryAuth(frozen, "s3", self.region, expires=URL_EXPIRES_S).add_auth(request)
        signed: str = request.url
        return signed

    def _send(self, url: str, headers: dict[str, str]) -> AWSResponse:
        from botocore.awsrequest import AWSRequest  # lazy: SDK loaded on first use
        from botocore.exceptions import IncompleteReadError  # lazy: as above

        try:
            resp = self.http.send(AWSRequest(method="GET", url=url, headers=headers).prepare())
        except Exception as e:
            raise _without_signature(e) from None
        # botocore's session reads without urllib3's length check (the SDK's StreamingBody checks
        # it): a body cut short would pass for the whole object or range. Raised as the SDK
        # raises it, so retry.py retries it.
        declared = resp.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and len(resp.content) != int(declared):
            raise IncompleteReadError(actual_bytes=len(resp.content), expected_bytes=int(declared))
        return resp


def _raised(status: int) -> bool:
    """Answers raised as the SDK raises them (a throttled request sent again through the SDK at once
    would add load where S3 asks for less: retry.py backs off)."""
    return status in (404, 408, 429) or status >= 500


def range_header(start: int | None, end: int | None) -> dict[str, str]:
    """The HTTP Range header of bytes [start, end) (HTTP's end is inclusive); {} for the whole object."""
    return {} if start is None or end is None else {"Range": f"bytes={start}-{end - 1}"}


def _without_signature(e: Exception) -> Exception:
    """A send's error without the presigned query (its signature, credential and session token):
    botocore's connection errors quote the URL (`endpoint_url`) and the urllib3 error beneath
    (`error`). The same error class where botocore's (built from kwargs), else botocore's
    HTTPClientError; retry.py sees a transient error as before. Raised `from None`: the cause
    holds the URL too."""
    from botocore.exceptions import BotoCoreError, HTTPClientError  # lazy: SDK loaded on first use

    clean = Redactor()  # no secrets of its own: the signature-like query parameters
    kwargs = getattr(e, "kwargs", None)
    if isinstance(e, BotoCoreError) and isinstance(kwargs, dict):
        scrubbed = {k: clean(v) if isinstance(v, str) else v for k, v in kwargs.items()}
        if "endpoint_url" in scrubbed:
            scrubbed["endpoint_url"] = scrubbed["endpoint_url"].split("?")[0]
        if "error" in scrubbed and "X-Amz-" in str(scrubbed["error"]):
            scrubbed["error"] = clean(str(scrubbed["error"]))
        try:
            rebuilt: Exception = type(e)(**scrubbed)
            return rebuilt
        except TypeError:  # a class whose kwargs do not rebuild it
            pass
    if isinstance(e, BotoCoreError) or "X-Amz-" in str(e):
        wrapped: Exception = HTTPClientError(error=clean(str(e)))
        return wrapped
    return e


def _service_error(resp: AWSResponse, operation: str) -> Exception:
    """A missing object or bucket (404), throttling (429, 408) or a server error (5xx) as the SDK
    raises it: a ClientError with the status and S3's error code, which retry.py and S3Storage read."""
    from botocore.exceptions import ClientError  # lazy: SDK loaded on first use

    code, message = "", ""
    try:
        root = ET.fromstring(resp.content)
        code, message = root.findtext("Code", ""), root.findtext("Message", "")
    except ET.ParseError:  # an error without an S3 body (a proxy's, a HEAD's)
        pass
    code = code or str(resp.status_code)
    error = {"Code": code, "Message": message}
    raised: Exception = ClientError(
        {"Error": error, "ResponseMetadata": {"HTTPStatusCode": resp.status_code}}, operation
    )
    return raised


def _timestamp(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def s3_reads(
    credentials: Credentials | None,
    bucket: str,
    region: str | None,
    endpoint: str | None,
    path_style: bool,
    profile: str | None,
    pool: int,
    timeouts: tuple[float, float],
) -> S3Reads | None:
    """S3Reads for a bucket, or None where the SDK must do the reads (see the module doc).
    `credentials`, `region`: what the storage's client would sign with (AwsAuth.signing_credentials;
    None: anonymous). The HTTP session is set up as botocore sets up a client's (botocore/endpoint.py
    EndpointCreator): proxies from the environment, the profile's CA bundle, AWS_CA_BUNDLE or
    REQUESTS_CA_BUNDLE, else botocore's default."""
    import botocore.session  # lazy: SDK loaded on first use
    from botocore.httpsession import URLLib3Session  # lazy: as above
    from botocore.utils import get_environ_proxies  # lazy: as above

    region = region or ("us-east-1" if endpoint else None)
    if credentials is None or region is None:
        return None
    # the profile's settings (a second botocore session, ~0.04 s) only where they matter: S3's
    # own endpoint, and a CA bundle for https
    config = botocore.session.Session(profile=profile) if endpoint is None or endpoint.startswith("https") else None
    base = endpoint or _aws_endpoint(config, region)
    if base is None:
        return None
    parts = urlsplit(base)
    if path_style or not _DNS_BUCKET.match(bucket) or _is_ip(parts.hostname or ""):
        bucket_url = f"{base.rstrip('/')}/{bucket}"  # the SDK's choice too for these
    else:
        bucket_url = f"{parts.scheme}://{bucket}.{parts.netloc}{parts.path.rstrip('/')}"
    verify: Any = config.get_config_variable("ca_bundle") if config is not None else None
    if verify is None:
        verify = os.environ.get("REQUESTS_CA_BUNDLE", True)
    http = URLLib3Session(
        verify=verify, proxies=get_environ_proxies(bucket_url), timeout=timeouts, max_pool_connections=pool
    )
    return S3Reads(credentials, region, bucket_url, http)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return host == "localhost"


def _aws_endpoint(config: botocore.session.Session, region: str) -> str | None:
    """S3's regional endpoint, or None when a setting moves it (the SDK resolves those)."""
    scoped = config.get_scoped_config()
    moved = (
        config.get_config_variable("use_fips_endpoint")
        or config.get_config_variable("use_dualstack_endpoint")
        or any(
            k in os.environ for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT")
        )
        or "endpoint_url" in scoped
        or "services" in scoped
        or (scoped.get("s3") or {}).get("use_accelerate_endpoint") not in (None, False, "false")
        or (scoped.get("s3") or {}).get("use_dualstack_endpoint") not in (None, False, "false")
    )
    # the aws, aws-cn and aws-us-gov partitions (isolated regions have endpoints of their own)
    if moved or "-iso" in region or not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d", region):
        return None
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://s3.{region}.{suffix}"
