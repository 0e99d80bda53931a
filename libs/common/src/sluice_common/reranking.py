"""Reranker configurations: checked once, the same way by ingest-api (a collection's default,
CreateCollection) and by search (a request's override), stored as JSON in `collections.reranker`.

A configuration names a provider, a model, for the HTTP providers a base URL and the *name* of
the environment variable that holds the API key, the number of candidates to re-score and the
time budget. Two rules keep a client from turning search against its operator:

* `api_key_env` must start with `SLUICE_RERANK_`: a client can only make search send a key the
  operator put there for reranking, never another of its secrets (the database URL, say).
* `base_url` must start with one of the operator's `SLUICE_RERANK_ALLOWED_URLS`, so that no key
  is sent to a server the operator did not choose, and search calls no other host.

The key itself is read from search's environment when a request needs it and never stored,
logged or returned. Search runs the rerankers (sluice_search.rerank).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from pydantic_settings import BaseSettings, SettingsConfigDict
from sluice.v1 import collection_pb2

COHERE, JINA, TEI, CROSS_ENCODER = "cohere", "jina", "tei", "cross_encoder"
PROVIDERS = (COHERE, JINA, TEI, CROSS_ENCODER)
HTTP_PROVIDERS = (COHERE, JINA, TEI)
DEFAULT_MODELS = {COHERE: "rerank-v3.5", JINA: "jina-reranker-v2-base-multilingual", TEI: "", CROSS_ENCODER: ""}
DEFAULT_BASE_URLS = {COHERE: "https://api.cohere.com", JINA: "https://api.jina.ai", TEI: "", CROSS_ENCODER: ""}
DEFAULT_KEY_ENVS = {COHERE: "SLUICE_RERANK_COHERE_API_KEY", JINA: "SLUICE_RERANK_JINA_API_KEY", TEI: "", CROSS_ENCODER: ""}
DEFAULT_CANDIDATES = 50
MAX_CANDIDATES = 200
DEFAULT_TIMEOUT_MS = 1000
MAX_TIMEOUT_MS = 60_000
KEY_ENV = re.compile(r"SLUICE_RERANK_[A-Z0-9_]{1,64}")
MODEL_DIRECTORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class RerankSettings(BaseSettings):
    """Where rerankers may be: read by search (which calls them) and by ingest-api (which checks
    a collection's default against the same rules)."""

    model_config = SettingsConfigDict(env_prefix="SLUICE_", extra="ignore")

    # URL prefixes a reranker's base_url must start with (comma-separated); an HTTP reranker
    # anywhere else is refused, so keys go only where the operator chose.
    rerank_allowed_urls: str = "https://api.cohere.com/,https://api.jina.ai/"
    # The directory whose subdirectories are the local cross-encoder models search may load
    # (RERANKER_PROVIDER_CROSS_ENCODER, model = a subdirectory's name); empty: none.
    rerank_model_dir: str = ""

    def allowed_urls(self) -> list[str]:
        return [prefix.strip() for prefix in self.rerank_allowed_urls.split(",") if prefix.strip()]


class RerankerInvalid(ValueError):
    """A configuration that cannot be used; the message says why (INVALID_RERANKER)."""


@dataclass(frozen=True)
class RerankerSpec:
    provider: str
    model: str = ""
    base_url: str = ""
    api_key_env: str = ""
    candidates: int = DEFAULT_CANDIDATES
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any] | None) -> RerankerSpec | None:
        if not value:
            return None
        return cls(**{key: value[key] for key in cls.__dataclass_fields__ if key in value})


def check(
    provider: str,
    model: str = "",
    base_url: str = "",
    api_key_env: str = "",
    candidates: int = 0,
    timeout_ms: int = 0,
    *,
    allowed_urls: list[str] | None = None,
) -> RerankerSpec:
    """The configuration with its defaults filled in, or RerankerInvalid saying what is wrong.
    `allowed_urls` (the operator's prefixes) is checked when given."""
    if provider not in PROVIDERS:
        raise RerankerInvalid(f"unknown reranker provider {provider!r}")
    candidates = candidates or DEFAULT_CANDIDATES
    if not 1 <= candidates <= MAX_CANDIDATES:
        raise RerankerInvalid(
            f"reranker.candidates must be between 1 and {MAX_CANDIDATES} (0 means {DEFAULT_CANDIDATES}); got {candidates}"
        )
    timeout_ms = timeout_ms or DEFAULT_TIMEOUT_MS
    if not 1 <= timeout_ms <= MAX_TIMEOUT_MS:
        raise RerankerInvalid(
            f"reranker.timeout_ms must be between 1 and {MAX_TIMEOUT_MS} (0 means {DEFAULT_TIMEOUT_MS}); got {timeout_ms}"
        )
    model = model.strip() or DEFAULT_MODELS[provider]
    if len(model) > 200:
        raise RerankerInvalid("reranker.model is longer than 200 characters")
    if provider == CROSS_ENCODER:
        if not MODEL_DIRECTORY.fullmatch(model) or model in (".", ".."):
            raise RerankerInvalid(
                "reranker.model must name a model directory inside search's SLUICE_RERANK_MODEL_DIR (letters, digits, "
                f"'.', '_', '-'; no path): got {model[:80]!r}"
            )
        if base_url or api_key_env:
            raise RerankerInvalid("a CROSS_ENCODER reranker runs inside search: it takes no base_url or api_key_env")
    else:
        base_url = (base_url.strip() or DEFAULT_BASE_URLS[provider]).rstrip("/")
        if not base_url:
            raise RerankerInvalid(f"a {provider.upper()} reranker needs a base_url (the server's address, e.g. http://tei:8080)")
        api_key_env = api_key_env.strip() or DEFAULT_KEY_ENVS[provider]
        if api_key_env and not KEY_ENV.fullmatch(api_key_env):
            # Not echoed: a client may have put the key itself here.
            raise RerankerInvalid(
                "reranker.api_key_env must be the NAME of an environment variable of search that starts "
                "with SLUICE_RERANK_ (capitals, digits, '_'), not the key itself"
            )
        check_url(base_url, allowed_urls)
    return RerankerSpec(provider, model, base_url, api_key_env, candidates, timeout_ms)


def check_url(base_url: str, allowed_urls: list[str] | None) -> None:
    if len(base_url) > 512:
        raise RerankerInvalid("reranker.base_url is longer than 512 characters")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RerankerInvalid(f"reranker.base_url must be an http or https URL; got {base_url[:120]!r}")
    if parts.username or parts.password:
        raise RerankerInvalid("reranker.base_url must not hold a user or password: name the key's variable in api_key_env")
    if parts.query or parts.fragment:
        raise RerankerInvalid("reranker.base_url must not have a query or fragment")
    if allowed_urls is not None and not any(
        f"{base_url}/".startswith(prefix if prefix.endswith("/") else prefix + "/") or base_url == prefix.rstrip("/")
        for prefix in allowed_urls
    ):
        raise RerankerInvalid(
            f"reranker.base_url {base_url[:120]!r} is not allowed: search calls only URLs under SLUICE_RERANK_ALLOWED_URLS "
            f"({', '.join(allowed_urls) or 'none'})"
        )


def override(base: RerankerSpec, candidates: int = 0, timeout_ms: int = 0) -> RerankerSpec:
    """The collection's reranker with a request's candidates / timeout_ms where non-zero."""
    spec = replace(base, candidates=candidates or base.candidates, timeout_ms=timeout_ms or base.timeout_ms)
    return check(spec.provider, spec.model, spec.base_url, spec.api_key_env, spec.candidates, spec.timeout_ms)


_TO_PROTO: dict[str, collection_pb2.RerankerProvider.ValueType] = {
    COHERE: collection_pb2.RERANKER_PROVIDER_COHERE,
    JINA: collection_pb2.RERANKER_PROVIDER_JINA,
    TEI: collection_pb2.RERANKER_PROVIDER_TEI,
    CROSS_ENCODER: collection_pb2.RERANKER_PROVIDER_CROSS_ENCODER,
}
_FROM_PROTO = {value: name for name, value in _TO_PROTO.items()}


def from_proto(config: collection_pb2.RerankerConfig, *, allowed_urls: list[str] | None = None) -> RerankerSpec | None:
    """A RerankerConfig checked; None when it names no provider (and sets nothing else)."""
    if config.provider == collection_pb2.RERANKER_PROVIDER_UNSPECIFIED:
        if config.model or config.base_url or config.api_key_env:
            raise RerankerInvalid("reranker.provider is required when a reranker's model, base_url or api_key_env is set")
        return None
    if config.provider not in _FROM_PROTO:
        raise RerankerInvalid(f"unknown reranker provider {config.provider}")
    return check(
        _FROM_PROTO[config.provider],
        config.model,
        config.base_url,
        config.api_key_env,
        config.candidates,
        config.timeout_ms,
        allowed_urls=allowed_urls,
    )


def to_proto(spec: RerankerSpec | None) -> collection_pb2.RerankerConfig | None:
    if spec is None:
        return None
    return collection_pb2.RerankerConfig(
        provider=_TO_PROTO[spec.provider],
        model=spec.model,
        base_url=spec.base_url,
        api_key_env=spec.api_key_env,
        candidates=spec.candidates,
        timeout_ms=spec.timeout_ms,
    )


def provider_proto(name: str) -> collection_pb2.RerankerProvider.ValueType:
    return _TO_PROTO.get(name, collection_pb2.RERANKER_PROVIDER_UNSPECIFIED)


__all__ = [
    "COHERE",
    "CROSS_ENCODER",
    "HTTP_PROVIDERS",
    "JINA",
    "PROVIDERS",
    "TEI",
    "RerankSettings",
    "RerankerInvalid",
    "RerankerSpec",
    "check",
    "check_url",
    "from_proto",
    "override",
    "provider_proto",
    "to_proto",
]
