"""A sentence-transformers model (BERT-like, mean pooling, normalized) run by ONNX Runtime, in
fp32 or with int8 dynamic quantization.

`optimum` cannot be installed beside the pinned sentence-transformers (it needs transformers < 5),
so the model is exported here with `torch.onnx` (the legacy TorchScript exporter), mean pooling
and normalization included in the graph, then quantized with onnxruntime's own
`quantize_dynamic`: MatMul weights only, per channel, and not the feed-forward down-projections.
Measured on the test corpus' chunks (mean / min cosine to the torch vectors): everything
quantized 0.92 / 0.81; MatMul per tensor 0.94 / 0.81; MatMul per channel 0.990 / 0.973; the
same without the six FFN down-projections 0.996 / 0.994 (the choice).

fp32 is the same graph unquantized: the torch vectors to within float rounding (max absolute
difference 2e-7 on the readme set's queries), which is what search embeds a query with
(docs/embedders.md, "A search query on ONNX Runtime"): 4.2 ms against torch's 10-11 ms on one
thread for a short query. Only a model whose sentence-transformers modules are the transformer,
mean pooling and (optionally) normalization is that graph (`mean_pooled`).

The export happens once, offline, on first use: `<model dir>/onnx/model-<precision>.onnx` beside the
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

from .e5 import length_batches

log = logging.getLogger("sluice.embedders.onnx")

INT8, FP32 = "int8", "fp32"
FILE_NAMES = {INT8: "model-int8.onnx", FP32: "model-fp32.onnx"}
_sessions: dict[str, OnnxSentenceEncoder] = {}
_sessions_lock = threading.Lock()


def _model_hash(model_dir: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(model_dir.glob("*")):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.name}:{stat.st_size}:{int(stat.st_mtime)}".encode())
    return digest.hexdigest()[:16]


def onnx_path(model_dir: Path, precision: str = INT8) -> Path:
    """Beside the model when it is there already (exported by `make venv` or an image's build) or
    can be written there; else in the cache directory."""
    beside = model_dir / "onnx"
    if (beside / FILE_NAMES[precision]).exists() or os.access(model_dir, os.W_OK) or os.access(beside, os.W_OK):
        return beside / FILE_NAMES[precision]
    cache = Path(os.environ.get("SLUICE_ONNX_CACHE_DIR") or Path.home() / ".cache" / "sluice" / "onnx")
    return cache / _model_hash(model_dir) / FILE_NAMES[precision]


def mean_pooled(model_dir: Path) -> bool:
    """Whether the exported graph (transformer, mean pooling, normalization) is the whole model:
    its modules.json lists a Transformer, a Pooling that takes the mean of the tokens only, and
    at most a Normalize (search normalizes every vector anyway). A model with CLS or max pooling,
    a dense layer or anything else is not, and keeps torch; so does one whose sentence-transformers
    config lowercases the text before the tokenizer (`do_lower_case`), which the graph's callers
    do not."""
    try:
        config = model_dir / "sentence_bert_config.json"
        if config.exists() and json.loads(config.read_text()).get("do_lower_case") is True:
            return False
        modules = json.loads((model_dir / "modules.json").read_text())
        kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return False
        pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return False
    modes = {key: value for key, value in pooling.items() if key.startswith("pooling_mode_")}
    return modes.get("pooling_mode_mean_tokens") is True and not any(
        v for k, v in modes.items() if k != "pooling_mode_mean_tokens"
    )


def export(model_dir: Path, target: Path, precision: str = INT8) -> None:
    """Export the model to ONNX (pooling and normalization inside), quantized to int8 or not."""
    import tempfile
    import warnings

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
        # The tracer warns that Python booleans taken from tensors (transformers' attention-mask
        # shortcuts) become constants, and that negative indices would export wrongly; neither
        # holds for this graph, whose vectors are checked against torch's at every length the
        # tests use (docs/embedders.md). Shown to a newcomer on the first `make venv`, they read
        # as "the exported graph will produce incorrect results": kept quiet here.
        with torch.no_grad(), warnings.catch_warnings():
            # By the module that warns: the tracer's warnings come from transformers' modules, the
            # exporter's from torch.onnx (torch.jit.TracerWarning is not a public name to mypy).
            warnings.filterwarnings("ignore", module=r"(transformers|torch\.onnx)\.")
            warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*legacy TorchScript-based ONNX export")
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
        if precision == FP32:
            os.replace(fp32, target)  # atomic: a reader sees the whole file or none
            log.info(
                "exported ONNX fp32 model",
                extra={"model_dir": str(model_dir), "path": str(target), "seconds": round(time.monotonic() - started, 1)},
            )
            return
        quantized = Path(work) / FILE_NAMES[INT8]
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


def ensure_exported(model_dir: Path, precision: str = INT8) -> Path:
    if precision not in FILE_NAMES:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(FILE_NAMES)}")
    target = onnx_path(model_dir, precision)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not target.exists():
                export(model_dir, target, precision)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target


class OnnxSentenceEncoder:
    """Tokenize with the model's tokenizer.json, run the int8 or fp32 graph, return normalized vectors."""

    def __init__(self, model_dir: Path, threads: int = 0, spinning: bool = False, precision: str = INT8) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        path = ensure_exported(model_dir, precision)
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
        # Similar lengths batched together: less padding (sluice_common.embedders.e5.length_batches).

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


def load(model_dir: Path, threads: int = 0, spinning: bool = False, precision: str = INT8) -> OnnxSentenceEncoder:
    key = f"{model_dir.resolve()}:{threads}:{spinning}:{precision}"
    with _sessions_lock:
        if key not in _sessions:
            _sessions[key] = OnnxSentenceEncoder(model_dir, threads, spinning, precision)
        return _sessions[key]
