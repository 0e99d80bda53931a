"""The working folders of exports and imports (docs/bundles.md, "Import"): none survives a call,
however it ends, and the ones a killed process left are removed when ingest-api starts, while a
folder some live process holds is kept."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import grpc
import pytest
from helpers import wait_for
from sluice.v1 import collection_pb2
from sluice.v1 import document_service_pb2 as ds
from sluice_common.errors import reason_of
from sluice_ingest.bundle_spool import WorkFolder, sweep_stale

from .test_bundles import Api

HOUR = 3600.0


def _killed_holder(root) -> str:
    """A folder made by a process that was then killed with SIGKILL (it could not clean up)."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sys, time
                from pathlib import Path
                from sluice_ingest.bundle_spool import WorkFolder
                work = WorkFolder(Path({str(root)!r}), "sluice-import-")
                (work.path / "chunks.parquet").write_bytes(b"x" * 4096)
                print(work.path, flush=True)
                time.sleep(3600)
            """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    path = child.stdout.readline().strip()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    return path


def test_sweep_removes_only_unheld_stale_folders(tmp_path):
    root = tmp_path / "bundles"
    killed = _killed_holder(root)
    assert os.path.isdir(killed)  # SIGKILL left it
    held = WorkFolder(root, "sluice-export-")  # a live export of this (or another) process
    other = root / "not-ours"
    other.mkdir()
    try:
        # Young folders stay, held or not: a killed process's folder waits for the age limit.
        assert sweep_stale(root, older_than_seconds=HOUR) == []
        assert os.path.isdir(killed)
        removed = sweep_stale(root, older_than_seconds=HOUR, now=time.time() + 2 * HOUR)
        assert [str(p) for p in removed] == [killed]
        assert not os.path.exists(killed) and held.path.is_dir() and other.is_dir()
    finally:
        held.cleanup()
    assert not held.path.exists()
    held.cleanup()  # twice is harmless


def test_ingest_api_start_removes_what_killed_imports_left(ingest_api_factory, tmp_path):
    root = tmp_path / "bundles"
    killed = _killed_holder(root)
    old = time.time() - HOUR
    os.utime(killed, (old, old))
    ingest_api_factory(bundle_spool_dir=str(root), bundle_spool_stale_seconds=300.0)
    assert not os.path.exists(killed)
    assert list(root.iterdir()) == []


@pytest.fixture
async def small(ingest_api_factory, tmp_path):
    """A collection of two PENDING documents (no worker needed: an export takes them as they are)."""
    root = tmp_path / "bundles"
    server = ingest_api_factory(bundle_spool_dir=str(root), upload_spool_dir=str(tmp_path), upload_spool_memory_bytes=1024)
    api = Api(server.address)
    embedder = collection_pb2.EmbedderConfig(provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=64)
    await api.docs.CreateCollection(
        ds.CreateCollectionRequest(collection=collection_pb2.Collection(name="small", embedder=embedder))
    )
    for i in range(2):
        await api.upload("small", f"note-{i}.txt", f"note {i} about leases ".encode() * 2000)
    yield api, root
    await api.channel.close()


def _empty(root) -> bool:
    return not root.exists() or list(root.iterdir()) == []


async def test_no_call_leaves_a_folder_however_it_ends(small):
    api, root = small
    _, bundle = await api.export("small")
    assert _empty(root)

    # An export abandoned after its header (its stream never read) and one cut in the middle.
    for pieces_read in (0, 1):
        call = api.docs.ExportCollection(ds.ExportCollectionRequest(name="small"))
        read = 0
        async for message in call:
            if message.WhichOneof("payload") == "data":
                read += 1
            if read >= pieces_read:
                break
        call.cancel()
        await asyncio.to_thread(wait_for, lambda: _empty(root), timeout=30, what="the export's folder removed")

    # An import refused while extracting (a flipped byte in the middle of a member), one refused
    # by the trailer, one cut off by its client, and one that succeeds.
    damaged = bytearray(bundle)
    damaged[len(bundle) // 3] ^= 0xFF
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await api.import_call(bytes(damaged), "small-damaged")
    assert reason_of(refused.value) in ("BUNDLE_INVALID", "UPLOAD_INCOMPLETE", "CHECKSUM_MISMATCH")
    assert _empty(root)

    async def wrong_trailer():
        yield ds.ImportCollectionRequest(options=ds.ImportCollectionOptions(name="small-trailer"))
        yield ds.ImportCollectionRequest(data=bundle)
        yield ds.ImportCollectionRequest(trailer=ds.ImportCollectionTrailer(size_bytes=len(bundle), sha256="0" * 64))

    with pytest.raises(grpc.aio.AioRpcError):
        await api.docs.ImportCollection(wrong_trailer())
    assert _empty(root)

    cut = api.import_call(bundle, "small-cut", stop_at=len(bundle) // 2)
    await asyncio.sleep(1.0)
    cut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut
    await asyncio.to_thread(wait_for, lambda: _empty(root), timeout=30, what="the cut import's folder removed")

    imported = await api.import_call(bundle, "small-copy")
    assert imported.name == "small-copy"
    assert _empty(root)


async def test_the_rule_1_check_of_an_import_names_an_incomplete_ready_document(database_url):
    """BundleImport.problems() (one grouped pass over the generation's chunks, docs/bundles.md,
    "Performance"): nothing for a whole collection; a READY document short of a chunk, counted
    with its disabled ones, is named with both counts."""
    import psycopg
    from sluice_common.db import open_pool
    from sluice_ingest.store.bundles import BundleImport

    from bench.bundle_bench import synthesise

    collection, generation = synthesise(database_url, 120)  # 3 READY documents of 50, 50 and 20 chunks
    with psycopg.connect(database_url, autocommit=True) as conn:
        first = conn.execute("SELECT id FROM documents ORDER BY chunk_count DESC, id LIMIT 1").fetchone()[0]
    pool = await open_pool(database_url, max_size=1, name="rule-1-check")
    try:
        async with pool.connection() as conn:
            found = BundleImport(conn)
            found.collection_id, found.generation_id = collection, generation
            assert await found.problems() == []
            await conn.execute(
                "INSERT INTO disabled_chunks (id, document_id, tenant_id, collection_id, generation_id, chunk_index, text,"
                " embedding) SELECT id, document_id, tenant_id, collection_id, generation_id, chunk_index, text, embedding"
                " FROM chunks WHERE document_id = %s AND chunk_index = 0",
                (first,),
            )
            await conn.execute("DELETE FROM chunks WHERE document_id = %s AND chunk_index IN (0, 1)", (first,))
            (problem,) = await found.problems()
            assert problem.startswith(f"READY document {first} (") and problem.endswith("has 49 chunks in the bundle, not its 50")
            await conn.rollback()
    finally:
        await pool.close()
