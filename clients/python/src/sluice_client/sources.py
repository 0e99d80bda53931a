"""`client.sources`: sources kept in step with a collection by the server (docs/sources.md).

A source is a folder on the server, an S3-compatible bucket, a web site (sitemap or crawl) or a
git repository; `sync` asks for a run, which the server's `sluice-sources` carries out. Names are
`collections/{collection}/sources/{id}`; every call also takes the bare id.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import WaitTimeout
from .protos import source_service_pb2 as src

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .client import Client

ENDED_STATES = ("succeeded", "failed", "blocked_mass_delete")


def _state(value: src.SourceRunState.ValueType) -> str:
    name: str = src.SourceRunState.Name(value)
    return name.removeprefix("SOURCE_RUN_STATE_").lower()


@dataclass(frozen=True)
class SourceRun:
    """One sync of a source: its state (pending, running, succeeded, failed, blocked_mass_delete)
    and counts."""

    id: str
    name: str
    state: str
    listed: int
    uploaded: int
    unchanged: int
    deleted: int
    failed: int
    would_delete: int
    error_message: str
    raw: src.SourceRun = field(repr=False, compare=False)

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @classmethod
    def from_proto(cls, r: src.SourceRun) -> SourceRun:
        return cls(
            r.id,
            r.name,
            _state(r.state),
            r.listed,
            r.uploaded,
            r.unchanged,
            r.deleted,
            r.failed,
            r.would_delete,
            r.error_message,
            r,
        )


@dataclass(frozen=True)
class SourceRunEvent:
    """A sync run as one of its events on WatchCollection left it (`CollectionEvent.source_run`):
    the source's name and display name, and the run with its state and counts then."""

    source: str
    source_display_name: str
    run: SourceRun
    raw: Any = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, event: Any) -> SourceRunEvent:
        return cls(event.source, event.source_display_name, SourceRun.from_proto(event.run), event)


@dataclass(frozen=True)
class Source:
    id: str
    name: str
    collection: str
    kind: str  # local_folder, s3, http, git
    display_name: str
    schedule_interval_seconds: int
    last_run: SourceRun | None
    raw: src.Source = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, s: src.Source) -> Source:
        kind = src.SourceKind.Name(s.kind).removeprefix("SOURCE_KIND_").lower()
        return cls(
            s.id,
            s.name,
            s.collection,
            kind,
            s.display_name,
            s.schedule_interval_seconds,
            SourceRun.from_proto(s.last_run) if s.HasField("last_run") else None,
            s,
        )


def spec(
    *,
    folder: str | None = None,
    glob: str = "",
    s3_endpoint: str | None = None,
    bucket: str = "",
    prefix: str = "",
    region: str = "",
    access_key_id_env: str = "",
    secret_access_key_env: str = "",
    sitemap_url: str | None = None,
    start_url: str | None = None,
    max_pages: int = 0,
    git: str | None = None,
    ref: str = "",
    subpath: str = "",
) -> dict[str, Any]:
    """The `Source` field of exactly one kind (ValueError otherwise)."""
    chosen: dict[str, Any] = {}
    if folder is not None:
        chosen["local_folder"] = src.LocalFolderSource(path=folder, glob=glob)
    if s3_endpoint is not None:
        chosen["s3"] = src.S3Source(
            endpoint=s3_endpoint,
            bucket=bucket,
            prefix=prefix,
            region=region,
            access_key_id_env=access_key_id_env,
            secret_access_key_env=secret_access_key_env,
        )
    if sitemap_url is not None or start_url is not None:
        chosen["http"] = src.HttpSource(sitemap_url=sitemap_url or "", start_url=start_url or "", max_pages=max_pages)
    if git is not None:
        chosen["git"] = src.GitSource(repository=git, ref=ref, subpath=subpath)
    if len(chosen) != 1:
        raise ValueError("give exactly one kind of source: folder, s3_endpoint, sitemap_url or start_url, or git")
    return chosen


class Sources:
    """Create, list, sync and delete the sources of the caller's collections."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def _call(self, method: str, request: Any) -> Any:
        return self._client._unary("sources", method, request)

    def create(
        self, collection: str, *, display_name: str = "", every_seconds: int = 0, max_delete_share: float = 0.0, **kind: Any
    ) -> Source:
        """A source of one kind (see `spec`: folder=, s3_endpoint=/bucket=, sitemap_url= or start_url=, git=),
        synced every `every_seconds` (0: only on `sync`)."""
        message = src.Source(
            collection=collection,
            display_name=display_name,
            schedule_interval_seconds=every_seconds,
            max_delete_share=max_delete_share,
            **spec(**kind),
        )
        return Source.from_proto(self._call("CreateSource", src.CreateSourceRequest(source=message)))

    def get(self, name: str) -> Source:
        return Source.from_proto(self._call("GetSource", src.GetSourceRequest(name=name)))

    def list(self, collection: str | None = None) -> Iterator[Source]:
        token = ""
        while True:
            page = self._call("ListSources", src.ListSourcesRequest(collection=collection or "", page_size=200, page_token=token))
            yield from (Source.from_proto(s) for s in page.sources)
            token = page.next_page_token
            if not token:
                return

    def delete(self, name: str) -> None:
        """Delete the source and its runs; the documents it synced stay."""
        self._call("DeleteSource", src.DeleteSourceRequest(name=name))

    def sync(
        self,
        name: str,
        *,
        allow_mass_delete: bool = False,
        wait: bool = False,
        timeout: float = 3600.0,
        poll_seconds: float = 1.0,
    ) -> SourceRun:
        """Ask for a run (or get the one already pending or running); with `wait`, return once it ended."""
        run = SourceRun.from_proto(
            self._call("SyncSource", src.SyncSourceRequest(name=name, allow_mass_delete=allow_mass_delete))
        )
        if not wait:
            return run
        deadline = time.monotonic() + timeout
        while not run.ended:
            if time.monotonic() > deadline:
                raise WaitTimeout(f"the sync run {run.id} did not end within {timeout:.0f} s (it is {run.state})")
            time.sleep(poll_seconds)
            run = next((r for r in self.runs(name, limit=20) if r.id == run.id), run)
        return run

    def runs(self, name: str, *, limit: int = 20) -> builtins.list[SourceRun]:
        """The source's runs, newest first."""
        rows: builtins.list[SourceRun] = []
        token = ""
        while len(rows) < limit:
            page = self._call(
                "ListSourceRuns", src.ListSourceRunsRequest(name=name, page_size=min(limit - len(rows), 1000), page_token=token)
            )
            rows.extend(SourceRun.from_proto(r) for r in page.runs)
            token = page.next_page_token
            if not token:
                break
        return rows


class AsyncSources:
    """Sources for asyncio (see Sources)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def _call(self, method: str, request: Any) -> Any:
        return await self._client._unary("sources", method, request)

    async def create(
        self, collection: str, *, display_name: str = "", every_seconds: int = 0, max_delete_share: float = 0.0, **kind: Any
    ) -> Source:
        """See Sources.create."""
        message = src.Source(
            collection=collection,
            display_name=display_name,
            schedule_interval_seconds=every_seconds,
            max_delete_share=max_delete_share,
            **spec(**kind),
        )
        return Source.from_proto(await self._call("CreateSource", src.CreateSourceRequest(source=message)))

    async def get(self, name: str) -> Source:
        return Source.from_proto(await self._call("GetSource", src.GetSourceRequest(name=name)))

    async def list(self, collection: str | None = None) -> AsyncIterator[Source]:
        token = ""
        while True:
            page = await self._call(
                "ListSources", src.ListSourcesRequest(collection=collection or "", page_size=200, page_token=token)
            )
            for source in page.sources:
                yield Source.from_proto(source)
            token = page.next_page_token
            if not token:
                return

    async def delete(self, name: str) -> None:
        await self._call("DeleteSource", src.DeleteSourceRequest(name=name))

    async def sync(
        self,
        name: str,
        *,
        allow_mass_delete: bool = False,
        wait: bool = False,
        timeout: float = 3600.0,
        poll_seconds: float = 1.0,
    ) -> SourceRun:
        """See Sources.sync."""
        run = SourceRun.from_proto(
            await self._call("SyncSource", src.SyncSourceRequest(name=name, allow_mass_delete=allow_mass_delete))
        )
        deadline = time.monotonic() + timeout
        while wait and not run.ended:
            if time.monotonic() > deadline:
                raise WaitTimeout(f"the sync run {run.id} did not end within {timeout:.0f} s (it is {run.state})")
            await asyncio.sleep(poll_seconds)
            run = next((r for r in await self.runs(name, limit=20) if r.id == run.id), run)
        return run

    async def runs(self, name: str, *, limit: int = 20) -> builtins.list[SourceRun]:
        rows: builtins.list[SourceRun] = []
        token = ""
        while len(rows) < limit:
            page = await self._call(
                "ListSourceRuns", src.ListSourceRunsRequest(name=name, page_size=min(limit - len(rows), 1000), page_token=token)
            )
            rows.extend(SourceRun.from_proto(r) for r in page.runs)
            token = page.next_page_token
            if not token:
                break
        return rows


__all__ = ["AsyncSources", "Source", "SourceRun", "SourceRunEvent", "Sources", "spec"]
