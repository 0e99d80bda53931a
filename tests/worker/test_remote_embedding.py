"""The worker's embedding step with a remote embedder: the job's embedding calls overlap so
the provider's limit is reached (the embedder alone cannot fill it when the pipeline hands it
a few texts at a time), vectors stay in chunk order, progress only moves forward. Real HTTP
against the local OpenAI-compatible server; the rest of the pipeline on the unit-test fakes."""

from __future__ import annotations

import pytest
from sluice_common.embedders import EmbedderSettings, get_embedder, provider_limit
from sluice_worker.pipeline import JobPipeline
from sluice_worker.settings import WorkerSettings

from .openai_server import Injected
from .test_pipeline_unit import FakeParser, FakePort, FakeSession, make_job


class KeepingPort(FakePort):
    async def complete_job(self, lease, chunks, batch_size):
        self.completed = list(chunks)
        await super().complete_job(lease, chunks, batch_size)


@pytest.mark.parametrize(("embed_batch_size", "openai_batch_size"), [(2, 2), (1, 4), (6, 2)])
async def test_the_embedding_step_fills_the_provider_limit_in_order(openai_server, embed_batch_size, openai_batch_size):
    openai_server.always = Injected(200, delay=0.05)
    embedder = get_embedder(
        "openai",
        "test-embed",
        4,
        EmbedderSettings(
            openai_base_url=openai_server.base_url,
            openai_batch_size=openai_batch_size,
            openai_max_concurrency=4,
        ),
    )
    port = KeepingPort()
    settings = WorkerSettings(embed_batch_size=embed_batch_size, progress_interval_seconds=0, worker_concurrency=1)
    pipeline = JobPipeline(port, FakeParser(FakeSession(port, chunks=40)), settings, embedder_for=lambda _: embedder)
    result = await pipeline.run(make_job())
    assert result.outcome == "succeeded" and result.chunk_count == 40
    assert openai_server.max_in_flight == 4  # one call at a time would have kept 1-3 in flight
    assert provider_limit(openai_server.base_url, 4).in_flight == 0
    reference = await get_embedder("hashing", "fake", 4).embed_documents([f"chunk {i}" for i in range(40)])
    assert [c.embedding for c in port.completed] == [pytest.approx(v, abs=1e-6) for v in reference]
    progress = [c[2] for c in port.calls if c[0] == "stage" and c[1].name == "EMBEDDING"]
    assert progress == sorted(progress) and progress[-1] == 40


async def test_a_failing_call_stops_the_others(openai_server):
    openai_server.reject_containing = "chunk 13"
    embedder = get_embedder(
        "openai",
        "test-embed",
        4,
        EmbedderSettings(
            openai_base_url=openai_server.base_url,
            openai_batch_size=2,
            openai_max_concurrency=4,
        ),
    )
    port = KeepingPort()
    settings = WorkerSettings(embed_batch_size=2, progress_interval_seconds=0, worker_concurrency=1)
    pipeline = JobPipeline(port, FakeParser(FakeSession(port, chunks=40)), settings, embedder_for=lambda _: embedder)
    result = await pipeline.run(make_job())
    assert result.outcome == "failed" and port.calls[-1] == ("fail", False, "EMBEDDING_INPUT_REJECTED")
    assert provider_limit(openai_server.base_url, 4).in_flight == 0
    assert len(openai_server.requests) < 20  # the calls after the failure were never sent
