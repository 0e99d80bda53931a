"""Sources: a first sync of a FILES-file folder against a second sync of it unchanged
(docs/sources.md; issue 20's target: the second at most 5 % of the first).

The real ingest-api (SourceService, in this process's event loop) on an embedded PostgreSQL and
the real runner (sources/runner.py) over its own pool, as `sluice-sources` runs it. No worker:
the documents stay PENDING, so the first sync measures listing, reading, hashing and uploading
(one UploadDocument use case a file), and the second listing, comparing and the checkpoints.
Then one file is edited and one removed, and a third sync uploads one and deletes one.
Each case is the wall time of one run, from its claim to its end; --repeat runs the pair again
on fresh folders and collections and prints the medians and the ratio of each pair.

    nice -n 19 .venv/bin/python -m bench.sync_bench [--files 10000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from sluice.v1 import collection_pb2, document_service_pb2_grpc, source_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import source_service_pb2 as src
from sluice_common.channels import key_for_role, keyed_aio_channel
from sluice_common.db import open_pool
from sluice_ingest.main import IngestApp
from sluice_ingest.service.documents import DocumentUseCases
from sluice_ingest.settings import IngestSettings
from sluice_ingest.sources.runner import Runner
from sluice_ingest.sources.store import RunStore
from sluice_ingest.store import CollectionStore, DocumentStore
from sluice_ingest.tenants import bootstrap_keys

from bench.embedded import embedded_postgres, migrated_database


def make_folder(root: Path, files: int) -> Path:
    folder = root / "corpus"
    for i in range(files):
        sub = folder / f"part{i // 500:03}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"doc{i:05}.md").write_text(f"# Document {i}\n\nThe text of document number {i} of the corpus.\n")
    return folder


async def timed_run(runner: Runner, sources, name: str) -> tuple[float, src.SourceRun]:
    await sources.SyncSource(src.SyncSourceRequest(name=name))
    start = time.perf_counter()
    assert await runner.run_once(), "no run was claimed"
    elapsed = time.perf_counter() - start
    return elapsed, (await sources.GetSource(src.GetSourceRequest(name=name))).last_run


async def pair(url: str, keys: dict[str, str], root: Path, files: int, n: int) -> tuple[float, float, float]:
    settings = IngestSettings(
        database_url=url, bind="127.0.0.1:0", log_level="WARNING", source_local_roots=str(root), rate_limit_per_second=0.0
    )
    app = IngestApp(settings)
    await app.start()
    await app.serve()
    pool = await open_pool(url, max_size=8, name="bench-sources")
    try:
        channel = keyed_aio_channel(f"127.0.0.1:{app.port}", key_for_role(keys))
        docs = document_service_pb2_grpc.DocumentServiceStub(channel)
        sources = source_service_pb2_grpc.SourceServiceStub(channel)
        collection = f"bench{n}"
        await docs.CreateCollection(
            ds.CreateCollectionRequest(
                collection=collection_pb2.Collection(
                    name=collection,
                    embedder=collection_pb2.EmbedderConfig(
                        provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=8
                    ),
                )
            )
        )
        folder = make_folder(root / f"run{n}", files)
        source = await sources.CreateSource(
            src.CreateSourceRequest(
                source=src.Source(collection=collection, local_folder=src.LocalFolderSource(path=str(folder)))
            )
        )
        runner = Runner(
            settings,
            RunStore(pool, settings.source_lease_seconds),
            DocumentUseCases(DocumentStore(pool), CollectionStore(pool), settings),
        )
        first, r1 = await timed_run(runner, sources, source.name)
        second, r2 = await timed_run(runner, sources, source.name)
        (folder / "part000" / "doc00000.md").write_text("# Document 0\n\nEdited.\n")
        (folder / "part000" / "doc00001.md").unlink()
        third, r3 = await timed_run(runner, sources, source.name)
        for label, run in (("first", r1), ("second", r2), ("third", r3)):
            print(
                f"  {label:<7} {run.listed:>6} listed {run.uploaded:>6} uploaded {run.unchanged:>6} unchanged"
                f" {run.deleted:>3} deleted  state {src.SourceRunState.Name(run.state)}"
            )
        assert r2.uploaded == 0 and r3.uploaded == 1 and r3.deleted == 1
        await channel.close()
        return first, second, third
    finally:
        await pool.close()
        await app.stop(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    results = []
    with embedded_postgres("sluice-bench-") as admin, tempfile.TemporaryDirectory(prefix="sluice-sync-bench-") as tmp:
        url = migrated_database(admin, "bench")
        keys = bootstrap_keys(url)
        for n in range(args.repeat):
            print(f"pair {n + 1}/{args.repeat}: {args.files} files")
            results.append(asyncio.run(pair(url, keys, Path(tmp), args.files, n)))
    print(f"\nsync of a {args.files}-file folder (median of {len(results)}):")
    first, second, third = (statistics.median(r[i] for r in results) for i in range(3))
    ratios = [r[1] / r[0] for r in results]
    print(f"  first sync (everything uploaded)       {first:8.2f} s  {args.files / first:7.0f} files/s")
    print(f"  second sync (unchanged)                {second:8.2f} s  {args.files / second:7.0f} files/s")
    print(f"  third sync (1 edited, 1 removed)       {third:8.2f} s")
    print(
        f"  second / first: {statistics.median(ratios):.1%} (each pair: {', '.join(f'{r:.1%}' for r in ratios)};"
        " target at most 5 %)"
    )


if __name__ == "__main__":
    main()
