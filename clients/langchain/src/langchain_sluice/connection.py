"""The SDK clients a retriever, an uploader or a reader calls Sluice through.

One sync `Client` (safe to share between threads) is made at the first sync call. An
`AsyncClient` belongs to the event loop it was first used in (its gRPC channels do), so one is
made per running loop: `asyncio.run()` called twice, as scripts and notebooks do, gets a fresh
one each time instead of a channel of a closed loop. A client passed in is used as it is and
never closed here: its owner closes it.

Addresses, key and TLS come from the arguments, else from the SDK's environment variables
(SLUICE_INGEST_ADDRESS, SLUICE_SEARCH_ADDRESS, SLUICE_API_KEY or `make run`'s credentials
file, SLUICE_TLS_*), else from `make run`'s defaults (docs/clients.md, "Connecting").

langchain_sluice/connection.py and llama_index_sluice/connection.py are the same file, so that
neither package depends on the other's framework; tests/integrations/test_llamaindex.py checks
that they stay the same.
"""

from __future__ import annotations

import asyncio
import threading
import weakref

from sluice_client import AsyncClient, Client


class Connection:
    """Clients made on demand from one set of settings (see the module's docstring)."""

    def __init__(
        self,
        *,
        address: str | None = None,
        search_address: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
    ) -> None:
        self._address = address
        self._search_address = search_address
        self._api_key = api_key
        self._timeout = timeout
        self._given = client
        self._given_async = async_client
        self._client: Client | None = None
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict[int, object]) -> Connection:
        """A copy with the same settings and clients given, making its own (a lock and channels
        cannot be copied; pydantic's deep model_copy of a retriever comes here)."""
        return Connection(
            address=self._address,
            search_address=self._search_address,
            api_key=self._api_key,
            timeout=self._timeout,
            client=self._given,
            async_client=self._given_async,
        )

    def client(self) -> Client:
        if self._given is not None:
            return self._given
        with self._lock:
            if self._client is None:
                self._client = Client(
                    self._address, search_address=self._search_address, api_key=self._api_key, timeout=self._timeout
                )
            return self._client

    def async_client(self) -> AsyncClient:
        """The AsyncClient of the running event loop."""
        if self._given_async is not None:
            return self._given_async
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            client = AsyncClient(self._address, search_address=self._search_address, api_key=self._api_key, timeout=self._timeout)
            self._async_clients[loop] = client
        return client

    def close(self) -> None:
        """Close the sync client made here (an AsyncClient closes with `aclose` in its loop)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Close the AsyncClient made here for the running loop."""
        client = self._async_clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()
