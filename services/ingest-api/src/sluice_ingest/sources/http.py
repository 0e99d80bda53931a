"""HTTP sources (docs/sources.md, "Kinds"): the pages of a sitemap, or a bounded crawl.

- **Sitemap**: the `<loc>` URLs of the sitemap (a sitemap index is followed one level), on the
  sitemap's host only, at most max_pages. The fingerprint is the entry's `<lastmod>` when it
  has one (then an unchanged page is not fetched); otherwise every page is fetched and hashed.
- **Crawl**: breadth first from the start URL, following `<a href>` links of HTML pages on the
  same host (scheme and port included), at most max_pages pages. The fetched pages are kept for
  the run, and the fingerprint is their SHA-256.

Both obey the host's robots.txt for the user agent `sluice` (a missing robots.txt allows all).
Every request, redirects included (followed by hand, at most 5), checks its host first: private
and loopback addresses are refused unless SLUICE_SOURCE_ALLOW_PRIVATE_NETWORKS (spec.py). The
request then goes to the very address that was checked (the name in Host and in TLS's SNI and
certificate check), so a name that resolves again elsewhere (DNS rebinding) cannot reach a
private address, as webhooks/sender.py does.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import httpx
from sluice_common.errors import InvalidArgument

from .domain import ListedItem
from .reader import ItemVanished, SourceUnavailable
from .spec import public_addresses

USER_AGENT = "sluice"
MAX_REDIRECTS = 5
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
KEEP_CRAWLED_BYTES = 64 * 1024 * 1024  # pages kept from the crawl for the run; past this, fetched again
HTML = re.compile(r"^(text/html|application/xhtml\+xml)\b", re.I)


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            for name, value in attrs:
                if name == "href" and value:
                    self.hrefs.append(value)


def origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80)


def filename_of(url: str) -> str:
    path = urlsplit(url).path
    name = path.rsplit("/", 1)[-1]
    return name or "index.html"


class HttpReader:
    def __init__(self, spec: dict[str, Any], allow_private: bool, timeout: float, max_bytes: int, default_pages: int) -> None:
        self.spec = spec
        self.allow_private = allow_private
        self.max_bytes = max_bytes
        self.max_pages = int(spec.get("max_pages") or default_pages)
        self.client = httpx.AsyncClient(timeout=timeout, follow_redirects=False, headers={"user-agent": USER_AGENT})
        self.robots: dict[tuple[str, str, int], RobotFileParser] = {}
        self.kept: dict[str, bytes] = {}
        self.kept_bytes = 0
        self.types: dict[str, str] = {}

    async def close(self) -> None:
        await self.client.aclose()

    async def _get(self, url: str, limit: int) -> httpx.Response | None:
        """GET with every hop's host checked; None for a 404/410 (gone). Bodies over `limit` are refused."""
        for _ in range(MAX_REDIRECTS + 1):
            try:
                target, headers, extensions = await asyncio.to_thread(self._pinned, url)
            except InvalidArgument as err:
                raise SourceUnavailable(err.message) from None
            try:
                async with self.client.stream("GET", target, headers=headers, extensions=extensions) as answer:
                    if answer.is_redirect:
                        url = urljoin(url, answer.headers.get("location", ""))
                        continue
                    if answer.status_code in (404, 410):
                        return None
                    if answer.status_code >= 400:
                        raise SourceUnavailable(f"{url[:200]} answered HTTP {answer.status_code}")
                    body = bytearray()
                    async for piece in answer.aiter_bytes():
                        body += piece
                        if len(body) > limit:
                            raise SourceUnavailable(f"{url[:200]} is larger than {limit} bytes")
                    answer._content = bytes(body)  # read: the stream is closed on leaving the block
                    return answer
            except httpx.HTTPError as err:
                raise SourceUnavailable(f"{url[:200]} could not be fetched: {type(err).__name__}") from None
        raise SourceUnavailable(f"{url[:200]} redirects more than {MAX_REDIRECTS} times")

    def _pinned(self, url: str) -> tuple[str, dict[str, str], dict[str, Any]]:
        """What to request for `url`: itself when private networks are allowed; otherwise the URL
        with its host replaced by the first checked address, the name kept for Host and SNI
        (blocking: resolves)."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if self.allow_private:
            return url, {}, {}
        address = public_addresses(host, port, "url")[0]
        if address == host:  # already a literal address
            return url, {}, {}
        literal = f"[{address}]" if ":" in address else address
        target = parts._replace(netloc=f"{literal}:{port}").geturl()
        host_header = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            host_header += f":{parts.port}"
        return target, {"host": host_header}, ({"sni_hostname": host} if parts.scheme == "https" else {})

    async def _allowed(self, url: str) -> bool:
        key = origin(url)
        if key not in self.robots:
            parser = RobotFileParser()
            scheme, host, port = key
            answer = await self._get(f"{scheme}://{host}:{port}/robots.txt", 512 * 1024)
            parser.parse(answer.text.splitlines() if answer is not None and answer.status_code == 200 else [])
            self.robots[key] = parser
        return self.robots[key].can_fetch(USER_AGENT, url)

    async def list_items(self) -> list[ListedItem]:
        if self.spec.get("sitemap_url"):
            return await self._sitemap(self.spec["sitemap_url"])
        return await self._crawl(self.spec["start_url"])

    async def _sitemap(self, sitemap_url: str) -> list[ListedItem]:
        home = origin(sitemap_url)
        entries: dict[str, str] = {}
        pending, depth = [sitemap_url], 0
        while pending and depth < 2:
            nested = []
            for url in pending:
                answer = await self._get(url, MAX_SITEMAP_BYTES)
                if answer is None:
                    raise SourceUnavailable(f"the sitemap {url[:200]} does not exist (HTTP 404)")
                try:
                    root = ET.fromstring(answer.content)
                except ET.ParseError:
                    raise SourceUnavailable(f"the sitemap {url[:200]} is not valid XML") from None
                for node in root:
                    tag = node.tag.rsplit("}", 1)[-1]
                    loc = next((c.text or "" for c in node if c.tag.rsplit("}", 1)[-1] == "loc"), "").strip()
                    lastmod = next((c.text or "" for c in node if c.tag.rsplit("}", 1)[-1] == "lastmod"), "").strip()
                    if not loc or origin(loc) != home:
                        continue  # another host: never fetched
                    if tag == "sitemap":
                        nested.append(loc)
                    elif tag == "url" and len(entries) < self.max_pages:
                        entries[urldefrag(loc)[0]] = lastmod
            pending, depth = nested, depth + 1
        items = []
        for url, lastmod in entries.items():
            if await self._allowed(url):
                items.append(ListedItem(url, filename_of(url), f"lastmod:{lastmod}" if lastmod else "", url))
        return sorted(items, key=lambda i: i.source_uri)

    async def _crawl(self, start: str) -> list[ListedItem]:
        home = origin(start)
        queue, seen = [urldefrag(start)[0]], {urldefrag(start)[0]}
        items: list[ListedItem] = []
        while queue and len(items) < self.max_pages:
            url = queue.pop(0)
            if not await self._allowed(url):
                continue
            answer = await self._get(url, self.max_bytes)
            if answer is None:
                continue
            final = str(answer.url)
            content_type = answer.headers.get("content-type", "")
            body = answer.content
            sha = hashlib.sha256(body).hexdigest()
            mime = content_type.split(";", 1)[0].strip().lower()
            items.append(ListedItem(url, filename_of(url), f"sha256:{sha}", url, mime))
            if self.kept_bytes + len(body) <= KEEP_CRAWLED_BYTES:
                self.kept[url] = body
                self.kept_bytes += len(body)
            if HTML.match(content_type):
                links = Links()
                links.feed(answer.text)
                for href in links.hrefs:
                    target = urldefrag(urljoin(final, href))[0]
                    if origin(target) == home and target not in seen and urlsplit(target).scheme in ("http", "https"):
                        seen.add(target)
                        queue.append(target)
        return sorted(items, key=lambda i: i.source_uri)

    async def read(self, item: ListedItem) -> bytes:
        if item.locator in self.kept:
            return self.kept.pop(item.locator)
        answer = await self._get(item.locator, self.max_bytes)
        if answer is None:
            raise ItemVanished(item.source_uri)
        self.types[item.locator] = answer.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        return answer.content

    def mime_type_of(self, item: ListedItem) -> str:
        """The Content-Type the page was served with (after `read`), else what the listing knew."""
        return self.types.get(item.locator) or item.mime_type


__all__ = ["HttpReader"]
