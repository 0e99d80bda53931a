"""Sources, their runs and items in PostgreSQL (docs/sources.md).

The management statements are tenant-scoped (another tenant's source is NOT_FOUND, exactly like
one that does not exist). The runner's statements are fenced: every write after a claim names
the run's `lease_token` and a live lease (`locked_at` within the lease), so a runner whose lease
expired and was taken over changes nothing (`LeaseNotHeld`). Uploads and deletions of documents
run the same check inside their own transaction (`RunStore.fence`), holding the run row
FOR SHARE until they commit, so a takeover (which locks the row FOR UPDATE) waits for them.

Lock order: the run row first, then what the service code locks (jobs, then documents).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from psycopg import sql
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from sluice_common.db import one_snapshot
from sluice_common.errors import LeaseNotHeld, NotFound
from sluice_common.reasons import Reason

from ..store.common import lookup_collection_settings
from ..store.literals import compose, literal_table
from .domain import KnownItem, RunEvent, RunState, sources_of

# The runs' states and events by their entries (`{run_pending}`, `{run_event_progress}`), as
# store/literals.py names the domain's: no statement here types one by hand.
RUN_LITERAL_ENUMS: dict[str, type[RunState] | type[RunEvent]] = {"run": RunState, "run_event": RunEvent}
RUN_LITERALS = literal_table(RUN_LITERAL_ENUMS)

RUN_COLUMNS = """
    r.id, r.source_id, r.state, r.allow_mass_delete, r.scheduled, r.attempts, r.max_attempts, r.checkpoint,
    r.listed, r.uploaded, r.unchanged, r.deleted, r.failed, r.would_delete, r.error_message,
    r.created_at, r.started_at, r.ended_at
"""

SOURCE_SELECT = f"""
    SELECT s.id, s.tenant_id, s.collection_id, c.name AS collection, s.display_name, s.kind, s.spec,
           s.schedule_interval_seconds, s.max_delete_share, s.next_sync_at, s.created_at,
           (SELECT row_to_json(l) FROM (SELECT {RUN_COLUMNS} FROM source_runs r WHERE r.source_id = s.id
              ORDER BY r.created_at DESC, r.id DESC LIMIT 1) l) AS last_run
      FROM sources s JOIN collections c ON c.id = s.collection_id
"""
SOURCE_BY_ID_SQL = SOURCE_SELECT + " WHERE s.id = %s"
TENANT_SOURCE_SQL = SOURCE_SELECT + " WHERE s.id = %s AND s.tenant_id = %s"

INSERT_SOURCE_SQL = """
    INSERT INTO sources (tenant_id, collection_id, display_name, kind, spec, schedule_interval_seconds,
                         max_delete_share, next_sync_at)
    VALUES (%s, %s, %s, %s, %s, %s, %s,
            CASE WHEN %s > 0 THEN now() + make_interval(secs => %s) END)
    RETURNING id
"""

# ListSources' conditions, each with its parameters, in this order; the tenant's always.
LIST_CONDITIONS = {
    "tenant": "s.tenant_id = %s",
    "collection": "c.name = %s",
    # A scoped key's collections only (docs/tenancy.md, "Scoped keys").
    "scope": "c.name = ANY(%s::text[])",
    "after": "(s.created_at, s.id) > (%s, %s)",
}
LIST_PAGE = " ORDER BY s.created_at, s.id LIMIT %s"


@cache
def list_sources_sql(conditions: tuple[str, ...]) -> str:
    """ListSources' page (oldest first) under the tenant's and the named LIST_CONDITIONS."""
    return SOURCE_SELECT + " WHERE " + " AND ".join(LIST_CONDITIONS[name] for name in ("tenant", *conditions)) + LIST_PAGE


DELETE_SOURCE_SQL = "DELETE FROM sources WHERE id = %s AND tenant_id = %s RETURNING id"
LOCK_SOURCE_SQL = "SELECT 1 FROM sources WHERE id = %s FOR UPDATE"

# A new PENDING run, or the active one (the partial unique index of one active run per source).
REQUEST_RUN_SQL = compose(
    """
    INSERT INTO source_runs (source_id, allow_mass_delete, max_attempts) VALUES (%s, %s, %s)
    ON CONFLICT (source_id) WHERE state IN ({run_pending}, {run_running}) DO UPDATE
       SET allow_mass_delete = source_runs.allow_mass_delete OR excluded.allow_mass_delete
    RETURNING {run_columns}
    """,
    run_columns=sql.SQL(RUN_COLUMNS.replace("r.", "source_runs.")),
    **RUN_LITERALS,
)
NOTIFY_RUNS_SQL = "SELECT pg_notify('sluice_source_runs', %s)"

LIST_RUNS_SQL = f"SELECT {RUN_COLUMNS} FROM source_runs r WHERE r.source_id = %s ORDER BY r.created_at DESC, r.id DESC LIMIT %s"
LIST_RUNS_BEFORE_SQL = (
    f"SELECT {RUN_COLUMNS} FROM source_runs r WHERE r.source_id = %s AND (r.created_at, r.id) < (%s, %s)"
    " ORDER BY r.created_at DESC, r.id DESC LIMIT %s"
)


@dataclass(frozen=True, slots=True)
class RunRow:
    id: uuid.UUID
    source_id: uuid.UUID
    state: str
    allow_mass_delete: bool
    scheduled: bool
    attempts: int
    max_attempts: int
    checkpoint: dict[str, Any]
    listed: int
    uploaded: int
    unchanged: int
    deleted: int
    failed: int
    would_delete: int
    error_message: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    ended_at: dt.datetime | None

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> RunRow:
        def when(key: str) -> dt.datetime | None:
            return dt.datetime.fromisoformat(value[key]) if value.get(key) else None

        created = when("created_at")
        assert created is not None
        return cls(
            id=uuid.UUID(value["id"]),
            source_id=uuid.UUID(value["source_id"]),
            state=value["state"],
            allow_mass_delete=value["allow_mass_delete"],
            scheduled=value["scheduled"],
            attempts=value["attempts"],
            max_attempts=value["max_attempts"],
            checkpoint=value["checkpoint"],
            listed=value["listed"],
            uploaded=value["uploaded"],
            unchanged=value["unchanged"],
            deleted=value["deleted"],
            failed=value["failed"],
            would_delete=value["would_delete"],
            error_message=value["error_message"],
            created_at=created,
            started_at=when("started_at"),
            ended_at=when("ended_at"),
        )


@dataclass(frozen=True, slots=True)
class SourceRow:
    id: uuid.UUID
    tenant_id: int
    collection_id: int
    collection: str
    display_name: str
    kind: str
    spec: dict[str, Any]
    schedule_interval_seconds: int
    max_delete_share: float
    next_sync_at: dt.datetime | None
    created_at: dt.datetime
    last_run: RunRow | None

    @classmethod
    def from_row(cls, last_run: dict[str, Any] | None, **columns: Any) -> SourceRow:
        return cls(last_run=RunRow.from_json(last_run) if last_run else None, **columns)


@dataclass(frozen=True, slots=True)
class NewSource:
    tenant_id: int
    collection: str
    display_name: str
    kind: str
    spec: dict[str, Any]
    schedule_interval_seconds: int
    max_delete_share: float


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    """A run a runner holds: the run, its lease token and what it needs of its source."""

    run: RunRow
    lease_token: uuid.UUID
    source: SourceRow


@dataclass(frozen=True, slots=True)
class Progress:
    """Counts so far and the checkpoint: written together, fenced."""

    listed: int = 0
    uploaded: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    would_delete: int = 0
    error_message: str | None = None


class SourceStore:
    """The management calls (SourceService), tenant-scoped."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool

    async def create(self, new: NewSource) -> SourceRow:
        async with self.pool.connection() as conn, conn.transaction():
            collection = await lookup_collection_settings(conn, new.tenant_id, new.collection)
            row = await (
                await conn.execute(
                    INSERT_SOURCE_SQL,
                    (
                        new.tenant_id,
                        collection.id,
                        new.display_name,
                        new.kind,
                        json.dumps(new.spec),
                        new.schedule_interval_seconds,
                        new.max_delete_share,
                        new.schedule_interval_seconds,
                        new.schedule_interval_seconds,
                    ),
                )
            ).fetchone()
            assert row is not None
            return await self._get(conn, new.tenant_id, row[0])

    async def get(self, tenant_id: int, source_id: uuid.UUID) -> SourceRow:
        async with self.pool.connection() as conn:
            return await self._get(conn, tenant_id, source_id)

    @staticmethod
    async def _get(conn: Any, tenant_id: int | None, source_id: uuid.UUID) -> SourceRow:
        query, params = (SOURCE_BY_ID_SQL, [source_id]) if tenant_id is None else (TENANT_SOURCE_SQL, [source_id, tenant_id])
        cur = conn.cursor(row_factory=class_row_of_source())
        row = await (await cur.execute(query, params)).fetchone()
        if row is None:
            raise NotFound(f"source {source_id} does not exist", reason=Reason.SOURCE_NOT_FOUND)
        return row  # type: ignore[no-any-return]

    async def list_sources(
        self,
        tenant_id: int,
        collection: str | None,
        after: tuple[dt.datetime, uuid.UUID] | None,
        limit: int,
        scope: list[str] | None = None,
    ) -> list[SourceRow]:
        conditions: list[str] = []
        params: list[Any] = [tenant_id]
        if collection:
            conditions.append("collection")
            params.append(collection)
        if scope is not None:
            conditions.append("scope")
            params.append(scope)
        if after is not None:
            conditions.append("after")
            params.extend(after)
        query = list_sources_sql(tuple(conditions))
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row_of_source())
            return list(await (await cur.execute(query, [*params, limit])).fetchall())

    async def delete(self, tenant_id: int, source_id: uuid.UUID) -> None:
        async with self.pool.connection() as conn:
            row = await (await conn.execute(DELETE_SOURCE_SQL, (source_id, tenant_id))).fetchone()
            if row is None:
                raise NotFound(f"source {source_id} does not exist", reason=Reason.SOURCE_NOT_FOUND)

    async def request_run(self, tenant_id: int, source_id: uuid.UUID, allow_mass_delete: bool, max_attempts: int) -> RunRow:
        """A new PENDING run, or the run already PENDING or RUNNING (one active run per source).
        Asking again with allow_mass_delete lets the active run delete all the same."""
        async with self.pool.connection() as conn, conn.transaction():
            await self._get(conn, tenant_id, source_id)
            await conn.execute(LOCK_SOURCE_SQL, (source_id,))
            cur = conn.cursor(row_factory=class_row(RunRow))
            row = await (await cur.execute(REQUEST_RUN_SQL, (source_id, allow_mass_delete, max_attempts))).fetchone()
            assert row is not None
            await conn.execute(NOTIFY_RUNS_SQL, (str(source_id),))
            return row

    async def list_runs(
        self,
        tenant_id: int,
        source_id: uuid.UUID,
        before: tuple[dt.datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[RunRow]:
        """The source's runs, newest first; NOT_FOUND for a source that is not the tenant's. The
        check and the list see one snapshot: never the source before a deletion and its runs after
        (an empty list of a source that always had runs)."""
        async with self.pool.connection() as conn, one_snapshot(conn):
            await self._get(conn, tenant_id, source_id)
            query, params = (
                (LIST_RUNS_SQL, [source_id, limit]) if before is None else (LIST_RUNS_BEFORE_SQL, [source_id, *before, limit])
            )
            cur = conn.cursor(row_factory=class_row(RunRow))
            return list(await (await cur.execute(query, params)).fetchall())


def class_row_of_source() -> Any:
    from psycopg.rows import kwargs_row

    return kwargs_row(SourceRow.from_row)


# Rule 6's claim, for runs: PENDING, or RUNNING with an expired lease; one statement, SKIP LOCKED.
CLAIM_SQL = compose(
    """
    WITH candidate AS (
        SELECT r.id FROM source_runs r
         WHERE r.attempts < r.max_attempts
           AND (r.state = {run_pending} OR (r.state = {run_running} AND r.locked_at <= now() - make_interval(secs => %(lease)s)))
         ORDER BY r.created_at
         LIMIT 1
         FOR UPDATE SKIP LOCKED
    )
    UPDATE source_runs r
       SET state = {run_running}, attempts = r.attempts + 1, lease_token = gen_random_uuid(), locked_at = now(),
           started_at = coalesce(r.started_at, now())
      FROM candidate
     WHERE r.id = candidate.id AND r.state = ANY(%(from)s)
    RETURNING {run_columns}, r.lease_token
    """,
    run_columns=sql.SQL(RUN_COLUMNS),
    **RUN_LITERALS,
)

# Rule 8's convergence, for runs: an expired lease with no attempts left ends the run FAILED.
EXPIRE_SQL = compose(
    """
    UPDATE source_runs r
       SET state = {run_failed}, lease_token = NULL, locked_at = NULL, ended_at = now(),
           error_message = 'the sources runner stopped renewing its lease and the maximum number of attempts was reached'
     WHERE r.state = {run_running} AND r.attempts >= r.max_attempts
       AND r.locked_at <= now() - make_interval(secs => %(lease)s)
    """,
    **RUN_LITERALS,
)

# Due schedules: a run each (unless one is active), and the next time. SKIP LOCKED: runners at once.
SCHEDULE_SQL = compose(
    """
    WITH due AS (
        SELECT s.id, s.schedule_interval_seconds FROM sources s
         WHERE s.next_sync_at IS NOT NULL AND s.next_sync_at <= now()
         FOR UPDATE SKIP LOCKED
    ), moved AS (
        UPDATE sources s SET next_sync_at = now() + make_interval(secs => due.schedule_interval_seconds)
          FROM due WHERE s.id = due.id RETURNING s.id
    )
    INSERT INTO source_runs (source_id, scheduled, max_attempts)
    SELECT id, true, %(max_attempts)s FROM moved
    ON CONFLICT (source_id) WHERE state IN ({run_pending}, {run_running}) DO NOTHING
    """,
    **RUN_LITERALS,
)

# The fence of every runner's write: this runner's live lease on the run.
LEASE_HELD = sql.SQL(
    """
    id = %(run)s AND state = {run_running} AND lease_token = %(token)s
    AND locked_at > now() - make_interval(secs => %(lease)s)
"""
).format(**RUN_LITERALS)

FENCE_SQL = compose("SELECT 1 FROM source_runs WHERE {lease_held} FOR SHARE", lease_held=LEASE_HELD)
RENEW_SQL = compose("UPDATE source_runs SET locked_at = now() WHERE {lease_held} RETURNING id", lease_held=LEASE_HELD)
KNOWN_ITEMS_SQL = "SELECT source_uri, fingerprint, content_sha256 FROM source_items WHERE source_id = %s"
LIVE_SHAS_SQL = "SELECT source_uri, content_sha256 FROM documents WHERE collection_id = %s AND source_uri IS NOT NULL"
CHECKPOINT_SQL = compose(
    """
    UPDATE source_runs SET locked_at = now(), checkpoint = %(checkpoint)s, listed = %(listed)s,
           uploaded = %(uploaded)s, unchanged = %(unchanged)s, deleted = %(deleted)s, failed = %(failed)s,
           would_delete = %(would_delete)s, error_message = %(error)s
     WHERE {lease_held} RETURNING id
    """,
    lease_held=LEASE_HELD,
)
UPSERT_ITEMS_SQL = """
    INSERT INTO source_items (source_id, source_uri, fingerprint, content_sha256, seen_run)
    SELECT %s, u, f, s, %s FROM unnest(%s::text[], %s::text[], %s::text[]) AS t(u, f, s)
    ON CONFLICT (source_id, source_uri) DO UPDATE
       SET fingerprint = excluded.fingerprint, content_sha256 = excluded.content_sha256,
           seen_run = excluded.seen_run
"""
MARK_SEEN_SQL = "UPDATE source_items SET seen_run = %s WHERE source_id = %s AND source_uri = ANY(%s)"
# A PROGRESS event of the run as it stands, into its collection's events log (migration 0024).
PROGRESS_EVENT_SQL = compose(
    "SELECT sluice_record_source_run_event(r, {run_event_progress}) FROM source_runs r WHERE r.id = %s", **RUN_LITERALS
)
SOURCE_ITEMS_SQL = "SELECT source_uri FROM source_items WHERE source_id = %s ORDER BY source_uri"
LIVE_SOURCES_SQL = "SELECT count(DISTINCT source_uri) FROM documents WHERE collection_id = %s AND source_uri IS NOT NULL"
UNSEEN_ITEMS_SQL = "SELECT source_uri FROM source_items WHERE source_id = %s AND seen_run <> %s ORDER BY source_uri"
FORGET_ITEM_SQL = "DELETE FROM source_items WHERE source_id = %s AND source_uri = %s"
COUNT_DELETED_SQL = "UPDATE source_runs SET deleted = deleted + 1 WHERE id = %s"
FINISH_SQL = compose(
    """
    UPDATE source_runs SET state = %(state)s, lease_token = NULL, locked_at = NULL, ended_at = now(),
           checkpoint = %(checkpoint)s, listed = %(listed)s, uploaded = %(uploaded)s,
           unchanged = %(unchanged)s, deleted = %(deleted)s, failed = %(failed)s,
           would_delete = %(would_delete)s, error_message = %(error)s
     WHERE {lease_held} AND state = ANY(%(from)s) RETURNING id
    """,
    lease_held=LEASE_HELD,
)
# Back to PENDING while attempts are left (or when not charged), else FAILED.
GIVE_UP_SQL = compose(
    """
    UPDATE source_runs
       SET attempts = attempts - CASE WHEN %(charge)s THEN 0 ELSE 1 END,
           state = CASE WHEN NOT %(charge)s OR attempts < max_attempts THEN {run_pending} ELSE {run_failed} END,
           ended_at = CASE WHEN NOT %(charge)s OR attempts < max_attempts THEN NULL ELSE now() END,
           lease_token = NULL, locked_at = NULL,
           error_message = CASE WHEN %(charge)s THEN %(message)s ELSE error_message END
     WHERE {lease_held} AND state = ANY(%(from)s) RETURNING id
    """,
    lease_held=LEASE_HELD,
    **RUN_LITERALS,
)


class RunStore:
    """The runner's statements: claims, lease renewals, checkpoints and items, all fenced."""

    def __init__(self, pool: AsyncConnectionPool, lease_seconds: float) -> None:
        self.pool = pool
        self.lease_seconds = lease_seconds

    async def schedule_due(self, max_attempts: int) -> int:
        async with self.pool.connection() as conn:
            cur = await conn.execute(SCHEDULE_SQL, {"max_attempts": max_attempts})
            return cur.rowcount

    async def claim(self) -> ClaimedRun | None:
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute(EXPIRE_SQL, {"lease": self.lease_seconds})
            cur = conn.cursor()
            row = await (
                await cur.execute(CLAIM_SQL, {"lease": self.lease_seconds, "from": sources_of(RunState.RUNNING)})
            ).fetchone()
            if row is None:
                return None
            names = [d.name for d in cur.description or []]
            values = dict(zip(names, row, strict=True))
            token = values.pop("lease_token")
            run = RunRow(**values)
            source = await SourceStore._get(conn, None, run.source_id)
            return ClaimedRun(run, token, source)

    def _fence_params(self, claimed: ClaimedRun) -> dict[str, Any]:
        return {"run": claimed.run.id, "token": claimed.lease_token, "lease": self.lease_seconds}

    def fence(self, claimed: ClaimedRun) -> Any:
        """A check for the service code's transactions (NewDocument.fence): the run row FOR SHARE
        while the lease is live, else LeaseNotHeld (the write is refused)."""
        params = self._fence_params(claimed)

        async def check(conn: Any) -> None:
            row = await (await conn.execute(FENCE_SQL, params)).fetchone()
            if row is None:
                raise LeaseNotHeld(
                    "this runner's lease on the sync run expired; another runner took it over", reason=Reason.LEASE_NOT_HELD
                )

        return check

    async def renew(self, claimed: ClaimedRun) -> None:
        """Renew the lease: LeaseNotHeld when the lease was lost."""
        async with self.pool.connection() as conn:
            row = await (await conn.execute(RENEW_SQL, self._fence_params(claimed))).fetchone()
        if row is None:
            raise LeaseNotHeld("the sync run's lease was lost", reason=Reason.LEASE_NOT_HELD)

    async def known_items(self, source_id: uuid.UUID) -> dict[str, KnownItem]:
        async with self.pool.connection() as conn:
            rows = await (await conn.execute(KNOWN_ITEMS_SQL, (source_id,))).fetchall()
        return {r[0]: KnownItem(r[1], r[2]) for r in rows}

    async def live_shas(self, collection_id: int) -> dict[str, set[str]]:
        """Every live version's SHA-256 by source_uri in the collection."""
        async with self.pool.connection() as conn:
            rows = await (await conn.execute(LIVE_SHAS_SQL, (collection_id,))).fetchall()
        live: dict[str, set[str]] = {}
        for uri, sha in rows:
            live.setdefault(uri, set()).add(sha)
        return live

    async def checkpoint(
        self,
        claimed: ClaimedRun,
        checkpoint: dict[str, Any],
        progress: Progress,
        items: Iterable[tuple[str, str, str]] = (),
        seen: Iterable[str] = (),
        *,
        progress_event: bool = False,
    ) -> None:
        """One fenced transaction: the counts, the checkpoint, the items uploaded or found
        unchanged (source_uri, fingerprint, sha256) and the items only seen (failed reads of
        known items), all marked as listed by this run. Renews the lease too. With
        `progress_event`, the counts also go into the collection's events log (a PROGRESS event,
        migration 0024), in this same transaction."""
        params = self._fence_params(claimed)
        items, seen = list(items), list(seen)
        async with self.pool.connection() as conn, conn.transaction():
            row = await (
                await conn.execute(
                    CHECKPOINT_SQL,
                    {
                        **params,
                        "checkpoint": json.dumps(checkpoint),
                        "listed": progress.listed,
                        "uploaded": progress.uploaded,
                        "unchanged": progress.unchanged,
                        "deleted": progress.deleted,
                        "failed": progress.failed,
                        "would_delete": progress.would_delete,
                        "error": progress.error_message,
                    },
                )
            ).fetchone()
            if row is None:
                raise LeaseNotHeld("the sync run's lease was lost", reason=Reason.LEASE_NOT_HELD)
            if items:
                await conn.execute(
                    UPSERT_ITEMS_SQL,
                    (claimed.source.id, claimed.run.id, [i[0] for i in items], [i[1] for i in items], [i[2] for i in items]),
                )
            if seen:
                await conn.execute(MARK_SEEN_SQL, (claimed.run.id, claimed.source.id, seen))
            if progress_event:
                await conn.execute(PROGRESS_EVENT_SQL, (claimed.run.id,))

    async def gone_items(self, claimed: ClaimedRun, listed: set[str]) -> tuple[list[str], int, int]:
        """(the source's items this run did not list, the source's item count, the collection's
        distinct live source_uris)."""
        async with self.pool.connection() as conn:
            rows = await (await conn.execute(SOURCE_ITEMS_SQL, (claimed.source.id,))).fetchall()
            sources = await (await conn.execute(LIVE_SOURCES_SQL, (claimed.source.collection_id,))).fetchone()
        every = [r[0] for r in rows]
        return [u for u in every if u not in listed], len(every), int(sources[0]) if sources else 0

    async def unseen_items(self, claimed: ClaimedRun) -> list[str]:
        """The source's items no listing of this run saw (gone, or vanished while it ran)."""
        async with self.pool.connection() as conn:
            rows = await (await conn.execute(UNSEEN_ITEMS_SQL, (claimed.source.id, claimed.run.id))).fetchall()
        return [r[0] for r in rows]

    async def forget_item(self, claimed: ClaimedRun, source_uri: str, *, progress_event: bool = False) -> None:
        """The item's documents are deleted: drop its record and count the deletion on the run
        (written here, so a runner that resumes the run after a crash counts on from it); with
        `progress_event`, a PROGRESS event of the run as it now stands, in this transaction."""
        async with self.pool.connection() as conn, conn.transaction():
            await self.fence(claimed)(conn)
            await conn.execute(FORGET_ITEM_SQL, (claimed.source.id, source_uri))
            await conn.execute(COUNT_DELETED_SQL, (claimed.run.id,))
            if progress_event:
                await conn.execute(PROGRESS_EVENT_SQL, (claimed.run.id,))

    async def finish(
        self,
        claimed: ClaimedRun,
        state: RunState,
        progress: Progress,
        checkpoint: dict[str, Any],
    ) -> bool:
        """The run's last move (SUCCEEDED, FAILED, BLOCKED_MASS_DELETE) with its counts; False
        when the lease was lost meanwhile (the write changed nothing)."""
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute(
                    FINISH_SQL,
                    {
                        **self._fence_params(claimed),
                        "state": str(state),
                        "from": sources_of(state),
                        "checkpoint": json.dumps(checkpoint),
                        "listed": progress.listed,
                        "uploaded": progress.uploaded,
                        "unchanged": progress.unchanged,
                        "deleted": progress.deleted,
                        "failed": progress.failed,
                        "would_delete": progress.would_delete,
                        "error": progress.error_message,
                    },
                )
            ).fetchone()
        return row is not None

    async def give_up(self, claimed: ClaimedRun, message: str, *, charge: bool) -> bool:
        """After an unexpected error or a stop: back to PENDING (the counts and the checkpoint
        stay, for the next runner to resume from) while attempts are left, else FAILED.
        `charge=False` (a stop, not a failure) gives the attempt back."""
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute(
                    GIVE_UP_SQL,
                    {**self._fence_params(claimed), "charge": charge, "message": message, "from": sources_of(RunState.PENDING)},
                )
            ).fetchone()
        return row is not None


__all__ = ["ClaimedRun", "NewSource", "Progress", "RunRow", "RunStore", "SourceRow", "SourceStore"]
