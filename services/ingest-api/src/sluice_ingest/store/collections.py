"""Collections: create, look up, list and delete, scoped to a tenant."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from sluice_common import vector_index
from sluice_common.db import one_snapshot
from sluice_common.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from sluice_common.reasons import Reason

from .common import (
    COLLECTION_SELECT,
    StoreBase,
    check_quota,
    lookup_collection,
    lookup_collection_settings,
    named_rows,
    one_row,
)
from .generations import with_generations
from .literals import compose
from .rows import CollectionRow, NewCollection

CREATE_COLLECTION_SQL = """
    INSERT INTO collections (tenant_id, name, description, embedder_provider, embedder_model, dimensions,
        chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts, reranker, vector_precision)
    VALUES (%(tenant_id)s, %(name)s, %(description)s, %(embedder_provider)s, %(embedder_model)s, %(dimensions)s,
        %(chunk_max_characters)s, %(chunk_new_after_n_chars)s, %(chunk_overlap)s, %(max_attempts)s, %(reranker)s,
        %(vector_precision)s)
    ON CONFLICT (tenant_id, name) DO NOTHING
    RETURNING id
"""

# Generation 1 (ACTIVE) was created by the collections trigger (migrations 0009, 0023).
FIRST_GENERATION_SQL = compose("SELECT id FROM collection_generations WHERE collection_id = %s AND state = {gen_active}")

LIST_COLLECTIONS_SQL = compose(
    COLLECTION_SELECT + " WHERE c.tenant_id = %(tenant)s AND (%(after)s::text IS NULL OR c.name > %(after)s)"
    # A scoped key's collections only (docs/tenancy.md, "Scoped keys"); NULL: every one.
    " AND (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))"
    " ORDER BY c.name LIMIT %(limit)s"
)

# DeleteCollection, in this order: the collection, its documents' count, its jobs (locked before
# documents, as everywhere else), its generations (their indexes are dropped after the rows).
LOCK_COLLECTION_SQL = "SELECT id FROM collections WHERE tenant_id = %s AND name = %s FOR UPDATE"
COUNT_DOCUMENTS_SQL = "SELECT count(*) FROM documents WHERE collection_id = %s"
LOCK_JOBS_SQL = (
    "SELECT 1 FROM ingestion_jobs j JOIN documents d ON d.id = j.document_id WHERE d.collection_id = %s FOR UPDATE OF j"
)
GENERATIONS_SQL = "SELECT id FROM collection_generations WHERE collection_id = %s"
DELETE_COLLECTION_SQL = "DELETE FROM collections WHERE id = %s"


class CollectionStore(StoreBase):
    async def create_collection(self, new: NewCollection) -> CollectionRow:
        async with self.pool.connection() as conn, conn.transaction():
            await check_quota(conn, new.tenant_id, collections=1)
            try:
                row = await (
                    await conn.cursor(row_factory=dict_row).execute(
                        CREATE_COLLECTION_SQL,
                        {**new.__dict__, "reranker": Jsonb(new.reranker) if new.reranker else None},
                    )
                ).fetchone()
            except psycopg.errors.CheckViolation as exc:
                raise InvalidArgument(f"invalid collection settings: {exc.diag.constraint_name}") from exc
            if row is None:
                raise AlreadyExists(
                    f"collection {new.name!r} already exists", reason=Reason.COLLECTION_EXISTS, collection=new.name
                )
            # Generation 1 (ACTIVE) was created by the collections trigger (migrations 0009, 0023), with
            # the collection's vector precision; its (empty) index is built at once.
            (generation_id,) = await one_row(conn, FIRST_GENERATION_SQL, (row["id"],))
            await conn.execute(vector_index.create_index_sql(generation_id, new.dimensions, precision=new.vector_precision))
            return await with_generations(conn, await lookup_collection(conn, new.tenant_id, new.name))

    async def get_collection(self, tenant_id: int, name: str) -> CollectionRow:
        """The collection with its counts and its generations, read in one snapshot: never the
        collection's columns of one commit beside the generations of the next (a switch)."""
        async with self.pool.connection() as conn, one_snapshot(conn):
            return await with_generations(conn, await lookup_collection(conn, tenant_id, name))

    async def collection_settings(self, tenant_id: int, name: str) -> CollectionRow:
        """The collection's own columns, without the document counts (cheap: for hot paths)."""
        async with self.pool.connection() as conn:
            return await lookup_collection_settings(conn, tenant_id, name)

    async def list_collections(
        self, tenant_id: int, after: str | None, limit: int, scope: list[str] | None = None
    ) -> list[CollectionRow]:
        """A page of the tenant's collections by name, only those in `scope` when it is given."""
        async with self.pool.connection() as conn:
            return await named_rows(
                conn,
                CollectionRow,
                LIST_COLLECTIONS_SQL,
                {"tenant": tenant_id, "after": after, "limit": limit, "scope": scope},
            )

    async def delete_collection(self, tenant_id: int, name: str, force: bool) -> int:
        async with self.pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(LOCK_COLLECTION_SQL, (tenant_id, name))).fetchone()
            if row is None:
                raise NotFound(f"collection {name!r} does not exist", reason=Reason.COLLECTION_NOT_FOUND, collection=name)
            collection_id = row[0]
            (count,) = await one_row(conn, COUNT_DOCUMENTS_SQL, (collection_id,))
            if count and not force:
                raise FailedPrecondition(
                    f"collection {name!r} still has {count} documents; delete them first or pass force",
                    reason=Reason.COLLECTION_NOT_EMPTY,
                    documents=count,
                )
            # Lock order: jobs before documents, as everywhere else.
            await conn.execute(LOCK_JOBS_SQL, (collection_id,))
            generations = await (await conn.execute(GENERATIONS_SQL, (collection_id,))).fetchall()
            # Every generation goes with it (a reindex in progress included); the trigger NOTIFYs search.
            await conn.execute(DELETE_COLLECTION_SQL, (collection_id,))
            for (generation_id,) in generations:
                await conn.execute(vector_index.drop_index_sql(generation_id))
            return int(count)
