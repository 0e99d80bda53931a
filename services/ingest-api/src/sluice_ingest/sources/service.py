"""Use cases of SourceService: validate, call the store once, return rows."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from typing import Any

from sluice_common.errors import InvalidArgument, NotFound
from sluice_common.names import source_id_of
from sluice_common.reasons import Reason

from ..arguments import decode_token, encode_token, page_size_of, parse_id
from ..settings import IngestSettings
from .domain import SourceKind
from .spec import invalid, normalise
from .store import NewSource, RunRow, SourceRow, SourceStore

MAX_DISPLAY_NAME = 200
MIN_SCHEDULE_SECONDS = 60
MAX_SCHEDULE_SECONDS = 366 * 86400


def source_id(name: str) -> uuid.UUID:
    return parse_id(source_id_of(name), "source")


class SourceService:
    def __init__(self, store: SourceStore, settings: IngestSettings) -> None:
        self.store = store
        self.settings = settings

    async def create(
        self,
        tenant_id: int,
        collection: str,
        display_name: str,
        kind: SourceKind | None,
        spec: dict[str, Any],
        schedule_interval_seconds: int,
        max_delete_share: float,
    ) -> SourceRow:
        if not collection:
            raise InvalidArgument("source.collection is required", reason=Reason.MISSING_COLLECTION)
        if len(display_name) > MAX_DISPLAY_NAME or "\x00" in display_name:
            raise invalid(f"source.display_name is longer than {MAX_DISPLAY_NAME} characters or contains NUL")
        if kind is None:
            raise invalid("source kind is required: set one of local_folder, s3, http or git")
        if schedule_interval_seconds and not MIN_SCHEDULE_SECONDS <= schedule_interval_seconds <= MAX_SCHEDULE_SECONDS:
            raise invalid(
                f"source.schedule_interval_seconds must be 0 (no schedule) or between {MIN_SCHEDULE_SECONDS}"
                f" and {MAX_SCHEDULE_SECONDS}"
            )
        if schedule_interval_seconds < 0:
            raise invalid("source.schedule_interval_seconds must not be negative")
        if not 0 <= max_delete_share <= 1 or max_delete_share != max_delete_share:
            raise invalid("source.max_delete_share must be between 0 (the server's default) and 1")
        s = self.settings
        stored = await asyncio.to_thread(
            normalise, kind, spec, roots=s.source_local_roots, allow_private=s.source_allow_private_networks
        )
        return await self.store.create(
            NewSource(
                tenant_id,
                collection,
                display_name,
                str(kind),
                stored,
                schedule_interval_seconds,
                max_delete_share or s.source_default_max_delete_share,
            )
        )

    async def get(self, tenant_id: int, name: str) -> SourceRow:
        return await self.store.get(tenant_id, source_id(name))

    async def require_visible(self, tenant_id: int, name: str, scope: frozenset[str] | None) -> SourceRow | None:
        """For a scoped key (docs/tenancy.md, "Scoped keys"): a source of a collection outside
        `scope` answers NOT_FOUND as a missing one (a read by id, then the check); returns the
        source it read, None for an unscoped key (no read)."""
        if scope is None:
            return None
        row = await self.get(tenant_id, name)
        if row.collection not in scope:
            raise NotFound(f"source {row.id} does not exist", reason=Reason.SOURCE_NOT_FOUND)
        return row

    async def list_sources(
        self, tenant_id: int, collection: str, page_size: int, page_token: str, scope: list[str] | None = None
    ) -> tuple[list[SourceRow], str]:
        limit = page_size_of(page_size)
        filters = f"sources:{collection}"
        token = decode_token(page_token, filters)
        try:
            after = (dt.datetime.fromisoformat(token["t"]), uuid.UUID(token["i"])) if token else None
        except (KeyError, TypeError, ValueError):
            raise InvalidArgument("page_token is not valid", reason=Reason.INVALID_PAGE_TOKEN) from None
        rows = await self.store.list_sources(tenant_id, collection or None, after, limit + 1, scope)
        next_token = ""
        if len(rows) > limit:
            last = rows[limit - 1]
            next_token = encode_token({"f": filters, "t": last.created_at.isoformat(), "i": str(last.id)})
        return rows[:limit], next_token

    async def delete(self, tenant_id: int, name: str) -> None:
        await self.store.delete(tenant_id, source_id(name))

    async def sync(self, tenant_id: int, name: str, allow_mass_delete: bool) -> RunRow:
        return await self.store.request_run(tenant_id, source_id(name), allow_mass_delete, self.settings.source_max_attempts)

    async def list_runs(self, tenant_id: int, name: str, page_size: int, page_token: str) -> tuple[list[RunRow], str]:
        sid = source_id(name)
        limit = page_size_of(page_size)
        filters = f"runs:{sid}"
        token = decode_token(page_token, filters)
        try:
            before = (dt.datetime.fromisoformat(token["t"]), uuid.UUID(token["i"])) if token else None
        except (KeyError, TypeError, ValueError):
            raise InvalidArgument("page_token is not valid", reason=Reason.INVALID_PAGE_TOKEN) from None
        rows = await self.store.list_runs(tenant_id, sid, before, limit + 1)
        next_token = ""
        if len(rows) > limit:
            last = rows[limit - 1]
            next_token = encode_token({"f": filters, "t": last.created_at.isoformat(), "i": str(last.id)})
        return rows[:limit], next_token


__all__ = ["SourceService"]
