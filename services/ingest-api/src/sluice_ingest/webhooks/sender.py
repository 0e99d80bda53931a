"""One signed POST of one delivery, to an address checked just before connecting.

The URL's host is resolved and every address checked (guard.py) right before the attempt;
the request then goes to that IP literally, with the URL's Host header and, for https, the
URL's host as SNI and as the name the certificate is verified against (httpx's
`sni_hostname` extension). So the address checked is the address connected to: a DNS answer
that changes between the check and the connection (rebinding) is never used. Redirects are
not followed (a 3xx is a failed attempt), proxies from the environment are not used, and the
response body is not read.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import time
from dataclasses import dataclass

import httpx
from sluice_common.errors import InvalidArgument

from . import guard, signing

MAX_BODY_READ = 64 * 1024


@dataclass(frozen=True, slots=True)
class AttemptResult:
    status_code: int | None  # None: no HTTP answer (refused, timed out, not allowed)
    error: str | None  # None on a 2xx

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def gone(self) -> bool:
        return self.status_code == 410


class Sender:
    def __init__(
        self,
        *,
        allow_private: bool,
        connect_timeout: float,
        total_timeout: float,
        max_connections: int,
        ca_file: str = "",
    ) -> None:
        self.allow_private = allow_private
        self.total_timeout = total_timeout
        self.client = httpx.AsyncClient(
            verify=ssl.create_default_context(cafile=ca_file) if ca_file else True,
            timeout=httpx.Timeout(total_timeout, connect=connect_timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            follow_redirects=False,
            trust_env=False,
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def post(self, url: str, secret: str, webhook_id: str, body: bytes) -> AttemptResult:
        try:
            async with asyncio.timeout(self.total_timeout):
                return await self._post(url, secret, webhook_id, body)
        except TimeoutError:
            return AttemptResult(None, f"no answer within {self.total_timeout:g} s")

    async def _post(self, url: str, secret: str, webhook_id: str, body: bytes) -> AttemptResult:
        try:
            target = guard.parse_url(url)
            addresses = await guard.resolve(target, self.allow_private, self.total_timeout)
        except InvalidArgument as exc:
            return AttemptResult(None, exc.message)
        headers = signing.headers(secret, webhook_id, int(time.time()), body)
        headers["host"] = target.host_header
        headers["user-agent"] = "Sluice-Webhooks/1"
        extensions = {}
        if target.scheme == "https" and not _is_literal(target.host):
            extensions["sni_hostname"] = target.host
        last_error = "no address"
        for address in addresses:
            literal = f"[{address}]" if address.version == 6 else str(address)
            request = self.client.build_request(
                "POST",
                f"{target.scheme}://{literal}:{target.port}{target.path}",
                content=body,
                headers=headers,
                extensions=extensions,
            )
            try:
                response = await self.client.send(request, stream=True)
            except httpx.ConnectError as exc:
                last_error = f"cannot connect to {address}: {exc or type(exc).__name__}"
                continue  # the next address of the name, if any
            except httpx.TimeoutException as exc:
                return AttemptResult(None, f"timed out ({type(exc).__name__})")
            except httpx.HTTPError as exc:
                return AttemptResult(None, f"{type(exc).__name__}: {exc}"[:500])
            try:
                # Read a little of the body so the connection can be reused; never all of it.
                read = 0
                async for chunk in response.aiter_raw():
                    read += len(chunk)
                    if read > MAX_BODY_READ:
                        break
            except httpx.HTTPError:
                pass  # the status is what counts
            finally:
                await response.aclose()
            code = response.status_code
            return AttemptResult(code, None if 200 <= code < 300 else f"HTTP {code} {response.reason_phrase}"[:500])
        return AttemptResult(None, last_error[:500])


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
