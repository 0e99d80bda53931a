"""The three embedders: hashing (deterministic), the local model, and an OpenAI-compatible
API tested over real HTTP against a local server with injected failures."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from sluice_common.embedders import EmbedderSettings, EmbeddingError, get_embedder, hashing_features, provider_name

from .openai_server import Injected


def cosine(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


async def test_hashing_is_normalised_and_deterministic_across_processes():
    embedder = get_embedder("hashing", "hashing-v1", 128)
    texts = ["Sluice turns documents into chunks.", "文档检索系统", ""]
    vectors = await embedder.embed_documents(texts)
    assert all(len(v) == 128 for v in vectors)
    assert all(abs(np.linalg.norm(v) - 1.0) < 1e-9 for v in vectors)
    code = (
        "import asyncio, json; from sluice_common.embedders import get_embedder;"
        "e = get_embedder('hashing', 'hashing-v1', 128);"
        f"print(json.dumps(asyncio.run(e.embed_documents({texts!r}))))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "7"})
    import json

    assert json.loads(other.stdout) == vectors
    assert await embedder.embed_query(texts[0]) == vectors[0]


async def test_hashing_similarity_works_for_chinese_and_english():
    embedder = get_embedder("hashing", "hashing-v1", 512)
    query = await embedder.embed_query("向量数据库")
    related, unrelated = await embedder.embed_documents(["语义检索需要向量数据库的支持", "今天天气很好，我们去公园散步"])  # noqa: RUF001 - CJK punctuation, meant
    assert cosine(query, related) > cosine(query, unrelated) + 0.2
    query = await embedder.embed_query("password security")
    related, unrelated = await embedder.embed_documents(["Never share your password with anyone", "Vacation days per year"])
    assert cosine(query, related) > cosine(query, unrelated) + 0.2
    assert "向量" in hashing_features("向量数据库") and "数" in hashing_features("向量数据库")


def test_provider_names_match_the_collection_enum():
    from sluice.v1 import collection_pb2

    assert provider_name(collection_pb2.EMBEDDER_PROVIDER_HASHING) == "hashing"
    assert provider_name(collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS) == "sentence_transformers"
    assert provider_name(collection_pb2.EMBEDDER_PROVIDER_OPENAI) == "openai"
    with pytest.raises(ValueError):
        provider_name(collection_pb2.EMBEDDER_PROVIDER_UNSPECIFIED)


async def test_local_model_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = get_embedder("sentence_transformers", "all-MiniLM-L6-v2", 384)
    cat, kitten, stocks = await embedder.embed_documents(
        ["a cat sits on the mat", "a kitten rests on a rug", "stock markets fell sharply"]
    )
    assert len(cat) == 384
    assert abs(np.linalg.norm(cat) - 1.0) < 1e-3
    assert cosine(cat, kitten) > cosine(cat, stocks) + 0.3
    wrong = get_embedder("sentence_transformers", "all-MiniLM-L6-v2", 768)
    with pytest.raises(EmbeddingError) as caught:
        await wrong.embed_query("x")
    assert caught.value.code == "EMBEDDER_DIMENSION_MISMATCH" and not caught.value.retryable


async def test_a_search_query_is_embedded_on_query_threads_and_chunks_on_every_core(monkeypatch):
    """torch's thread count as the model's forward pass sees it: `query_threads` (1) for a query,
    torch's default for a batch of chunks, and the executor thread's count restored after
    (a collection on torch: SLUICE_LOCAL_EMBEDDER_BACKEND=torch, SLUICE_QUERY_BACKEND=torch)."""
    import torch
    from sluice_common.embedders.local import SentenceTransformerEmbedder, load_sentence_transformer, resolve_model_dir

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    default = torch.get_num_threads()
    settings = EmbedderSettings(query_threads=1, query_backend="torch", local_embedder_backend="torch")
    model = load_sentence_transformer(resolve_model_dir("all-MiniLM-L6-v2", settings))
    seen: list[int] = []
    transformer = model[0].auto_model
    real_forward = transformer.forward

    def counting_forward(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(transformer, "forward", counting_forward)
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", 384, settings)
    query = await embedder.embed_query("how do leases expire")
    chunks = await embedder.embed_documents(["a cat sits on the mat", "how do leases expire"])
    assert seen == [1, default]
    assert cosine(query, chunks[1]) > 0.999  # the same vector whatever the threads
    with ThreadPoolExecutor(1) as pool:  # the one thread embeds a query, then counts its threads
        pool.submit(embedder._encode, ["x"], query=True).result()
        assert pool.submit(torch.get_num_threads).result() == default
    if default > 1:
        seen.clear()
        await SentenceTransformerEmbedder(
            "all-MiniLM-L6-v2", 384, EmbedderSettings(query_threads=0, query_backend="torch", local_embedder_backend="torch")
        ).embed_query("x")
        assert seen == [default]  # 0: torch's default


def openai_settings(server, **overrides) -> EmbedderSettings:
    values = {
        "openai_base_url": server.base_url,
        "openai_api_key": "test-key",
        "openai_batch_size": 4,
        "openai_max_retries": 2,
        "openai_retry_base_seconds": 0.01,
        "openai_timeout_seconds": 5.0,
        **overrides,
    }
    return EmbedderSettings(**values)


async def test_openai_batches_and_keeps_order(openai_server):
    embedder = get_embedder("openai", "test-embed", 32, openai_settings(openai_server))
    texts = [f"text number {i}" for i in range(10)]
    vectors = await embedder.embed_documents(texts)
    # The batches go out concurrently: any order of arrival, results in the texts' order.
    assert sorted(len(r.inputs) for r in openai_server.requests) == [2, 4, 4]
    assert all(r.dimensions == 32 for r in openai_server.requests)
    reference = get_embedder("hashing", "fake", 32)
    assert vectors == [pytest.approx(v, abs=1e-6) for v in await reference.embed_documents(texts)]


async def test_openai_429_honours_retry_after(openai_server):
    openai_server.script = [Injected(429, {"retry-after": "0.4"}, "slow down")]
    embedder = get_embedder("openai", "test-embed", 16, openai_settings(openai_server))
    vectors = await embedder.embed_documents(["one", "two"])
    assert len(vectors) == 2
    first, second = openai_server.requests
    assert (first.status, second.status) == (429, 200)
    assert second.time - first.time >= 0.35  # waited as told, not the 0.01 s default backoff


async def test_openai_retry_after_beyond_the_bound_is_left_to_the_job_retry(openai_server):
    openai_server.script = [Injected(429, {"retry-after": "120"}, "come back later")]
    embedder = get_embedder("openai", "test-embed", 16, openai_settings(openai_server, embed_retry_after_max_seconds=5))
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed_documents(["one"])
    assert caught.value.code == "EMBEDDING_RATE_LIMITED" and caught.value.retryable
    assert caught.value.retry_after == 120
    assert len(openai_server.requests) == 1


async def test_openai_5xx_is_retried_then_reported_retryable(openai_server):
    openai_server.script = [Injected(500), Injected(503)]
    embedder = get_embedder("openai", "test-embed", 16, openai_settings(openai_server))
    assert len(await embedder.embed_documents(["one"])) == 1
    openai_server.always = Injected(502, {}, "bad gateway")
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed_documents(["two"])
    assert caught.value.retryable and caught.value.code == "EMBEDDING_PROVIDER_ERROR"
    assert "502" in caught.value.message
    assert len(openai_server.requests) == 3 + 3  # 2 failures + 1 success, then 1 + 2 retries


async def test_openai_400_is_permanent_and_not_retried(openai_server):
    openai_server.reject_containing = "forbidden"
    embedder = get_embedder("openai", "test-embed", 16, openai_settings(openai_server))
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed_documents(["fine", "forbidden words"])
    assert not caught.value.retryable
    assert caught.value.code == "EMBEDDING_INPUT_REJECTED"
    assert "content policy" in caught.value.message
    assert len(openai_server.requests) == 1


async def test_openai_413_splits_the_batch(openai_server):
    openai_server.script = [Injected(413, {}, "too many inputs")]
    embedder = get_embedder("openai", "test-embed", 16, openai_settings(openai_server))
    assert len(await embedder.embed_documents(["a", "b", "c", "d"])) == 4
    assert [len(r.inputs) for r in openai_server.requests] == [4, 2, 2]


async def test_openai_timeout_and_unreachable_are_retryable(openai_server):
    openai_server.always = Injected(200, delay=1.5)  # answers too late
    embedder = get_embedder(
        "openai", "test-embed", 16, openai_settings(openai_server, openai_timeout_seconds=0.3, openai_max_retries=0)
    )
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed_query("slow")
    assert caught.value.retryable and caught.value.code == "EMBEDDING_TIMEOUT"

    closed = EmbedderSettings(openai_base_url="http://127.0.0.1:9/v1", openai_max_retries=0, openai_timeout_seconds=2)
    with pytest.raises(EmbeddingError) as caught:
        await get_embedder("openai", "test-embed", 16, closed).embed_query("anyone?")
    assert caught.value.retryable and caught.value.code == "EMBEDDING_UNAVAILABLE"


async def test_openai_wrong_dimensions_is_permanent(openai_server):
    embedder = get_embedder("openai", "test-embed", 16, openai_settings(openai_server, openai_send_dimensions=False))
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed_query("x")
    assert caught.value.code == "EMBEDDER_DIMENSION_MISMATCH" and not caught.value.retryable


async def test_openai_batches_are_sent_concurrently_within_the_limit_and_kept_in_order(openai_server):
    openai_server.always = Injected(200, delay=0.2)  # slow, not failing
    settings = openai_settings(openai_server, openai_batch_size=1, openai_max_concurrency=3)
    embedder = get_embedder("openai", "test-embed", 16, settings)
    texts = [f"text number {i}" for i in range(9)]
    vectors = await embedder.embed_documents(texts)
    assert openai_server.max_in_flight == 3  # more than one at a time, never past the limit
    reference = await get_embedder("hashing", "fake", 16).embed_documents(texts)
    assert vectors == [pytest.approx(v, abs=1e-6) for v in reference]


def test_aimd_limit_halves_on_429_and_grows_by_one_per_window():
    from sluice_common.embedders import AimdLimit

    limit = AimdLimit(8)
    assert limit.limit == 8
    halves = []
    for _ in range(4):
        limit.in_flight += 1
        limit.release(rate_limited=True)
        halves.append(limit.limit)
    assert halves == [4, 2, 1, 1]
    grown = []
    for _ in range(3):
        limit.in_flight += 1
        limit.release(rate_limited=False)
        grown.append(int(limit.limit))
    assert grown == [2, 2, 2]  # +1/limit per success: 1 → 2 → 2.5 → 2.9
    limit.in_flight += 1
    limit.release(rate_limited=False)
    assert int(limit.limit) == 3
    for _ in range(100):
        limit.in_flight += 1
        limit.release(rate_limited=False)
    assert limit.limit == 8  # never past the maximum


def test_one_limit_per_provider_shared_by_its_embedders(openai_server):
    from sluice_common.embedders import provider_limit

    a = provider_limit(openai_server.base_url, 5)
    assert provider_limit(openai_server.base_url, 5) is a
    assert provider_limit(openai_server.base_url + "/other", 5) is not a


async def test_openai_429_lowers_the_limit_then_succeeds(openai_server):
    from sluice_common.embedders import provider_limit

    openai_server.script = [Injected(429, {"retry-after": "0"}, "slow down")]
    settings = openai_settings(openai_server, openai_max_concurrency=8)
    embedder = get_embedder("openai", "test-embed", 16, settings)
    assert len(await embedder.embed_documents(["one", "two"])) == 2
    assert provider_limit(openai_server.base_url, 8).limit < 8


# --------------------------------------------------------------------------- concurrency and AIMD
# All over real HTTP against the local server; nothing below asserts on elapsed time.


async def test_openai_order_kept_when_batches_finish_out_of_order(openai_server):
    # The first request to arrive is the slowest, so batches finish in another order than
    # they were sent; the server also lists each answer's vectors last index first.
    openai_server.script = [Injected(200, delay=0.3)]
    openai_server.reverse_data = True
    settings = openai_settings(openai_server, openai_batch_size=3, openai_max_concurrency=4)
    texts = [f"passage {i} about locks and weirs" for i in range(20)]
    vectors = await get_embedder("openai", "test-embed", 16, settings).embed_documents(texts)
    reference = await get_embedder("hashing", "fake", 16).embed_documents(texts)
    assert vectors == [pytest.approx(v, abs=1e-6) for v in reference]
    assert len(openai_server.requests) == 7


async def test_openai_float_answers_are_accepted_too(openai_server):
    openai_server.ignore_encoding_format = True  # JSON floats although base64 was asked for
    texts = ["one", "two", "three"]
    vectors = await get_embedder("openai", "test-embed", 16, openai_settings(openai_server)).embed_documents(texts)
    assert vectors == [pytest.approx(v, abs=1e-6) for v in await get_embedder("hashing", "fake", 16).embed_documents(texts)]


async def test_openai_slots_share_one_limit_and_one_client(openai_server):
    # Two jobs of one worker (two collections, two models) on the same provider: together
    # they never have more requests in flight than the provider's limit, and they reach it.
    import asyncio

    from sluice_common.embedders import provider_limit

    openai_server.always = Injected(200, delay=0.1)
    a = get_embedder("openai", "model-a", 16, openai_settings(openai_server, openai_batch_size=1, openai_max_concurrency=3))
    b = get_embedder("openai", "model-b", 16, openai_settings(openai_server, openai_batch_size=1, openai_max_concurrency=3))
    assert a is not b and a.client is b.client  # one connection pool per provider
    texts = [f"text {i}" for i in range(8)]
    first, second = await asyncio.gather(a.embed_documents(texts), b.embed_documents(texts))
    assert first == second and len(first) == 8
    assert openai_server.max_in_flight == 3
    limit = provider_limit(openai_server.base_url, 3)
    assert limit.peak_in_flight == 3 and limit.in_flight == 0


def test_openai_limit_holds_across_event_loops_in_threads(openai_server):
    # Embedders used from two threads, each with its own event loop: one limit still holds
    # (a freed slot is handed to a waiter of the other loop through call_soon_threadsafe).
    import asyncio
    import threading

    from sluice_common.embedders import provider_limit

    openai_server.always = Injected(200, delay=0.1)
    settings = openai_settings(openai_server, openai_batch_size=1, openai_max_concurrency=2)
    results: list[int] = []
    clients: list[int] = []

    def run(model: str) -> None:
        async def embed() -> int:
            embedder = get_embedder("openai", model, 16, settings)
            clients.append(id(embedder.client))
            return len(await embedder.embed_documents([f"text {i}" for i in range(6)]))

        results.append(asyncio.run(embed()))

    threads = [threading.Thread(target=run, args=(f"model-{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == [6, 6]
    assert openai_server.max_in_flight == 2
    assert provider_limit(openai_server.base_url, 2).in_flight == 0
    assert len(set(clients)) == 2  # a connection belongs to its loop: one client per loop


async def test_openai_429_halves_the_limit_and_successes_bring_it_back(openai_server):
    from sluice_common.embedders import provider_limit

    settings = openai_settings(openai_server, openai_batch_size=1, openai_max_concurrency=8)
    embedder = get_embedder("openai", "test-embed", 16, settings)
    limit = provider_limit(openai_server.base_url, 8)
    openai_server.script = [Injected(429, {"retry-after": "0"}, "slow down")]
    await embedder.embed_query("one")  # 429 (8 → 4), then retried: one success (4 → 4.25)
    assert [r.status for r in openai_server.requests] == [429, 200]
    assert limit.limit == pytest.approx(4.25)
    # Additive increase: one more slot per limit's worth of successes, up to the maximum.
    await embedder.embed_documents([f"text {i}" for i in range(4)])
    assert int(limit.limit) == 5
    await embedder.embed_documents([f"text {i}" for i in range(40)])
    assert limit.limit == 8
    assert limit.in_flight == 0


async def test_openai_rejected_batch_fails_the_document_once_and_frees_the_slots(openai_server):
    from sluice_common.embedders import provider_limit

    openai_server.reject_containing = "forbidden"
    settings = openai_settings(openai_server, openai_batch_size=2, openai_max_concurrency=2)
    texts = [f"text {i}" for i in range(10)]
    texts[5] = "forbidden words"
    with pytest.raises(EmbeddingError) as caught:
        await get_embedder("openai", "test-embed", 16, settings).embed_documents(texts)
    assert caught.value.code == "EMBEDDING_INPUT_REJECTED" and not caught.value.retryable
    assert sum(1 for r in openai_server.requests if r.status == 400) == 1  # permanent: never sent again
    limit = provider_limit(openai_server.base_url, 2)
    assert limit.in_flight == 0 and limit.limit == 2  # a rejection is not a rate limit


async def test_openai_cancelled_document_leaves_no_slot_taken(openai_server):
    import asyncio

    from sluice_common.embedders import provider_limit

    openai_server.always = Injected(200, delay=0.3)
    settings = openai_settings(openai_server, openai_batch_size=1, openai_max_concurrency=2)
    embedder = get_embedder("openai", "test-embed", 16, settings)
    task = asyncio.ensure_future(embedder.embed_documents([f"text {i}" for i in range(6)]))
    for _ in range(1000):  # until two are sent and four queued for a slot
        if openai_server.in_flight == 2:
            break
        await asyncio.sleep(0.01)
    assert openai_server.in_flight == 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    limit = provider_limit(openai_server.base_url, 2)
    assert limit.in_flight == 0
    openai_server.always = None
    assert len(await embedder.embed_documents(["after", "the", "cancel"])) == 3
    assert limit.in_flight == 0


async def test_openai_limit_hands_a_slot_granted_to_a_cancelled_waiter_on():
    # The hand-off race on its own: a waiter is granted a slot and cancelled before it runs;
    # the slot must go to the next waiter, not be lost.
    import asyncio

    from sluice_common.embedders import AimdLimit

    limit = AimdLimit(1)
    await limit.acquire()
    first = asyncio.ensure_future(limit.acquire())
    second = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0)  # both queued
    limit.release(rate_limited=False)  # the slot is handed to `first`...
    first.cancel()  # ...which is cancelled before it runs
    await asyncio.gather(first, return_exceptions=True)
    await asyncio.wait_for(second, 5)  # `second` got it
    assert limit.in_flight == 1
    limit.release(rate_limited=False)
    assert limit.in_flight == 0
