"""S3-compatible sources (docs/sources.md, "Kinds"): the objects of a bucket under a prefix.

Two calls of the S3 API, path-style (`{endpoint}/{bucket}/{key}`), over httpx: ListObjectsV2
(every page, in key order) and GetObject, signed with AWS Signature Version 4 when the source
names credentials (read from the runner's environment, spec.credentials_of), unsigned
otherwise. Written here rather than with boto3: botocore requires python-dateutil < 3, which the
project's lock cannot take, and two calls need no SDK.

source_uri: `s3://{bucket}/{key}`; fingerprint: the object's ETag, so an unchanged object is not
downloaded. Keys ending in `/` (folder markers) and hidden names are skipped. The endpoint's host
is checked before every request (spec.check_url_host); redirects are not followed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import xml.etree.ElementTree as ET
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from sluice_common.errors import InvalidArgument

from .domain import ListedItem
from .reader import ItemVanished, SourceUnavailable
from .spec import check_url_host, credentials_of

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def query_of(params: dict[str, str]) -> str:
    """The query string, encoded as SigV4's canonical form wants it (and sent exactly so)."""
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(params.items()))


def sign(method: str, url: str, params: dict[str, str], region: str, key: str, secret: str, now: dt.datetime) -> dict[str, str]:
    """The headers of a SigV4-signed request without a body (AWS's documented algorithm);
    `url`'s path is already URI-encoded."""
    parts = urlsplit(url)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    host = parts.netloc
    query = query_of(params)
    headers = {"host": host, "x-amz-content-sha256": EMPTY_SHA256, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        [method, parts.path or "/", query, "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)), signed, EMPTY_SHA256]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    signing_key = ("AWS4" + secret).encode()
    for part in (day, region, "s3", "aws4_request"):
        signing_key = hmac.new(signing_key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing_key, to_sign.encode(), hashlib.sha256).hexdigest()
    return {
        **{k: v for k, v in headers.items() if k != "host"},
        "authorization": f"AWS4-HMAC-SHA256 Credential={key}/{scope}, SignedHeaders={signed}, Signature={signature}",
    }


class S3Reader:
    def __init__(self, spec: dict[str, Any], allow_private: bool, timeout: float, max_bytes: int) -> None:
        self.spec = spec
        self.allow_private = allow_private
        self.max_bytes = max_bytes
        self.client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    async def _get(self, path: str, params: dict[str, str], limit: int) -> httpx.Response:
        url = self.spec["endpoint"].rstrip("/") + path
        try:
            await asyncio.to_thread(check_url_host, url, self.allow_private, "s3.endpoint")
            credentials = credentials_of(self.spec)
        except InvalidArgument as err:
            raise SourceUnavailable(err.message) from None
        headers = (
            {}
            if credentials is None
            else sign("GET", url, params, self.spec.get("region") or "us-east-1", *credentials, dt.datetime.now(dt.UTC))
        )
        try:
            query = query_of(params)
            async with self.client.stream("GET", url + (f"?{query}" if query else ""), headers=headers) as answer:
                body = bytearray()
                async for piece in answer.aiter_bytes():
                    body += piece
                    if len(body) > limit:
                        break
                answer._content = bytes(body)
                return answer
        except httpx.HTTPError as err:
            raise SourceUnavailable(f"the S3 endpoint could not be reached: {type(err).__name__}") from None

    @staticmethod
    def _error_code(answer: httpx.Response) -> str:
        try:
            return ET.fromstring(answer.content).findtext("Code") or f"HTTP {answer.status_code}"
        except ET.ParseError:
            return f"HTTP {answer.status_code}"

    async def list_items(self) -> list[ListedItem]:
        bucket, prefix = self.spec["bucket"], self.spec.get("prefix", "")
        items: list[ListedItem] = []
        token = ""
        while True:
            params = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
            answer = await self._get(f"/{quote(bucket)}", params, 64 * 1024 * 1024)
            if answer.status_code != 200:
                raise SourceUnavailable(f"listing bucket {bucket!r} failed: {self._error_code(answer)}")
            try:
                root = ET.fromstring(answer.content)
            except ET.ParseError:
                raise SourceUnavailable(f"listing bucket {bucket!r} returned something that is not XML") from None
            for entry in root.iter(NS + "Contents"):
                key = entry.findtext(NS + "Key") or ""
                name = key.rsplit("/", 1)[-1]
                if key.endswith("/") or not name or name.startswith("."):
                    continue
                items.append(ListedItem(f"s3://{bucket}/{key}", name, f"etag:{entry.findtext(NS + 'ETag') or ''}", key))
            token = root.findtext(NS + "NextContinuationToken") or ""
            if root.findtext(NS + "IsTruncated") != "true" or not token:
                break
        items.sort(key=lambda i: i.source_uri)
        return items

    async def read(self, item: ListedItem) -> bytes:
        answer = await self._get(f"/{quote(self.spec['bucket'])}/{quote(item.locator, safe='/-_.~')}", {}, self.max_bytes)
        if answer.status_code == 404:
            raise ItemVanished(item.source_uri)
        if answer.status_code != 200:
            raise SourceUnavailable(f"reading the object failed: {self._error_code(answer)}")
        return answer.content

    async def close(self) -> None:
        await self.client.aclose()


__all__ = ["S3Reader", "sign"]
