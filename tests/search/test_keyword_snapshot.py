"""A KEYWORD search that takes more than one round (keyword.py: the rarer words' chunks first,
then the next words' chunks that hold none of the earlier ones) reads every round in one
snapshot (docs/contributing.md, Code: "A read answered from several statements sees one
snapshot"). Under READ COMMITTED each round saw the commits made before it, so a version swap
committing between two rounds (the old version leaves READY, the new one enters it, in one
commit) gave both versions in one answer, or neither."""

from __future__ import annotations

import threading

from conftest import random_unit_vectors
from helpers import reads_beside
from sluice.v1 import search_service_pb2 as pb

READS = 400


async def test_a_keyword_search_of_several_rounds_never_mixes_two_commits(search_stub, seed, monkeypatch):
    from sluice_search import keyword as kw

    # Rounds of one word each: "zebra" (in one chunk) first, then "apple" (in two).
    monkeypatch.setattr(kw, "FIRST_CANDIDATES", 1)
    cid = seed.collection("swap", 8)
    old = seed.document(cid, "v1.txt", status="READY")
    new = seed.document(cid, "v2.txt", status="EMBEDDING")
    seed.chunks(cid, old, ["zebra apple"], random_unit_vectors(1, 8, seed=1))
    seed.chunks(cid, new, ["apple"], random_unit_vectors(1, 8, seed=2))
    stop = threading.Event()
    swaps = [0]

    def swap_in_one_commit() -> None:
        """Exactly one of the two documents is READY after every commit."""
        while not stop.is_set():
            seed.conn.execute(
                "UPDATE documents SET status = CASE WHEN status = 'READY' THEN 'EMBEDDING' ELSE 'READY' END::document_status"
                " WHERE id = ANY(%s::uuid[])",
                ([old, new],),
            )
            swaps[0] += 1

    swapper = threading.Thread(target=swap_in_one_commit, daemon=True)
    swapper.start()
    mixed = []
    try:
        for _ in reads_beside(swaps, READS):
            answer = await search_stub.Search(
                pb.SearchRequest(collection="swap", query="zebra apple", mode=pb.SEARCH_MODE_KEYWORD, top_k=10)
            )
            texts = sorted(hit.text for hit in answer.hits)
            if len(texts) != 1:
                mixed.append(texts)
    finally:
        stop.set()
        swapper.join(30)
    assert swaps[0] > READS // 4, "the swaps must run beside the reads"
    assert mixed == [], f"{len(mixed)} of {READS} answers mixed two commits, e.g. {mixed[:3]}"
