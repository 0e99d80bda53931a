"""Every status write goes through the transition tables (docs/architecture.md#the-state-machines; one table drives
every transition): the store writes no status literal by hand, and a move that the table does
not allow, or that matches no row, fails loudly."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import psycopg
import pytest
from sluice_ingest import store, transitions
from sluice_ingest.domain import DocumentStatus, GenerationState, IllegalTransition, JobStatus, document_sources

STORE = "\n".join(path.read_text() for path in sorted(Path(store.__file__).parent.glob("*.py")))


def test_the_store_writes_no_status_by_hand():
    # Every UPDATE … SET … (up to its WHERE) of the store: none may assign `status`.
    updates = re.findall(r"UPDATE\s+(\w+)(?:\s+\w+)?\s+SET(.*?)(?:WHERE|FROM)", STORE, flags=re.S | re.I)
    assert updates, "no UPDATE found: the scan is broken"
    by_hand = [(table, body) for table, body in updates if re.search(r"\b(?:status|state)\s*=", body) and "{running}" not in body]
    assert by_hand == [], f"status written outside move_document/move_job/move_generation: {by_hand}"
    # The claim statements' status values are parameters from the job table, never literals.
    claims = [STORE.split(f"{name} = ")[1].split(".as_bytes(None)")[0] for name in ("CLAIM_SQL", "FAST_CLAIM_SQL")]
    tail = STORE.split("CLAIM_TAIL = ")[1].split('"""\n\n')[0]
    assert "SET status = {running}" in tail and all("CLAIM_TAIL" in claim for claim in claims)
    assert not any(re.search(r"status\s*=\s*'[A-Z]+'", text) for text in [tail, *claims])


def test_every_edge_the_store_names_exists():
    for target, narrowed in [
        (DocumentStatus.PENDING, [DocumentStatus.READY]),
        (DocumentStatus.PENDING, [DocumentStatus.FAILED]),
        (DocumentStatus.PENDING, [DocumentStatus.PENDING]),
        (DocumentStatus.READY, [DocumentStatus.INDEXING]),
    ]:
        assert document_sources(target, narrowed)
    with pytest.raises(IllegalTransition):
        document_sources(DocumentStatus.READY, [DocumentStatus.PARSING])  # no such edge: refused


async def test_a_move_that_matches_no_row_raises(database_url):
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        collection = (
            await (
                await conn.execute(
                    "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions,"
                    " chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts)"
                    " VALUES (1, 'c', 'hashing', 'h', 8, 1000, 800, 0, 3) RETURNING id"
                )
            ).fetchone()
        )[0]
        document = (
            await (
                await conn.execute(
                    "INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256, size_bytes)"
                    " VALUES (1, %s, 'a.txt', 'text/plain', repeat('a', 64), 1) RETURNING id",
                    (collection,),
                )
            ).fetchone()
        )[0]
        job = (
            await (
                await conn.execute(
                    "INSERT INTO ingestion_jobs (document_id, max_attempts) VALUES (%s, 3) RETURNING id", (document,)
                )
            ).fetchone()
        )[0]
        # PENDING → READY is not an edge: refused before any SQL.
        with pytest.raises(IllegalTransition):
            await transitions.move_document(conn, document, DocumentStatus.READY, sources=[DocumentStatus.PENDING])
        # INDEXING → READY is an edge, but the document is PENDING: no row matches, and it says so.
        with pytest.raises(IllegalTransition, match="cannot move to READY"):
            await transitions.move_document(conn, document, DocumentStatus.READY, {"chunk_count": 0})
        with pytest.raises(IllegalTransition, match="cannot move to SUCCEEDED"):
            await transitions.move_job(conn, job, JobStatus.SUCCEEDED)
        with pytest.raises(IllegalTransition):
            await transitions.move_job(conn, uuid.uuid4(), JobStatus.FAILED)
        # A legal move happens, with its values, and stamps updated_at.
        await transitions.move_document(conn, document, DocumentStatus.PARSING, {"progress_stage": "PARSING"})
        status, stage = await (
            await conn.execute("SELECT status::text, progress_stage::text FROM documents WHERE id = %s", (document,))
        ).fetchone()
        assert (status, stage) == ("PARSING", "PARSING")


async def test_generation_moves_follow_their_table(database_url):
    """GENERATION_TRANSITIONS through move_generation, as the switch and CancelReindex use it."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        collection = (
            await (
                await conn.execute(
                    "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions,"
                    " chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts)"
                    " VALUES (1, 'c', 'hashing', 'h', 8, 1000, 800, 0, 3) RETURNING id"
                )
            ).fetchone()
        )[0]
        first = (
            await (
                await conn.execute(  # generation 1 is created ACTIVE with the collection
                    "SELECT id FROM collection_generations WHERE collection_id = %s AND state = 'ACTIVE'", (collection,)
                )
            ).fetchone()
        )[0]

        async def building(number: int) -> int:
            return (
                await (
                    await conn.execute(
                        "INSERT INTO collection_generations (tenant_id, collection_id, number, embedder_provider, embedder_model,"
                        " dimensions) VALUES (1, %s, %s, 'hashing', 'h2', 16) RETURNING id",
                        (collection, number),
                    )
                ).fetchone()
            )[0]

        async def state(generation: int) -> str:
            return (
                await (
                    await conn.execute("SELECT state::text FROM collection_generations WHERE id = %s", (generation,))
                ).fetchone()
            )[0]

        second = await building(2)
        # Not edges: refused before any SQL.
        with pytest.raises(IllegalTransition):
            await transitions.move_generation(conn, second, GenerationState.RETIRED, sources=[GenerationState.BUILDING])
        # Edges whose source the row is not in: no row matches, and it says so.
        with pytest.raises(IllegalTransition, match="cannot move to RETIRED"):
            await transitions.move_generation(conn, second, GenerationState.RETIRED, {"ended_at": transitions.NOW})
        with pytest.raises(IllegalTransition, match="cannot move to CANCELLED"):
            await transitions.move_generation(conn, first, GenerationState.CANCELLED, {"ended_at": transitions.NOW})
        # The switch: ACTIVE → RETIRED, then BUILDING → ACTIVE.
        await transitions.move_generation(conn, first, GenerationState.RETIRED, {"ended_at": transitions.NOW})
        await transitions.move_generation(conn, second, GenerationState.ACTIVE, {"activated_at": transitions.NOW})
        assert (await state(first), await state(second)) == ("RETIRED", "ACTIVE")
        # RETIRED is final; a reindex given up is CANCELLED, and final too.
        with pytest.raises(IllegalTransition):
            await transitions.move_generation(conn, first, GenerationState.ACTIVE, {"activated_at": transitions.NOW})
        third = await building(3)
        await transitions.move_generation(conn, third, GenerationState.CANCELLED, {"ended_at": transitions.NOW})
        with pytest.raises(IllegalTransition):
            await transitions.move_generation(conn, third, GenerationState.ACTIVE, {"activated_at": transitions.NOW})
        assert await state(third) == "CANCELLED"
