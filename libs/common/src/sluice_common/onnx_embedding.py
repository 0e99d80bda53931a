"""A sentence-transformers model (BERT-like, mean pooling, normalized) run by ONNX Runtime with
int8 dynamic quantization.

`optimum` cannot be installed beside the pinned sentence-transformers (it needs transformers < 5),
so the model is exported here with `torch.onnx` (the legacy TorchScript exporter), mean pooling
and normalization included in the graph, then quantized with onnxruntime's own
`quantize_dynamic`: MatMul weights only, per channel, and not the feed-forward down-projections.
Measured on the test corpus' chunks (mean / min cosine to the torch vectors): everything
quantized 0.92 / 0.81; MatMul per tensor 0.94 / 0.81; MatMul per channel 0.990 / 0.973; the
same without the six FFN down-projections 0.996 / 0.994 (the choice).

The export happens once, offline, on first use: `<model dir>/onnx/model-int8.onnx` beside the
model when that directory is writable, else under `SLUICE_ONNX_CACHE_DIR` (default
`~/.cache/sluice/onnx/<hash of the model's files>`), under a file lock so that two processes do
not export at once. At run time only onnxruntime and `tokenizers` are used (no torch).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path

import numpy as np

log = logging.getLogger("sluice.embedders.onnx")

FILE_NAME = "model-int8.onnx"
_sessions: dict[str, OnnxSentenceEncoder] = {}
_sessions_lock = threading.Lock()


def _model_hash(model_dir: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(model_dir.glob("*")):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.name}:{stat.st_size}:{int(stat.st_mtime)}".encode())
    return digest.hexdigest()[:16]


def onnx_path(model_dir: Path) -> Path:
    beside = model_dir / "onnx"
    if os.access(model_dir, os.W_OK) or os.access(beside, os.W_OK):
        return beside / FILE_NAME
    cache = Path(os.environ.get("SLUICE_ONNX_CACHE_DIR") or Path.home() / ".cache" / "sluice" / "onnx")
    return cache / _model_hash(model_dir) / FILE_NAME


def export_int8(model_dir: Path, target: Path) -> None:
    """Export the model to ONNX (pooling and normalization inside) and quantize it to int8."""
    import tempfile

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    started = time.monotonic()
    model = AutoModel.from_pretrained(str(model_dir)).eval()

    class Pooled(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
            hidden = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = torch.ones(2, 16, dtype=torch.long)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        fp32 = Path(work) / "model.onnx"
        with torch.no_grad():
            torch.onnx.export(
                Pooled(model),
                (sample, torch.ones_like(sample), torch.zeros_like(sample)),
                str(fp32),
                input_names=names,
                output_names=["sentence_embedding"],
                dynamic_axes={**{name: {0: "batch", 1: "sequence"} for name in names}, "sentence_embedding": {0: "batch"}},
                opset_version=17,
                dynamo=False,
            )
        quantized = Path(work) / FILE_NAME
        import onnx

        # The feed-forward down-projections (after GELU, where activations have outliers) stay fp32.
        keep = [n.name for n in onnx.load(str(fp32)).graph.node if n.op_type == "MatMul" and _is_ffn_output(n.name)]
        quantize_dynamic(
            str(fp32),
            str(quantized),
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            nodes_to_exclude=keep,
        )
        os.replace(quantized, target)  # atomic: a reader sees the whole file or none
    log.info(
        "exported ONNX int8 model",
        extra={"model_dir": str(model_dir), "path": str(target), "seconds": round(time.monotonic() - started, 1)},
    )


def _is_ffn_output(node_name: str) -> bool:
    return "/output/dense/" in node_name and "/attention/" not in node_name


def ensure_exported(model_dir: Path) -> Path:
    target = onnx_path(model_dir)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not target.exists():
                export_int8(model_dir, target)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target


class OnnxSentenceEncoder:
    """Tokenize with the model's tokenizer.json, run the int8 graph, return normalized vectors."""

    def __init__(self, model_dir: Path, threads: int = 0, spinning: bool = False) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        path = ensure_exported(model_dir)
        max_length = 256
        with contextlib.suppress(OSError, ValueError, KeyError):
            max_length = int(json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")  # docs/embedders.md
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.dimensions = int(self.session.get_outputs()[0].shape[-1])

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        # Similar lengths batched together: less padding (sluice_common.multilingual_e5.length_batches).
        from sluice_common.multilingual_e5 import length_batches

        for indexes in length_batches([len(e.ids) for e in encodings], batch_size):
            width = max(len(encodings[i].ids) for i in indexes)
            ids = np.zeros((len(indexes), width), dtype=np.int64)
            mask = np.zeros((len(indexes), width), dtype=np.int64)
            types = np.zeros((len(indexes), width), dtype=np.int64)
            for row, i in enumerate(indexes):
                encoding = encodings[i]
                n = len(encoding.ids)
                ids[row, :n], mask[row, :n], types[row, :n] = encoding.ids, encoding.attention_mask, encoding.type_ids
            out[indexes] = self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
        return out


def load(model_dir: Path, threads: int = 0, spinning: bool = False) -> OnnxSentenceEncoder:
    key = f"{model_dir.resolve()}:{threads}:{spinning}"
    with _sessions_lock:
        if key not in _sessions:
            _sessions[key] = OnnxSentenceEncoder(model_dir, threads, spinning)
        return _sessions[key]
