"""The local model through ONNX Runtime int8: same vectors as the torch path (mean cosine
>= 0.99 on chunks of the eval set samples and the Markdown fixtures), selectable by setting or per collection model name,
exported once and cached. Speed is measured in bench/worker_bench.py, not asserted here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sluice_common import onnx_embedding
from sluice_common.embedders import (
    EmbedderSettings,
    get_embedder,
    packaged_model_dir,
    split_backend,
)

TESTS = Path(__file__).resolve().parents[1]
# Real documents of the eval set samples (a dozen English man pages, a dozen Chinese texts) and the
# worker's Markdown documents.
SOURCES = (
    sorted((TESTS / "fixtures" / "evalsets" / "en" / "docs").iterdir())[:12]
    + sorted((TESTS / "fixtures" / "evalsets" / "zh" / "docs").iterdir())[:12]
    + sorted((TESTS / "fixtures" / "documents").glob("*.md"))
)


def corpus_chunks() -> list[str]:
    chunks = []
    for path in SOURCES:
        text = path.read_text(errors="replace")
        chunks.extend(text[i : i + 300] for i in range(0, len(text), 300))
    return chunks


def test_backend_is_chosen_by_setting_or_by_the_model_name():
    assert split_backend("all-MiniLM-L6-v2", "torch") == ("all-MiniLM-L6-v2", "torch")
    assert split_backend("all-MiniLM-L6-v2", "onnx-int8") == ("all-MiniLM-L6-v2", "onnx-int8")
    assert split_backend("all-MiniLM-L6-v2:onnx-int8", "torch") == ("all-MiniLM-L6-v2", "onnx-int8")
    assert split_backend("all-MiniLM-L6-v2:torch", "onnx-int8") == ("all-MiniLM-L6-v2", "torch")
    assert split_backend("C:/models/x", "torch") == ("C:/models/x", "torch")  # not a backend suffix
    with pytest.raises(ValueError):
        EmbedderSettings(local_embedder_backend="tensorflow")


async def test_onnx_int8_vectors_agree_with_the_torch_path():
    chunks = corpus_chunks()
    assert len(chunks) >= 20
    torch_vectors = np.array(await get_embedder("sentence_transformers", "all-MiniLM-L6-v2", 384).embed_documents(chunks))
    settings = EmbedderSettings(local_embedder_backend="onnx-int8")
    onnx = get_embedder("sentence_transformers", "all-MiniLM-L6-v2", 384, settings)
    onnx_vectors = np.array(await onnx.embed_documents(chunks))
    assert onnx_vectors.shape == torch_vectors.shape == (len(chunks), 384)
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-4)
    cosines = (onnx_vectors * torch_vectors).sum(axis=1)
    print(f"onnx-int8 vs torch on {len(chunks)} chunks: mean cosine {cosines.mean():.4f}, min {cosines.min():.4f}")
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.95
    # The same query finds the same best chunk through either path.
    query = "compile a program written in ANSI C"  # the c89-gcc page of the sample
    q_torch = np.array(await get_embedder("sentence_transformers", "all-MiniLM-L6-v2", 384).embed_query(query))
    q_onnx = np.array(await onnx.embed_query(query))
    assert int(np.argmax(torch_vectors @ q_torch)) == int(np.argmax(onnx_vectors @ q_onnx))


def test_the_export_is_cached_beside_the_model():
    model_dir = packaged_model_dir()
    path = onnx_embedding.ensure_exported(model_dir)
    assert path == onnx_embedding.onnx_path(model_dir) and path.exists()
    if path.parent == model_dir / "onnx":
        assert path.stat().st_size > 1_000_000
    before = path.stat().st_mtime_ns
    assert onnx_embedding.ensure_exported(model_dir) == path and path.stat().st_mtime_ns == before  # not again
