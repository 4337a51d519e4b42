"""Object reads from S3 as presigned GETs over botocore's own HTTP session.

A search on object storage is dozens of small ranged reads, and through boto3's client each costs
~2 ms of CPU (its event hooks, header parsing, response dates), held under the GIL: at a low
first-byte latency that is most of a cold search, and at 20 ms it serialises the parallel reads.
The same GET sent as a presigned URL through botocore's HTTP layer (`botocore.httpsession.
URLLib3Session`, the connection pool the client itself uses) costs ~0.35 ms. The URL is signed by
the client (its credentials, refreshed as they are for every call; its region and addressing) once
per object and reused for its ranges for a few minutes; the range header is not part of the
signature.

Only answers 200/206 (and 416, a range past the end) are taken from this path: anything else, or a
URL past its reuse window, goes to the SDK's `get_object` (`S3Storage._get`), which owns redirects,
error codes and their translation. `s3.presignedReads=false` sends every read through the SDK.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from indextables_spark.util.lru import LruCache

URL_EXPIRES_S = 900  # what a presigned URL is signed for
URL_REUSE_S = 300  # how long one is reused: credentials botocore refreshes ahead (~15 min) outlive it
MAX_URLS = 4096  # objects whose URL is kept (a split is one object)


@dataclass
class PresignedReads:
    """Ranged and whole-object GETs of one client's objects (see the module doc)."""

    client: Any  # the boto3 S3 client that signs (its credentials, region, addressing)
    http: Any  # a botocore URLLib3Session with the client's pool size, timeouts, proxies, CA bundle
    urls: LruCache[tuple[str, float]] = field(default_factory=lambda: LruCache(MAX_URLS))

    def get(self, bucket: str, name: str, start: int | None, end: int | None) -> bytes | None:
        """The object's bytes [start, end) (all without a range), b"" for a range past its end, or
        None when S3 answered anything else (the caller asks the SDK, which raises its error)."""
        from botocore.awsrequest import AWSRequest  # lazy: SDK loaded on first use

        ranged = start is not None and end is not None
        headers = {"Range": f"bytes={start}-{end - 1}"} if start is not None and end is not None else {}
        resp = self.http.send(AWSRequest(method="GET", url=self._url(bucket, name), headers=headers).prepare())
        status = resp.status_code
        if status == 206 or (status == 200 and not ranged):
            data: bytes = resp.content
            return data
        if status == 200:  # the range was ignored (some S3-compatible services): the whole object
            whole: bytes = resp.content
            return whole[start:end]
        if ranged and status == 416:
            return b""
        self.urls.pop((bucket, name))  # e.g. signed with credentials since revoked: sign anew next time
        return None

    def _url(self, bucket: str, name: str) -> str:
        now = time.monotonic()
        hit = self.urls.get((bucket, name))
        if hit is not None and now - hit[1] < URL_REUSE_S:
            return hit[0]
        url: str = self.client.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": name}, ExpiresIn=URL_EXPIRES_S
        )
        self.urls.put((bucket, name), (url, now))
        return url


def presigned_reads(client: Any, endpoint: str | None, profile: str | None) -> PresignedReads:
    """PresignedReads for a client, its HTTP session set up as botocore sets up the client's
    (botocore/endpoint.py EndpointCreator): the client config's pool size, timeouts and proxies
    (else the environment's), the CA bundle of the profile or AWS_CA_BUNDLE, else
    REQUESTS_CA_BUNDLE, else botocore's default."""
    import botocore.session  # lazy: SDK loaded on first use
    from botocore.httpsession import URLLib3Session  # lazy: as above
    from botocore.utils import get_environ_proxies  # lazy: as above

    config = client.meta.config
    url = endpoint or client.meta.endpoint_url
    verify: Any = botocore.session.Session(profile=profile).get_config_variable("ca_bundle")
    if verify is None:
        verify = os.environ.get("REQUESTS_CA_BUNDLE", True)
    http = URLLib3Session(
        verify=verify,
        proxies=config.proxies or get_environ_proxies(url),
        timeout=(config.connect_timeout, config.read_timeout),
        max_pool_connections=config.max_pool_connections,
        client_cert=getattr(config, "client_cert", None),
        proxies_config=getattr(config, "proxies_config", None),
    )
    return PresignedReads(client, http)
