"""ExportCollection and ImportCollection figures (docs/bundles.md): a collection of `--chunks`
chunks of about 1,000 characters with 384-dimension vectors, exported to a bundle and imported
under another name by the use cases ingest-api runs (service/bundles.py), beside a raw binary
`COPY … TO` and `COPY … FROM` of the same chunk rows in the same process; then `--kills` imports in
child processes killed (SIGKILL) at random moments, each checked to have left nothing.

    .venv/bin/python -m bench bundle [--chunks 20000] [--kills 10]

The collection is synthesised by COPY as other benches do (bench/vector_scale_bench.py): READY
documents of 50 chunks with their originals, jobs and an HNSW index. Peak RSS is this process's
resident memory sampled every 10 ms during each phase."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from sluice_common import vector_index
from sluice_common.db import open_pool
from sluice_ingest.bundle_spool import spool_root, sweep_stale
from sluice_ingest.service.bundles import BundleUseCases, ImportOptions
from sluice_ingest.service.collections import CollectionUseCases
from sluice_ingest.settings import IngestSettings
from sluice_ingest.store import CollectionStore, GenerationStore
from sluice_ingest.store.bundles import BundleStore
from sluice_ingest.uploads import Trailer

from .embedded import embedded_postgres, migrated_database
from .vector_scale_bench import chunk_texts

DOC_CHUNKS = 50
DIMENSIONS = 384
TABLES = ["collections", "documents", "document_contents", "ingestion_jobs", "chunks", "keyword_chunks", "document_vectors"]
RAW_COLUMNS = (
    "document_id, tenant_id, collection_id, generation_id, chunk_index, text, page_number, element_type, section_title,"
    " text_as_html, embedding, search_terms, text_source, ocr_confidence, boxes, element_types"
)


class PeakRss:
    """The largest VmRSS of this process while the block runs."""

    def __enter__(self) -> PeakRss:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    self.peak = max(self.peak, int(line.split()[1]) * 1024)
            self._stop.wait(0.01)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def synthesise(url: str, chunks: int) -> tuple[int, int]:
    """The collection `bench`; (collection id, generation id)."""
    rng = np.random.default_rng(36)
    texts = chunk_texts(1000, rng)
    documents = (chunks + DOC_CHUNKS - 1) // DOC_CHUNKS
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        tenant = conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
        cid = conn.execute(
            "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions, chunk_max_characters,"
            " chunk_new_after_n_chars, chunk_overlap, max_attempts, vector_precision)"
            " VALUES (%s, 'bench', 'hashing', 'hashing-v1', %s, 1500, 1000, 0, 3, 'halfvec') RETURNING id",
            (tenant, DIMENSIONS),
        ).fetchone()[0]
        gid = conn.execute("SELECT id FROM collection_generations WHERE collection_id = %s", (cid,)).fetchone()[0]
        ids = [uuid.uuid4() for _ in range(documents)]
        with conn.transaction():
            with conn.cursor().copy(
                "COPY documents (id, tenant_id, collection_id, filename, mime_type, status, content_sha256, size_bytes,"
                " chunk_count) FROM STDIN"
            ) as copy:
                for d, doc in enumerate(ids):
                    content = (f"document {d}\n" + texts[d % len(texts)]).encode()
                    n = min(DOC_CHUNKS, chunks - d * DOC_CHUNKS)
                    copy.write_row(
                        (
                            doc,
                            tenant,
                            cid,
                            f"doc-{d}.txt",
                            "text/plain",
                            "READY",
                            hashlib.sha256(content).hexdigest(),
                            len(content),
                            n,
                        )
                    )
            with conn.cursor().copy("COPY document_contents (document_id, content) FROM STDIN") as copy:
                for d, doc in enumerate(ids):
                    copy.write_row((doc, (f"document {d}\n" + texts[d % len(texts)]).encode()))
            conn.execute(
                "INSERT INTO ingestion_jobs (document_id, max_attempts, status) SELECT id, 3, 'SUCCEEDED' FROM documents"
                " WHERE collection_id = %s",
                (cid,),
            )
            vectors = rng.standard_normal((chunks, DIMENSIONS)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            with conn.cursor().copy(f"COPY chunks ({RAW_COLUMNS}) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(
                    [
                        "uuid",
                        "int8",
                        "int8",
                        "int8",
                        "int4",
                        "text",
                        "int4",
                        "text",
                        "text",
                        "text",
                        "vector",
                        "text",
                        "text",
                        "float4",
                        "jsonb",
                        "text[]",
                    ]
                )
                for row in range(chunks):
                    text = texts[row % len(texts)]
                    copy.write_row(
                        (ids[row // DOC_CHUNKS], tenant, cid, gid, row % DOC_CHUNKS, text, 1, "NarrativeText", "", "",
                         vectors[row], text, "", None, psycopg.types.json.Jsonb([]), ["NarrativeText"])
                    )  # fmt: skip
            for setting in vector_index.build_settings_sql():
                conn.execute(setting)
            conn.execute(vector_index.create_index_sql(gid, DIMENSIONS, precision="halfvec"))
        conn.execute("VACUUM ANALYZE chunks, documents")
    return cid, gid


async def bundles(url: str, spool: Path):
    settings = IngestSettings(database_url=url, upload_spool_dir=str(spool))
    pool = await open_pool(url, max_size=4, name="bundle-bench")
    collections = CollectionUseCases(CollectionStore(pool), GenerationStore(pool), settings)
    return BundleUseCases(BundleStore(pool), collections, settings), pool


async def export_to(url: str, spool: Path, path: Path) -> None:
    uc, pool = await bundles(url, spool)
    try:
        _, pieces = await uc.export_collection(tenant_of(url), "bench")
        with path.open("wb") as out:
            async for piece in pieces:
                if isinstance(piece, bytes):
                    out.write(piece)
    finally:
        await pool.close()


async def import_from(url: str, spool: Path, path: Path, name: str) -> None:
    uc, pool = await bundles(url, spool)

    async def data():
        digest, size = hashlib.sha256(), 0
        with path.open("rb") as f:
            while piece := f.read(1024 * 1024):
                digest.update(piece)
                size += len(piece)
                yield piece
        yield Trailer(size, digest.hexdigest())

    try:
        await uc.import_collection(tenant_of(url), ImportOptions(name=name), data())
    finally:
        await pool.close()


def tenant_of(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0])


def raw_copy_to(url: str, gid: int, path: Path) -> None:
    with (
        psycopg.connect(url) as conn,
        path.open("wb") as out,
        conn.cursor().copy(
            f"COPY (SELECT {RAW_COLUMNS} FROM chunks WHERE generation_id = {gid}) TO STDOUT (FORMAT BINARY)"
        ) as copy,
    ):
        for data in copy:
            out.write(data)


def raw_copy_from(url: str, path: Path) -> float:
    """The same rows into a fresh collection's generation (same triggers); seconds of the COPY."""
    elapsed = 0.0
    with psycopg.connect(url) as conn, conn.transaction():
        tenant = conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
        cid = conn.execute(
            "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions, chunk_max_characters,"
            " chunk_new_after_n_chars, chunk_overlap, max_attempts) VALUES (%s, 'raw', 'hashing', 'hashing-v1', %s, 1500,"
            " 1000, 0, 3) RETURNING id",
            (tenant, DIMENSIONS),
        ).fetchone()[0]
        gid = conn.execute("SELECT id FROM collection_generations WHERE collection_id = %s", (cid,)).fetchone()[0]
        # The rows name the exported collection's ids: COPY into a temporary table, then into chunks.
        conn.execute(f"CREATE TEMP TABLE raw ON COMMIT DROP AS SELECT {RAW_COLUMNS} FROM chunks WITH NO DATA")
        started = time.perf_counter()
        with conn.cursor().copy(f"COPY raw ({RAW_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy, path.open("rb") as f:
            while data := f.read(1024 * 1024):
                copy.write(data)
        conn.execute(
            f"INSERT INTO chunks ({RAW_COLUMNS}) SELECT document_id, tenant_id, %s, %s, chunk_index, text, page_number,"
            " element_type, section_title, text_as_html, embedding, search_terms, text_source, ocr_confidence, boxes,"
            " element_types FROM raw",
            (cid, gid),
        )
        elapsed = time.perf_counter() - started
        raise psycopg.Rollback()  # the baseline's rows go: they were only measured
    return elapsed


def counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def child_import(url: str, spool: str, bundle: str, name: str) -> None:
    asyncio.run(import_from(url, Path(spool), Path(bundle), name))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--child", nargs=4, metavar=("URL", "SPOOL", "BUNDLE", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    if args.child:
        child_import(*args.child)
        return
    work = Path(tempfile.mkdtemp(prefix="sluice-bundle-bench-"))
    spool = work / "spool"
    spool.mkdir()
    with embedded_postgres() as admin:
        url = migrated_database(admin, "bundles")
        started = time.perf_counter()
        _cid, gid = synthesise(url, args.chunks)
        print(
            f"synthesised {args.chunks:,} chunks x {DIMENSIONS} (~1,000 characters each) in {time.perf_counter() - started:.1f} s"
        )
        bundle, raw = work / "bench.bundle", work / "raw.copy"
        rows = {}
        for label in ("export", "import"):
            # Baseline first, then the bundle path, each timed alone.
            if label == "export":
                t = time.perf_counter()
                raw_copy_to(url, gid, raw)
                base = time.perf_counter() - t
                with PeakRss() as rss:
                    t = time.perf_counter()
                    asyncio.run(export_to(url, spool, bundle))
                    took = time.perf_counter() - t
            else:
                base = raw_copy_from(url, raw)
                with PeakRss() as rss:
                    t = time.perf_counter()
                    asyncio.run(import_from(url, spool, bundle, "bench-copy"))
                    took = time.perf_counter() - t
            rows[label] = (args.chunks / took, args.chunks / base, rss.peak, took, base)
        print(f"\nbundle: {bundle.stat().st_size / 1e6:.1f} MB; raw COPY of the chunk rows: {raw.stat().st_size / 1e6:.1f} MB")
        print(f"{'':8} {'chunks/s':>10} {'COPY baseline':>14} {'seconds':>8} {'baseline s':>10} {'peak RSS':>9}")
        for label, (rate, base_rate, peak, took, base) in rows.items():
            print(f"{label:8} {rate:10,.0f} {base_rate:14,.0f} {took:8.2f} {base:10.2f} {peak / 2**20:7.0f} MB")
        print("(import: the whole use case, spool, checks, one transaction with the triggers and the HNSW build;"
              " the baseline is the raw COPY of the chunk rows through the same triggers, without an index)")  # fmt: skip

        before = counts(url)
        import_seconds = rows["import"][3]
        rng = random.Random(36)
        left = 0
        for k in range(args.kills):
            at = rng.uniform(0.05, import_seconds * 1.1)
            child = subprocess.Popen(
                [sys.executable, "-m", "bench.bundle_bench", "--child", url, str(spool), str(bundle), f"killed-{k}"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(at)
            finished = child.poll() is not None
            child.send_signal(signal.SIGKILL)
            child.wait()
            time.sleep(0.5)  # PostgreSQL ends the dead client's transaction
            now = counts(url)
            if finished and now != before:  # it committed before the kill: whole, then dropped
                with psycopg.connect(url, autocommit=True) as conn:
                    n = conn.execute(
                        "SELECT count(*) FROM documents d JOIN collections c ON c.id = d.collection_id WHERE c.name = %s",
                        (f"killed-{k}",),
                    ).fetchone()[0]
                    assert n == before["documents"] // 2, "a committed import is whole"
                    conn.execute("DELETE FROM collections WHERE name = %s", (f"killed-{k}",))
                state = "committed whole before the kill"
            else:
                state = (
                    "nothing left"
                    if now == before
                    else f"LEFT {dict((t, now[t] - before[t]) for t in now if now[t] != before[t])}"
                )
                left += now != before
            print(f"kill {k + 1:2}: SIGKILL at {at:5.2f} s: {state}")
        folders = spool_root("", str(spool))
        stale = [p.name for p in folders.iterdir()] if folders.is_dir() else []
        swept = sweep_stale(folders, older_than_seconds=0.0)
        print(
            f"\n{args.kills} kills, {left} left rows behind; work folders the killed imports left: {len(stale)},"
            f" removed by the start-up sweep: {len(swept)}"
        )


if __name__ == "__main__":
    main()
