"""The reindex quality gate, ingest-api's side (issue 18 item 7; docs/search.md, "Reindexing with
a quality gate"): ReindexCollection's eval set is checked and stored, a gated generation waits
for a verdict, PASSED switches it, FAILED cancels it with the verdict kept. The verdict is
recorded here as search records it: as search's database login, through the SECURITY DEFINER
function of migration 0018 (search's side, measuring, is tests/worker/test_reindex_eval_gate_e2e.py).
Real PostgreSQL and gRPC; the worker is played by hand through JobService."""

from __future__ import annotations

import auth_keys
import grpc
import psycopg
import pytest
from helpers import expect_error, wait_for
from sluice.v1 import collection_pb2
from sluice.v1 import document_service_pb2 as ds

from .helpers import Clients, D

G = collection_pb2
FAST = {"generation_sweep_seconds": 0.05, "retired_generation_grace_seconds": 0.3}
EVAL = [ds.EvalQuery(query="alpha", relevant=["a.txt"], id="q1"), ds.EvalQuery(query="beta", relevant=["b.txt"])]


def hashing(model: str = "hashing-v2", dimensions: int = 16) -> collection_pb2.EmbedderConfig:
    return collection_pb2.EmbedderConfig(provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model=model, dimensions=dimensions)


def reindex(c: Clients, eval_queries=(), min_ratio: float = 0.0, embedder=None, name: str = "docs"):
    return c.docs.ReindexCollection(
        ds.ReindexCollectionRequest(
            name=name, embedder=embedder or hashing(), eval_queries=list(eval_queries), min_ratio=min_ratio
        )
    )


def collection(c: Clients, name: str = "docs") -> collection_pb2.Collection:
    return c.docs.GetCollection(ds.GetCollectionRequest(name=name))


def states(col: collection_pb2.Collection) -> list[tuple[int, int]]:
    return [(g.number, g.state) for g in col.generations]


def ready_document(c: Clients, text: str, filename: str) -> str:
    doc = c.upload(content=text.encode(), filename=filename)
    job = c.claim()
    c.run_to_indexing(job)
    assert c.complete(job, [text]).status == D.DOCUMENT_STATUS_READY
    return doc.id


def embed_all(c: Clients, count: int) -> None:
    for _ in range(count):
        job = c.claim()
        c.complete(job, ["re-embedded"], dimensions=16)


def generation_ids(url: str) -> dict[int, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT number, id FROM collection_generations").fetchall())


def record_verdict(
    database_url: str, generation: int, active: int, active_score: float, candidate_score: float, queries: int
) -> str | None:
    """As search's gate records it (eval_gate.py): its login, a READ WRITE transaction."""
    with psycopg.connect(auth_keys.search_url(database_url), autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        with conn.transaction():
            conn.execute("SET TRANSACTION READ WRITE")
            return conn.execute(
                "SELECT sluice_record_generation_verdict(%s, %s, %s, %s, %s, 'test')",
                (generation, active, active_score, candidate_score, queries),
            ).fetchone()[0]


def awaiting(database_url: str) -> list[tuple]:
    with psycopg.connect(auth_keys.search_url(database_url)) as conn:
        return conn.execute(
            "SELECT generation_id, collection, generation, active_generation_id, jsonb_array_length(eval_set),"
            " min_ratio FROM sluice_generations_awaiting_verdict()"
        ).fetchall()


def test_bad_eval_sets_are_refused_with_a_reason_and_change_nothing(ingest_api):
    c = Clients(ingest_api.address)
    c.create_collection("docs")
    cases = {
        "empty query": [ds.EvalQuery(query="  ", relevant=["a.txt"])],
        "no relevant": [ds.EvalQuery(query="alpha")],
        "empty relevant entry": [ds.EvalQuery(query="alpha", relevant=[""])],
        "repeated id": [ds.EvalQuery(query="a", relevant=["a"], id="x"), ds.EvalQuery(query="b", relevant=["b"], id="x")],
        "too many": [ds.EvalQuery(query=f"q{i}", relevant=["a"]) for i in range(1001)],
        "query too long": [ds.EvalQuery(query="x" * 4097, relevant=["a"])],
    }
    for what, queries in cases.items():
        err = expect_error(lambda q=queries: reindex(c, q), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_EVAL_SET")
        assert "eval_queries" in err.details(), (what, err.details())
    for ratio in (-0.5, 2.5, float("nan")):
        err = expect_error(lambda r=ratio: reindex(c, EVAL, r), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_EVAL_SET")
        assert "min_ratio" in err.details()
    expect_error(lambda: reindex(c, (), 0.9), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_EVAL_SET")
    assert states(collection(c)) == [(1, G.GENERATION_STATE_ACTIVE)]  # nothing was started
    c.close()


def test_a_gated_generation_waits_for_its_verdict_and_a_passed_one_switches(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(**FAST).address)
    c.create_collection("docs")
    ready_document(c, "alpha text", "a.txt")
    ready_document(c, "beta text", "b.txt")

    building = reindex(c, EVAL, 0.9)
    gate = building.generations[1].evaluation
    assert gate.state == G.EVALUATION_STATE_PENDING
    assert (gate.queries, round(gate.min_ratio, 4), gate.metric) == (2, 0.9, "mrr@10")
    assert not building.generations[0].HasField("evaluation")  # the first generation had no gate
    ids = generation_ids(database_url)
    assert awaiting(database_url) == []  # not complete yet: nothing for search to measure

    embed_all(c, 2)
    # Complete, but gated: it stays BUILDING while the sweep runs, and search sees it awaiting.
    wait_for(lambda: awaiting(database_url), what="the complete generation listed for search")
    assert awaiting(database_url) == [(ids[2], "docs", 2, ids[1], 2, pytest.approx(0.9))]
    for _ in range(5):
        assert states(collection(c)) == [(1, G.GENERATION_STATE_ACTIVE), (2, G.GENERATION_STATE_BUILDING)]

    # A retrying call may repeat the gate or leave it out, not change it.
    expect_error(lambda: reindex(c, EVAL[:1], 0.9), grpc.StatusCode.FAILED_PRECONDITION, "REINDEX_IN_PROGRESS")

    # A measurement against a generation that is not the ACTIVE one is not recorded; a wrong
    # query count is an error; the right one is recorded once.
    assert record_verdict(database_url, ids[2], ids[2], 0.5, 0.5, 2) is None
    with pytest.raises(psycopg.errors.CheckViolation):
        record_verdict(database_url, ids[2], ids[1], 0.5, 0.5, 3)
    assert record_verdict(database_url, ids[2], ids[1], 0.8, 0.75, 2) == "PASSED"  # 0.75 >= 0.9 x 0.8
    assert record_verdict(database_url, ids[2], ids[1], 0.8, 0.0, 2) is None  # the first verdict stands
    assert awaiting(database_url) == []

    switched = wait_for(
        lambda: (col := collection(c)).generations[1].state == G.GENERATION_STATE_ACTIVE and col,
        what="the switch after a PASSED verdict",
    )
    assert states(switched) == [(1, G.GENERATION_STATE_RETIRED), (2, G.GENERATION_STATE_ACTIVE)]
    verdict = switched.generations[1].evaluation
    assert verdict.state == G.EVALUATION_STATE_PASSED
    assert (verdict.active_score, verdict.candidate_score, verdict.active_generation) == (0.8, 0.75, 1)
    assert verdict.HasField("evaluate_time")
    assert switched.embedder.model == "hashing-v2"
    c.close()


def test_a_failed_verdict_cancels_the_generation_and_the_active_one_keeps_serving(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(**FAST).address)
    c.create_collection("docs")
    first = ready_document(c, "alpha text", "a.txt")
    reindex(c, EVAL)  # min_ratio 0: the default 1.0
    ids = generation_ids(database_url)
    embed_all(c, 1)
    wait_for(lambda: awaiting(database_url), what="the complete generation listed for search")
    assert awaiting(database_url)[0][5] == pytest.approx(1.0)
    assert record_verdict(database_url, ids[2], ids[1], 0.9, 0.6, 2) == "FAILED"

    refused = wait_for(
        lambda: (col := collection(c)).generations[1].state == G.GENERATION_STATE_CANCELLED and col,
        what="the generation cancelled after a FAILED verdict",
    )
    assert states(refused) == [(1, G.GENERATION_STATE_ACTIVE), (2, G.GENERATION_STATE_CANCELLED)]
    verdict = refused.generations[1].evaluation
    assert verdict.state == G.EVALUATION_STATE_FAILED
    assert (verdict.active_score, verdict.candidate_score, verdict.queries) == (0.9, 0.6, 2)
    assert refused.embedder.model == "hashing-v1" and refused.embedder.dimensions == 8
    with psycopg.connect(database_url) as conn:
        left = conn.execute("SELECT generation_id, count(*) FROM chunks WHERE document_id = %s GROUP BY 1", (first,)).fetchall()
        jobs = conn.execute(
            "SELECT count(*) FROM ingestion_jobs WHERE generation_id = %s AND kind = 'EMBED'", (ids[2],)
        ).fetchone()[0]
    assert left == [(ids[1], 1)] and jobs == 0  # the new generation's chunks and jobs are gone
    # A new reindex may start at once, gated or not; without an eval set it switches as before.
    again = reindex(c, embedder=hashing("hashing-v3", 12))
    assert not again.generations[2].HasField("evaluation")
    job = c.claim()
    c.complete(job, ["x"], dimensions=12)
    switched = wait_for(lambda: (col := collection(c)).generations[2].state == G.GENERATION_STATE_ACTIVE and col)
    assert switched.generations[1].evaluation.state == G.EVALUATION_STATE_FAILED  # history keeps the verdict
    c.close()


def test_search_can_write_nothing_but_a_verdict(ingest_api, database_url):
    c = Clients(ingest_api.address)
    c.create_collection("docs")
    reindex(c)  # no eval set: an empty collection switches at once
    ids = generation_ids(database_url)
    with psycopg.connect(auth_keys.search_url(database_url), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute("SET TRANSACTION READ WRITE")
            conn.execute(
                "INSERT INTO generation_evaluations (generation_id, tenant_id, active_generation_id,"
                " active_generation, active_score, candidate_score, queries, min_ratio, passed)"
                " VALUES (%s, 1, %s, 1, 0, 1, 1, 1, true)",
                (ids[2], ids[1]),
            )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT sluice_generation_complete(%s)", (ids[2],))
        # Not gated (and no longer BUILDING): nothing is recorded.
        with conn.transaction():
            conn.execute("SET TRANSACTION READ WRITE")
            assert (
                conn.execute("SELECT sluice_record_generation_verdict(%s, %s, 0.1, 0.9, 1, 'x')", (ids[2], ids[1])).fetchone()[0]
                is None
            )
    c.close()
