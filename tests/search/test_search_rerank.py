"""Reranking over gRPC against a real PostgreSQL and a real local rerank server (Cohere, Jina and
TEI APIs), and a local cross-encoder built by the test: the order, the scores, the time budget,
failures answered in first-stage order, keys by reference only, the collection's default and the
request's override."""

from __future__ import annotations

import grpc
import pytest
from psycopg.types.json import Jsonb
from rerank_server import LocalRerankServer, score
from sluice.v1 import collection_pb2 as C
from sluice.v1 import search_service_pb2 as pb
from sluice_common.embedders import get_embedder
from sluice_common.errors import error_info

DIM = 64
VECTOR, KEYWORD, HYBRID = pb.SEARCH_MODE_VECTOR, pb.SEARCH_MODE_KEYWORD, pb.SEARCH_MODE_HYBRID
QUERY = "lighthouse keeper lamp"
KEY = "sk-test-7f3a9c-do-not-leak"
TEXTS = [
    "Lighthouse, lighthouse, lighthouse: the lighthouse of the lighthouse coast.",
    "The keeper lit the lamp at the lighthouse every night.",
    "A lamp.",
    "The keeper and his lamp.",
    "Rivers and mills, nothing else.",
    "The lighthouse keeper.",
]


def embed(texts):
    embedder = get_embedder("hashing", "hashing-v1", DIM)
    return [embedder.embed_one(t) for t in texts]


@pytest.fixture
def server():
    server = LocalRerankServer()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def rerank_env(monkeypatch, server, tmp_path):
    monkeypatch.setenv("SLUICE_RERANK_ALLOWED_URLS", f"{server.url}/")
    monkeypatch.setenv("SLUICE_RERANK_TEST_KEY", KEY)
    monkeypatch.setenv("SLUICE_RERANK_MODEL_DIR", str(tmp_path / "models"))


@pytest.fixture
def coast(seed):
    cid = seed.collection("coast", DIM)
    for i, text in enumerate(TEXTS):
        doc = seed.document(cid, f"doc-{i}.txt")
        seed.chunks(cid, doc, [text], embed([text]))
    return cid


def tei(server, **kwargs) -> C.RerankerConfig:
    return C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI, base_url=server.url, **kwargs)


async def search(stub, **kwargs):
    kwargs.setdefault("collection", "coast")
    kwargs.setdefault("query", QUERY)
    kwargs.setdefault("mode", KEYWORD)
    kwargs.setdefault("top_k", 10)
    return await stub.Search(pb.SearchRequest(**kwargs))


def reranked_order(first_stage_hits):
    """The server's order: by its score, ties in first-stage order."""
    return [h.text for h in sorted(first_stage_hits, key=lambda h: -score(QUERY, h.text))]


@pytest.mark.parametrize(
    "provider, path",
    [(C.RERANKER_PROVIDER_TEI, "/rerank"), (C.RERANKER_PROVIDER_COHERE, "/v2/rerank"), (C.RERANKER_PROVIDER_JINA, "/v1/rerank")],
)
async def test_each_api_reorders_the_candidates(search_stub, coast, server, provider, path):
    plain = await search(search_stub)
    assert plain.rerank.status == pb.RERANK_STATUS_UNSPECIFIED
    config = C.RerankerConfig(provider=provider, base_url=server.url, api_key_env="SLUICE_RERANK_TEST_KEY", model="test-model")
    response = await search(search_stub, rerank=pb.SearchRerank(reranker=config))
    assert response.rerank.status == pb.RERANK_STATUS_APPLIED and response.rerank.message == ""
    assert response.rerank.provider == provider and response.rerank.candidates == len(plain.hits)
    assert [h.text for h in response.hits] == reranked_order(plain.hits)
    assert [h.text for h in response.hits] != [h.text for h in plain.hits]
    first_stage = {h.chunk_id: h.score for h in plain.hits}
    for hit in response.hits:
        assert hit.score == hit.rerank_score == pytest.approx(score(QUERY, hit.text))
        assert hit.first_stage_score == pytest.approx(first_stage[hit.chunk_id])
    (request,) = server.requests
    assert request.path == path
    assert request.headers["authorization"] == f"Bearer {KEY}"
    texts = request.body["texts"] if path == "/rerank" else request.body["documents"]
    assert request.body["query"] == QUERY and sorted(texts) == sorted(h.text for h in plain.hits)
    if path != "/rerank":
        assert request.body["model"] == "test-model"
    assert KEY not in str(response)


async def test_only_the_top_candidates_are_sent_and_at_least_top_k(search_stub, coast, server):
    plain = await search(search_stub, mode=VECTOR, top_k=6)
    response = await search(search_stub, mode=VECTOR, top_k=2, rerank=pb.SearchRerank(reranker=tei(server, candidates=4)))
    assert response.rerank.candidates == 4 and len(server.requests[-1].body["texts"]) == 4
    assert [h.text for h in response.hits] == reranked_order(plain.hits[:4])[:2]
    response = await search(search_stub, mode=VECTOR, top_k=5, rerank=pb.SearchRerank(reranker=tei(server, candidates=2)))
    assert response.rerank.candidates == 5 and len(response.hits) == 5


@pytest.mark.parametrize(
    "behaviour, status, words, budget",
    [
        ({"status": 500}, pb.RERANK_STATUS_FAILED, "HTTP 500", 30000),
        ({"status": 401}, pb.RERANK_STATUS_FAILED, "HTTP 401", 30000),
        ({"garbage": True}, pb.RERANK_STATUS_FAILED, "could not be read", 30000),
        ({"drop_last": True}, pb.RERANK_STATUS_FAILED, "without a score", 30000),
        ({"delay": 30.0}, pb.RERANK_STATUS_TIMED_OUT, "did not answer within 300 ms", 300),
    ],
)
async def test_a_failing_or_late_reranker_leaves_the_first_stage_order(
    search_stub, coast, server, behaviour, status, words, budget
):
    plain = await search(search_stub)
    for name, value in behaviour.items():
        setattr(server.behaviour, name, value)
    response = await search(search_stub, rerank=pb.SearchRerank(reranker=tei(server, timeout_ms=budget)))
    assert response.rerank.status == status
    assert words in response.rerank.message and "first-stage order" in response.rerank.message
    assert [(h.chunk_id, h.score) for h in response.hits] == [(h.chunk_id, h.score) for h in plain.hits]
    assert all(h.rerank_score == 0 and h.first_stage_score == h.score for h in response.hits)


async def test_a_missing_key_variable_fails_the_rerank_not_the_search(search_stub, coast, server):
    config = C.RerankerConfig(provider=C.RERANKER_PROVIDER_COHERE, base_url=server.url, api_key_env="SLUICE_RERANK_NOT_SET")
    response = await search(search_stub, rerank=pb.SearchRerank(reranker=config))
    assert response.rerank.status == pb.RERANK_STATUS_FAILED
    assert "SLUICE_RERANK_NOT_SET is not set" in response.rerank.message
    assert server.requests == [] and len(response.hits) > 0


async def test_rerank_min_score_and_query_vector(search_stub, coast, server):
    response = await search(search_stub, rerank=pb.SearchRerank(reranker=tei(server), min_score=0.5))
    assert response.hits and all(score(QUERY, h.text) >= 0.5 for h in response.hits)
    assert len(response.hits) < len(TEXTS)
    vector_only = await search(
        search_stub,
        query="",
        query_vector=embed([QUERY])[0],
        mode=VECTOR,
        rerank=pb.SearchRerank(reranker=tei(server), min_score=0.5),
    )
    assert vector_only.rerank.status == pb.RERANK_STATUS_SKIPPED and "query text" in vector_only.rerank.message
    assert len(vector_only.hits) == len(TEXTS)  # no rerank, no rerank threshold


async def test_the_collections_default_and_the_requests_override(search_stub, coast, server, seed):
    seed.conn.execute(
        "UPDATE collections SET reranker = %s WHERE id = %s",
        (
            Jsonb(
                {"provider": "tei", "model": "", "base_url": server.url, "api_key_env": "", "candidates": 3, "timeout_ms": 1000}
            ),
            coast,
        ),
    )
    plain = await search(search_stub, mode=VECTOR, rerank=pb.SearchRerank(disabled=True))
    assert plain.rerank.status == pb.RERANK_STATUS_UNSPECIFIED and server.requests == [] and len(plain.hits) == 6
    default = await search(search_stub, mode=VECTOR, top_k=2)
    assert default.rerank.status == pb.RERANK_STATUS_APPLIED and default.rerank.candidates == 3
    assert [h.text for h in default.hits] == reranked_order(plain.hits[:3])[:2]
    assert "authorization" not in server.requests[-1].headers  # TEI without a key variable sends none
    wider = await search(search_stub, mode=VECTOR, top_k=2, rerank=pb.SearchRerank(reranker=C.RerankerConfig(candidates=6)))
    assert wider.rerank.candidates == 6 and [h.text for h in wider.hits] == reranked_order(plain.hits)[:2]
    late = await search(search_stub, rerank=pb.SearchRerank(reranker=C.RerankerConfig(timeout_ms=1)))
    assert late.rerank.status in (pb.RERANK_STATUS_TIMED_OUT, pb.RERANK_STATUS_APPLIED)  # 1 ms: whichever came first


@pytest.mark.parametrize(
    "rerank, words",
    [
        (
            pb.SearchRerank(reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI, base_url="http://169.254.169.254")),
            "is not allowed",
        ),
        (pb.SearchRerank(reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI)), "needs a base_url"),
        (
            pb.SearchRerank(reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_COHERE, base_url="http://user:pw@127.0.0.1")),
            "must not hold a user or password",
        ),
        (
            pb.SearchRerank(reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI, base_url="ftp://127.0.0.1")),
            "http or https",
        ),
        (pb.SearchRerank(reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_COHERE, api_key_env=KEY)), "not the key itself"),
        (
            pb.SearchRerank(reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_COHERE, api_key_env="SLUICE_DATABASE_URL")),
            "starts with SLUICE_RERANK_",
        ),
        (pb.SearchRerank(reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_CROSS_ENCODER, model="../etc")), "no path"),
        (
            pb.SearchRerank(
                reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_CROSS_ENCODER, model="m", base_url="http://x")
            ),
            "takes no base_url",
        ),
        (pb.SearchRerank(reranker=C.RerankerConfig(provider=9)), "unknown reranker provider 9"),
        (pb.SearchRerank(reranker=C.RerankerConfig(model="x")), "provider is required"),
        (pb.SearchRerank(reranker=C.RerankerConfig(candidates=201)), "candidates must be between 0 and 200"),
        (
            pb.SearchRerank(reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_JINA, timeout_ms=60001)),
            "timeout_ms must be between 1 and 60000",
        ),
        (pb.SearchRerank(min_score=float("nan")), "rerank.min_score must be a finite number"),
    ],
)
async def test_bad_rerankers_are_refused(search_stub, coast, rerank, words):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await search(search_stub, rerank=rerank)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(err.value).reason == "INVALID_RERANKER"
    assert words in err.value.details(), err.value.details()
    assert KEY not in err.value.details()


async def test_a_collection_default_outside_the_allowed_urls_fails_the_rerank(search_stub, coast, seed, monkeypatch):
    seed.conn.execute(
        "UPDATE collections SET reranker = %s WHERE id = %s",
        (
            Jsonb(
                {
                    "provider": "tei",
                    "model": "",
                    "base_url": "http://127.0.0.1:9",
                    "api_key_env": "",
                    "candidates": 5,
                    "timeout_ms": 1000,
                }
            ),
            coast,
        ),
    )
    response = await search(search_stub)
    assert response.rerank.status == pb.RERANK_STATUS_FAILED and "not allowed" in response.rerank.message


# ------------------------------------------------------------------ a local cross-encoder


def build_tiny_cross_encoder(path) -> None:
    """A BERT cross-encoder with random weights and a 40-word vocabulary: it tests the plumbing
    (loading from a directory, scoring pairs, ordering), not the quality."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    torch.manual_seed(0)
    path.mkdir(parents=True)
    words = sorted({w.strip(".,:").lower() for text in [*TEXTS, QUERY] for w in text.split()})
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(path / "vocab.txt"))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)


async def test_a_local_cross_encoder_from_the_model_directory(search_stub, coast, tmp_path):
    from sentence_transformers import CrossEncoder

    model_dir = tmp_path / "models" / "tiny-reranker"
    build_tiny_cross_encoder(model_dir)
    plain = await search(search_stub)
    config = C.RerankerConfig(provider=C.RERANKER_PROVIDER_CROSS_ENCODER, model="tiny-reranker", timeout_ms=60000)
    response = await search(search_stub, rerank=pb.SearchRerank(reranker=config))
    assert response.rerank.status == pb.RERANK_STATUS_APPLIED, response.rerank.message
    expected = CrossEncoder(str(model_dir), device="cpu").predict([(QUERY, h.text) for h in plain.hits])
    by_text = {h.text: float(s) for h, s in zip(plain.hits, expected)}
    assert [h.rerank_score for h in response.hits] == pytest.approx([by_text[h.text] for h in response.hits], abs=1e-5)
    assert [h.rerank_score for h in response.hits] == sorted((h.rerank_score for h in response.hits), reverse=True)

    missing = C.RerankerConfig(provider=C.RERANKER_PROVIDER_CROSS_ENCODER, model="not-there", timeout_ms=60000)
    response = await search(search_stub, rerank=pb.SearchRerank(reranker=missing))
    assert response.rerank.status == pb.RERANK_STATUS_FAILED
    assert "'not-there' is not installed" in response.rerank.message and "tiny-reranker" in response.rerank.message
    assert [h.chunk_id for h in response.hits] == [h.chunk_id for h in plain.hits]
