"""Context for answers over gRPC against a real PostgreSQL: neighbouring chunks joined into
each hit's context (overlap given once), at most k hits per document, a score threshold, and
every hit's page and element boxes."""

from __future__ import annotations

import grpc
import pytest
from psycopg.types.json import Jsonb
from sluice.v1 import search_service_pb2 as pb
from sluice_common.embedders import get_embedder
from sluice_common.errors import error_info
from sluice_search.context import join_chunks, repeated_prefix
from sluice_worker.domain import ChunkingSettings
from sluice_worker.parsing.chunking import chunk_elements

DIM = 64
VECTOR, KEYWORD, HYBRID = pb.SEARCH_MODE_VECTOR, pb.SEARCH_MODE_KEYWORD, pb.SEARCH_MODE_HYBRID


def embed(texts):
    embedder = get_embedder("hashing", "hashing-v1", DIM)
    return [embedder.embed_one(t) for t in texts]


@pytest.fixture
def book(seed):
    """`book.txt`: ten chunks, the sixth about lighthouses; `other.txt`: three chunks about
    lighthouses too; `notes.txt`: one chunk."""
    cid = seed.collection("book", DIM)
    chapters = [f"Chapter {i} tells of rivers and mills." for i in range(10)]
    chapters[5] = "Chapter 5 tells of the lighthouse keeper and his lamp."
    book = seed.document(cid, "book.txt")
    seed.chunks(cid, book, chapters, embed(chapters))
    other_texts = ["The lighthouse keeper lit the lamp.", "A lighthouse keeper wrote a log.", "The lamp of the lighthouse."]
    other = seed.document(cid, "other.txt")
    seed.chunks(cid, other, other_texts, embed(other_texts))
    notes = seed.document(cid, "notes.txt")
    seed.chunks(cid, notes, ["Notes on the lighthouse lamp."], embed(["Notes on the lighthouse lamp."]))
    return {"collection": cid, "book": book, "other": other, "notes": notes, "chapters": chapters}


async def search(stub, **kwargs):
    kwargs.setdefault("collection", "book")
    return await stub.Search(pb.SearchRequest(**kwargs))


async def test_neighbours_are_joined_in_order(search_stub, book):
    response = await search(
        search_stub,
        query="lighthouse keeper lamp",
        mode=KEYWORD,
        top_k=10,
        neighbor_chunks=2,
        filter=pb.SearchFilter(filenames=["book.txt"]),
    )
    (hit,) = response.hits
    assert hit.chunk_index == 5 and hit.text == book["chapters"][5]
    assert hit.context == "\n\n".join(book["chapters"][3:8])
    assert (hit.context_first_chunk_index, hit.context_last_chunk_index) == (3, 7)
    assert hit.first_stage_score == hit.score > 0


async def test_windows_stop_at_the_ends_of_the_document(search_stub, book):
    response = await search(
        search_stub,
        query="lighthouse",
        mode=KEYWORD,
        top_k=10,
        neighbor_chunks=5,
        filter=pb.SearchFilter(filenames=["other.txt", "notes.txt"]),
    )
    by_chunk = {(h.filename, h.chunk_index): h for h in response.hits}
    assert by_chunk[("other.txt", 0)].context_first_chunk_index == 0
    assert by_chunk[("other.txt", 0)].context_last_chunk_index == 2
    assert by_chunk[("other.txt", 2)].context.startswith("The lighthouse keeper lit the lamp.")
    notes = by_chunk[("notes.txt", 0)]
    assert notes.context == notes.text and notes.context_last_chunk_index == 0


async def test_no_context_unless_asked(search_stub, book):
    response = await search(search_stub, query="lighthouse", mode=KEYWORD)
    assert response.hits and all(h.context == "" for h in response.hits)


async def test_overlap_between_neighbours_is_given_once(search_stub, seed):
    cid = seed.collection("overlapping", DIM)
    seed.conn.execute("UPDATE collections SET chunk_overlap = 40 WHERE id = %s", (cid,))
    # As the sentence packer makes them: each chunk opens with the last sentence of the one before.
    texts = [
        "Rivers run to the sea. The sea is salt.",
        "The sea is salt. Salt keeps fish. Fish feed gulls.",
        "Fish feed gulls. Gulls nest on the lighthouse.",
    ]
    doc = seed.document(cid, "sea.txt")
    seed.chunks(cid, doc, texts, embed(texts))
    response = await search(
        search_stub, collection="overlapping", query="lighthouse gulls nest", mode=KEYWORD, neighbor_chunks=2, top_k=1
    )
    (hit,) = response.hits
    assert (
        hit.context == "Rivers run to the sea. The sea is salt. Salt keeps fish. Fish feed gulls. Gulls nest on the lighthouse."
    )


async def test_at_most_k_hits_per_document_still_fills_top_k(search_stub, book):
    plain = await search(search_stub, query="lighthouse keeper lamp chapter", mode=KEYWORD, top_k=3)
    assert [h.filename for h in plain.hits].count("other.txt") >= 2
    capped = await search(search_stub, query="lighthouse keeper lamp chapter", mode=KEYWORD, top_k=3, max_hits_per_document=1)
    assert len(capped.hits) == 3 and len({h.document_id for h in capped.hits}) == 3
    # In order of the uncapped ranking, keeping each document's best.
    scores = [h.score for h in capped.hits]
    assert scores == sorted(scores, reverse=True)
    for mode in (VECTOR, HYBRID):
        response = await search(search_stub, query="lighthouse keeper lamp", mode=mode, top_k=3, max_hits_per_document=1)
        assert len(response.hits) == 3 and len({h.document_id for h in response.hits}) == 3, mode


@pytest.mark.parametrize("mode", [VECTOR, KEYWORD, HYBRID])
async def test_min_score_drops_the_weaker_hits(search_stub, book, mode):
    everything = await search(search_stub, query="lighthouse keeper lamp", mode=mode, top_k=20)
    scores = [h.score for h in everything.hits]
    assert len(set(scores)) > 2
    threshold = sorted(scores)[len(scores) // 2]
    kept = await search(search_stub, query="lighthouse keeper lamp", mode=mode, top_k=20, min_score=threshold)
    assert [h.chunk_id for h in kept.hits] == [h.chunk_id for h in everything.hits if h.score >= threshold]
    none = await search(search_stub, query="lighthouse keeper lamp", mode=mode, top_k=20, min_score=max(scores) + 1)
    assert list(none.hits) == []


async def test_hits_carry_their_page_and_boxes(search_stub, book, seed):
    boxes = [
        {"page": 2, "left": 0.1, "top": 0.2, "right": 0.9, "bottom": 0.3},
        {"page": 3, "left": 0.1, "top": 0.05, "right": 0.5, "bottom": 0.1},
    ]
    seed.conn.execute(
        "UPDATE chunks SET boxes = %s, page_number = 2 WHERE document_id = %s AND chunk_index = 0", (Jsonb(boxes), book["notes"])
    )
    response = await search(search_stub, query="notes", mode=KEYWORD, filter=pb.SearchFilter(filenames=["notes.txt"]))
    (hit,) = response.hits
    assert hit.page_number == 2
    assert [(b.page_number, round(b.left, 4), round(b.top, 4), round(b.right, 4), round(b.bottom, 4)) for b in hit.boxes] == [
        (2, 0.1, 0.2, 0.9, 0.3),
        (3, 0.1, 0.05, 0.5, 0.1),
    ]
    other = await search(search_stub, query="lighthouse", mode=KEYWORD, filter=pb.SearchFilter(filenames=["other.txt"]))
    assert all(list(h.boxes) == [] for h in other.hits)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"neighbor_chunks": 6}, "neighbor_chunks must be between 0 and 5"),
        ({"neighbor_chunks": -1}, "neighbor_chunks must be between 0 and 5"),
        ({"max_hits_per_document": -1}, "max_hits_per_document must be between 0"),
        ({"max_hits_per_document": 101}, "max_hits_per_document must be between 0"),
        ({"min_score": float("nan")}, "min_score must be a finite number"),
        ({"min_score": float("inf")}, "min_score must be a finite number"),
    ],
)
async def test_bad_context_options_are_refused(search_stub, book, kwargs, words):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await search(search_stub, query="lighthouse", **kwargs)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(err.value).reason == "INVALID_CONTEXT"
    assert words in err.value.details()


# ------------------------------------------------------------------ joining, against the real chunker


def _elements(texts):
    from unstructured.documents.elements import ElementMetadata, NarrativeText

    out = []
    for text in texts:
        element = NarrativeText(text=text)
        element.metadata = ElementMetadata(page_number=1)
        out.append(element)
    return out


@pytest.mark.parametrize("overlap", [0, 60, 150, 400])
def test_joining_the_chunks_of_a_long_paragraph_gives_it_back(overlap):
    """The sentence packer repeats whole sentences; joined, they appear once."""
    paragraph = " ".join(f"Sentence {i} is about rivers, mills and the sea, at some length." for i in range(60))
    records = chunk_elements(_elements([paragraph]), ChunkingSettings(500, 400, overlap), 1000)
    assert len(records) > 5
    joined = join_chunks([r.text for r in records], overlap)
    # Chunks that share nothing are joined as paragraphs; nothing is repeated, nothing lost.
    assert joined.replace("\n\n", " ") == paragraph
    if overlap > 66:  # a whole sentence fits in the overlap: every boundary repeats one
        assert joined == paragraph


def test_joining_text_split_inside_a_sentence_gives_it_back():
    """unstructured's splitter repeats the last `overlap` characters, cut at a word."""
    text = "".join(f"w{i} " for i in range(600)).strip()
    records = chunk_elements(_elements([text]), ChunkingSettings(300, 250, 40), 1000)
    assert len(records) > 5
    assert join_chunks([r.text for r in records], 40) == text


def test_repeated_prefix_needs_a_real_overlap():
    assert repeated_prefix("ends with the sea.", "the sea. And more", 40) == len("the sea.")
    assert repeated_prefix("ends with a.", "a. b", 40) == 0  # too short to be more than chance
    assert repeated_prefix("whole", "whole", 40) == 0 or repeated_prefix("x whole", "whole", 40) == 5
    assert repeated_prefix("abc", "xyz", 40) == 0
    assert join_chunks(["One.", "Two."], 0) == "One.\n\nTwo."
