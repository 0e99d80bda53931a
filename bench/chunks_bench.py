"""ListChunks and UpdateChunk figures (docs/chunks.md): a READY document of `--chunks` chunks of
about 1,000 characters each, listed a page at a time through gRPC beside the raw SQL of the same
page in the same process.

    .venv/bin/python -m bench chunks [--chunks 1000] [--rounds 200] [--dimensions 384]

Starts its own embedded PostgreSQL, migrates it and starts ingest-api in this process. The
document is committed the way a worker commits one: uploaded, claimed, taken through its stages
and completed through JobService's CompleteJob with `--chunks` chunks of generated prose and
random unit vectors (so the rows are as wide as real ones: the text and a `--dimensions` vector).

Then, in turns (one call of each kind per round, so noise on a shared machine lands on all
alike): ListChunks of a page of 100 (the page cycling through the document by its tokens) and
of the whole document in one page of 1,000, each through gRPC (with its key check, as deployed)
and as the store's own statements on a connection of this process (the baseline: the page and
the count, in one REPEATABLE READ transaction, into the store's typed rows as the store reads them). Last, UpdateChunk:
disabling and enabling one chunk (a row moved between the tables, in one transaction) and an
edit (the text embedded again by the collection's hashing embedder, then written).

Beside each latency, the CPU time this process spent per call (ingest-api, its gRPC threads and
the client all run here; PostgreSQL's own work is in its processes): a figure that a busy machine
stretches far less than the wall clock.

The issue's bar: ListChunks of a 1,000-chunk document p50 under 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import time

import numpy as np
import psycopg
from pgvector.psycopg import register_vector_async
from psycopg.rows import args_row
from sluice.v1 import collection_pb2, document_service_pb2_grpc, job_service_pb2_grpc
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice_common.channels import keyed_aio_channel
from sluice_ingest.main import IngestApp
from sluice_ingest.settings import IngestSettings
from sluice_ingest.store.chunks import COUNT_SQL, LIST_SQL, DocumentChunkRow
from sluice_ingest.tenants import bootstrap_keys

from .embedded import embedded_postgres, migrated_database

WORDS = [
    "the",
    "river",
    "mill",
    "keeper",
    "lamp",
    "harbour",
    "ledger",
    "season",
    "grain",
    "water",
    "wheel",
    "stone",
    "bridge",
    "tide",
    "north",
    "south",
    "market",
    "weaver",
    "copper",
    "lantern",
    "archive",
    "survey",
    "orchard",
    "timber",
    "channel",
    "beacon",
    "meadow",
    "quarry",
    "ferry",
    "signal",
    "granary",
    "valley",
    "workshop",
    "cistern",
    "pasture",
    "chapel",
    "foundry",
    "causeway",
    "almanac",
    "thresher",
    "cooper",
    "tannery",
]


def prose(rng: np.random.Generator, characters: int) -> str:
    """About `characters` characters of sentences of random words."""
    words: list[str] = []
    length = 0
    while length < characters:
        sentence = " ".join(rng.choice(WORDS, size=int(rng.integers(8, 18))))
        sentence = sentence[0].upper() + sentence[1:] + "."
        words.append(sentence)
        length += len(sentence) + 1
    return " ".join(words)[:characters]


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ms = np.asarray(seconds) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


async def ready_document(address: str, keys: dict[str, str], chunks: int, dimensions: int) -> str:
    rng = np.random.default_rng(7)
    async with keyed_aio_channel(address, keys["client"]) as client, keyed_aio_channel(address, keys["worker"]) as worker:
        docs = document_service_pb2_grpc.DocumentServiceStub(client)
        jobs = job_service_pb2_grpc.JobServiceStub(worker)
        await docs.CreateCollection(
            ds.CreateCollectionRequest(
                collection=collection_pb2.Collection(
                    name="bench",
                    embedder=collection_pb2.EmbedderConfig(
                        provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=dimensions
                    ),
                )
            )
        )
        texts = [prose(rng, int(rng.integers(900, 1100))) for _ in range(chunks)]
        content = "\n\n".join(texts).encode()

        async def upload():
            yield ds.UploadDocumentRequest(metadata=ds.UploadDocumentMetadata(collection="bench", filename="long.txt"))
            yield ds.UploadDocumentRequest(data=content)
            yield ds.UploadDocumentRequest(
                trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
            )

        document = await docs.UploadDocument(upload())
        claimed = await jobs.ClaimJob(js.ClaimJobRequest(worker_id="bench", wait_seconds=5))
        job = claimed.job
        for stage in (
            D.DOCUMENT_STATUS_PARSING,
            D.DOCUMENT_STATUS_CHUNKING,
            D.DOCUMENT_STATUS_EMBEDDING,
            D.DOCUMENT_STATUS_INDEXING,
        ):
            await jobs.ReportStage(js.ReportStageRequest(lease=job.lease, stage=stage))
        vectors = rng.standard_normal((chunks, dimensions)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

        async def complete():
            yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=chunks))
            for start in range(0, chunks, 100):
                batch = [
                    js.Chunk(
                        index=i,
                        text=texts[i],
                        page_number=1 + i // 3,
                        element_type="NarrativeText",
                        section_title=f"Section {i // 20}",
                        embedding=vectors[i].tolist(),
                    )
                    for i in range(start, min(start + 100, chunks))
                ]
                yield js.CompleteJobRequest(chunks=js.ChunkBatch(chunks=batch))

        response = await jobs.CompleteJob(complete())
        assert response.document.status == D.DOCUMENT_STATUS_READY
        return str(document.id)


async def measure(url: str, address: str, keys: dict[str, str], document_id: str, rounds: int) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {}
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await register_vector_async(conn)
    (generation_id, tenant_id) = await (
        await conn.execute(
            "SELECT g.id, d.tenant_id FROM documents d JOIN collection_generations g ON g.collection_id = d.collection_id"
            " AND g.state = 'ACTIVE' WHERE d.id = %s",
            (document_id,),
        )
    ).fetchone()  # type: ignore[misc]
    async with keyed_aio_channel(address, keys["client"]) as channel:
        docs = document_service_pb2_grpc.DocumentServiceStub(channel)
        tokens = [""]
        while True:
            page = await docs.ListChunks(ds.ListChunksRequest(document_id=document_id, page_size=100, page_token=tokens[-1]))
            if not page.next_page_token:
                break
            tokens.append(page.next_page_token)
        whole = await docs.ListChunks(ds.ListChunksRequest(document_id=document_id, page_size=1000))
        assert whole.total_size == len(whole.chunks) == min(1000, whole.total_size), (whole.total_size, len(whole.chunks))
        starts = [-1] + [c.chunk_index for c in whole.chunks[99::100]]

        async def sql(after: int, limit: int) -> None:
            params = {"document": document_id, "generation": generation_id, "tenant": tenant_id, "after": after}
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                cur = conn.cursor(row_factory=args_row(DocumentChunkRow))
                await cur.execute(LIST_SQL, {**params, "limit": limit + 1, "number": 1}, binary=True)
                await cur.fetchall()
                await (await conn.execute(COUNT_SQL, params)).fetchone()

        async def timed(label: str, call) -> None:
            started, cpu = time.perf_counter(), time.process_time()
            await call
            seconds.setdefault(label, []).append(time.perf_counter() - started)
            seconds.setdefault(label + " cpu", []).append(time.process_time() - cpu)

        for n in range(rounds):
            token = tokens[n % len(tokens)]
            await timed(
                "grpc 100", docs.ListChunks(ds.ListChunksRequest(document_id=document_id, page_size=100, page_token=token))
            )
            await timed("sql 100", sql(starts[n % len(tokens)], 100))
            await timed("grpc 1000", docs.ListChunks(ds.ListChunksRequest(document_id=document_id, page_size=1000)))
            await timed("sql 1000", sql(-1, 1000))
        chunk_id = whole.chunks[len(whole.chunks) // 2].id
        for n in range(max(rounds // 4, 10)):
            await timed("disable", docs.UpdateChunk(ds.UpdateChunkRequest(chunk_id=chunk_id, enabled=False)))
            await timed("enable", docs.UpdateChunk(ds.UpdateChunkRequest(chunk_id=chunk_id, enabled=True)))
            await timed(
                "edit", docs.UpdateChunk(ds.UpdateChunkRequest(chunk_id=chunk_id, text=f"edit {n}: " + whole.chunks[0].text))
            )
    await conn.close()
    return seconds


async def run(args: argparse.Namespace) -> None:
    with embedded_postgres() as admin:
        url = migrated_database(admin, "chunks_bench")
        keys = bootstrap_keys(url)
        app = IngestApp(
            IngestSettings(database_url=url, bind="127.0.0.1:0", log_json=False, log_level="WARNING", rate_limit_per_second=0)
        )
        await app.start()
        await app.serve()
        try:
            address = f"127.0.0.1:{app.port}"
            started = time.perf_counter()
            document_id = await ready_document(address, keys, args.chunks, args.dimensions)
            print(
                f"{args.chunks:,} chunks of ~1,000 characters (vectors of {args.dimensions}) committed through CompleteJob"
                f" in {time.perf_counter() - started:.1f} s; {args.rounds} rounds in turns, {os.cpu_count()} cores",
                flush=True,
            )
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute("VACUUM ANALYZE chunks, disabled_chunks")
            seconds = await measure(url, address, keys, document_id, args.rounds)
        finally:
            await app.stop(0)
    print()
    header = (
        f"{'ListChunks':<22} | {'gRPC p50':>9} {'gRPC p99':>9} | {'SQL p50':>8} {'SQL p99':>8} | {'gRPC/SQL p50':>12}"
        f" | {'CPU p50 gRPC':>12} {'SQL':>7}"
    )
    print(header)
    print("-" * len(header))
    for size in (100, 1000):
        g50, g99 = percentiles(seconds[f"grpc {size}"])
        s50, s99 = percentiles(seconds[f"sql {size}"])
        gc, _ = percentiles(seconds[f"grpc {size} cpu"])
        sc, _ = percentiles(seconds[f"sql {size} cpu"])
        label = f"page_size {size}" + (" (all)" if size >= args.chunks else "")
        print(
            f"{label:<22} | {g50:>7.2f}ms {g99:>7.2f}ms | {s50:>6.2f}ms {s99:>6.2f}ms | {g50 / s50:>11.1f}x"
            f" | {gc:>10.2f}ms {sc:>5.2f}ms"
        )
    print("CPU: this process's CPU time per call (ingest-api and the client share it; PostgreSQL's own is apart)")
    g50, _ = percentiles(seconds["grpc 1000"])
    print(f"bar: ListChunks of a {args.chunks:,}-chunk document p50 < 50 ms: {g50:.1f} ms, {'met' if g50 < 50 else 'NOT met'}")
    print()
    header = f"{'UpdateChunk':<22} | {'gRPC p50':>9} {'gRPC p99':>9}"
    print(header)
    print("-" * len(header))
    for label, name in (("disable (move out)", "disable"), ("enable (move back)", "enable"), ("edit (re-embed 1)", "edit")):
        p50, p99 = percentiles(seconds[name])
        print(f"{label:<22} | {p50:>7.2f}ms {p99:>7.2f}ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=1000, help="chunks of the document")
    parser.add_argument("--rounds", type=int, default=200, help="calls of each kind, in turns")
    parser.add_argument("--dimensions", type=int, default=384, help="the vectors' dimensions (the rows' width)")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
