"""What the sync and the asyncio client share: settings, call metadata, requests, tracking state."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from . import config
from .errors import SluiceError
from .filters import where as where_filter
from .protos import collection_pb2, document_pb2, document_service_pb2, search_service_pb2
from .retry import Pacer, RetryPolicy
from .types import Document, DocumentStatus, Embedder, SearchMode

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
TENANT_HEADER = "x-sluice-tenant"
PAGE_SIZE = 1000  # the largest page the servers give
# Targets that name their resolver get per-call balancing over every address (Kubernetes
# headless Services); a plain host:port keeps gRPC's pick_first.
_BALANCED_SCHEMES = ("dns:", "ipv4:", "ipv6:")
# The provider of each Embedder name.
_PROVIDERS = {
    Embedder.HASHING: collection_pb2.EMBEDDER_PROVIDER_HASHING,
    Embedder.LOCAL: collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS,
    Embedder.OPENAI: collection_pb2.EMBEDDER_PROVIDER_OPENAI,
    Embedder.UNSPECIFIED: collection_pb2.EMBEDDER_PROVIDER_UNSPECIFIED,
}


class Settings:
    """A client's resolved configuration (config.py says where each value comes from)."""

    def __init__(
        self,
        address: str | None,
        *,
        search_address: str | None,
        api_key: str | None,
        tls: config.TLS | None,
        ca_file: str | None,
        cert_file: str | None,
        key_file: str | None,
        tenant: str | None,
        timeout: float,
        retry: RetryPolicy | None,
        max_calls_per_second: float | None,
        channel_options: Iterable[tuple[str, Any]] | None,
        request_id_prefix: str,
    ) -> None:
        self.ingest_address = config.ingest_address(address)
        self.search_address = config.search_address(search_address)
        self.keys = config.resolve_keys(api_key)
        self.tls = tls or config.TLS.resolve(ca_file, cert_file, key_file)
        self.tenant = tenant if tenant is not None else os.environ.get("SLUICE_TENANT", "")
        self.policy = dataclasses.replace(retry, timeout=timeout) if retry else RetryPolicy(timeout=timeout)
        self.pacer = Pacer(max_calls_per_second)
        self.request_id_prefix = request_id_prefix
        self.extra_options = list(channel_options or ())
        extra = ((TENANT_HEADER, self.tenant),) if self.tenant else ()
        self.metadata = (("authorization", f"Bearer {self.keys.client}"), *extra) if self.keys.client else extra
        self.admin_metadata = (("authorization", f"Bearer {self.keys.admin}"), *extra) if self.keys.admin else extra

    def channel_options(self, address: str) -> list[tuple[str, Any]]:
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            # Fail fast when nothing listens: the SDK retries by itself, with its own backoff.
            ("grpc.initial_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 1000),
            *self.extra_options,
        ]
        chosen = any(name in ("grpc.lb_policy_name", "grpc.service_config") for name, _ in options)
        if address.startswith(_BALANCED_SCHEMES) and not chosen:
            options.append(("grpc.lb_policy_name", "round_robin"))
        return options


# ------------------------------------------------------------------ requests


def embedder_config(embedder: Embedder | str | None, model: str, dimensions: int) -> collection_pb2.EmbedderConfig:
    return collection_pb2.EmbedderConfig(
        provider=_PROVIDERS[Embedder.of(embedder)], model=model or "", dimensions=dimensions or 0
    )


def create_collection_request(
    name: str,
    *,
    embedder: Embedder | str | None,
    model: str,
    dimensions: int,
    chunk_size: int | None,
    overlap: int | None,
    max_attempts: int | None,
    description: str,
    reranker: collection_pb2.RerankerConfig | None,
    vector_precision: str = "",
) -> document_service_pb2.CreateCollectionRequest:
    chunking = collection_pb2.ChunkingConfig()
    if chunk_size:
        chunking.max_characters = chunk_size
        # unstructured closes a chunk softly at new_after_n_chars, hard at max_characters.
        chunking.new_after_n_chars = max(1, chunk_size * 2 // 3)
    if overlap is not None:
        chunking.overlap = overlap
    collection = collection_pb2.Collection(
        name=name,
        description=description or "",
        embedder=embedder_config(embedder, model, dimensions),
        chunking=chunking,
        max_attempts=max_attempts or 0,
    )
    if reranker is not None:
        collection.reranker.CopyFrom(reranker)
    if vector_precision:
        collection.vector_precision = vector_precision_of(vector_precision)
    return document_service_pb2.CreateCollectionRequest(collection=collection)


_PRECISIONS: dict[str, collection_pb2.VectorPrecision.ValueType] = {
    "float4": collection_pb2.VECTOR_PRECISION_FLOAT4,
    "halfvec": collection_pb2.VECTOR_PRECISION_HALFVEC,
    "binary": collection_pb2.VECTOR_PRECISION_BINARY,
}


def vector_precision_of(name: str) -> collection_pb2.VectorPrecision.ValueType:
    """ "float4", "halfvec" or "binary" (any case) as a VectorPrecision; ValueError otherwise."""
    try:
        return _PRECISIONS[name.lower()]
    except KeyError:
        raise ValueError(f"vector precision {name!r} is not one of float4, halfvec, binary") from None


def search_request(
    collection: str,
    query: str,
    *,
    top_k: int,
    mode: SearchMode | str | None,
    filter: Mapping[str, str] | None,
    where: Any,
    filenames: Iterable[str] | None,
    document_ids: Iterable[str] | None,
    neighbors: int,
    max_per_document: int,
    min_score: float | None,
    rerank: bool | None,
    query_vector: Iterable[float] | None,
    consistency_token: str = "",
    explain: bool = False,
    generation: int = 0,
) -> search_service_pb2.SearchRequest:
    request = search_service_pb2.SearchRequest(
        collection=collection,
        query=query or "",
        top_k=top_k,
        mode=SearchMode.of(mode).value,  # type: ignore[arg-type]
        consistency_token=consistency_token or "",
        explain=explain,
        generation=generation or 0,
    )
    if query_vector is not None:
        request.query_vector.extend(query_vector)
    if filter:
        request.filter.metadata.update(filter)
    if filenames:
        request.filter.filenames.extend(filenames)
    if document_ids:
        request.filter.document_ids.extend(document_ids)
    condition = where_filter(where)
    if condition is not None:
        request.filter.where.CopyFrom(condition)
    if neighbors:
        request.neighbor_chunks = neighbors
    if max_per_document:
        request.max_hits_per_document = max_per_document
    if min_score is not None:
        request.min_score = min_score
    if rerank is False:
        request.rerank.disabled = True
    return request


def list_documents_request(
    collection: str | None,
    status: DocumentStatus | str | int | None,
    page_size: int,
    page_token: str,
    source_uri: str | None = None,
) -> document_service_pb2.ListDocumentsRequest:
    return document_service_pb2.ListDocumentsRequest(
        collection=collection or "",
        page_size=page_size,
        page_token=page_token,
        status=DocumentStatus.of(status).value,  # type: ignore[arg-type]
        source_uri=source_uri or "",
    )


def update_chunk_request(
    chunk_id: str, *, enabled: bool | None = None, text: str | None = None, etag: str | None = None
) -> document_service_pb2.UpdateChunkRequest:
    """UpdateChunk's request: `enabled` and `text` are proto3 optional, so only what is given is sent
    (an unset field leaves the chunk as it is)."""
    if not chunk_id:
        raise ValueError("a chunk id is required (Chunk.id, or a search hit's chunk_id)")
    request = document_service_pb2.UpdateChunkRequest(chunk_id=chunk_id, etag=etag or "")
    if enabled is not None:
        request.enabled = enabled
    if text is not None:
        request.text = text
    return request


def document_key(document_id: str | None, collection: str | None, source_uri: str | None) -> dict[str, str]:
    """GetDocument's and DeleteDocument's way of naming a document: its id, or its collection
    and source_uri (a source's current version; for a deletion, every version)."""
    if source_uri:
        if document_id or not collection:
            raise ValueError("name a document by its id, or by collection= and source_uri=")
        return {"collection": collection, "source_uri": source_uri}
    if not document_id:
        raise ValueError("a document id (or collection= and source_uri=) is required")
    return {"id": document_id}


def upload_identity(identity: str, source_uri: str | None) -> str:
    """What the default request_id is derived from: a version of a source is its own request."""
    return identity + ("\0" + source_uri if source_uri else "")


# ------------------------------------------------------------------ many documents at once


# What changes over a document's life. A collection event carries the whole document, but a
# deletion's (its row is gone) and an older server's carry only these and no create_time: laid
# over the fuller state already known, they keep its description (metadata, size, hash, source).
_STATE_FIELDS = (
    "status",
    "error_message",
    "error_code",
    "attempts",
    "max_attempts",
    "chunk_count",
    "job_status",
    "consistency_token",
)
_STATE_MESSAGES: tuple[Literal["progress", "update_time", "next_attempt_time"], ...] = (
    "progress",
    "update_time",
    "next_attempt_time",
)


def _newer(known: Document | None, other: Document) -> Document:
    """The later of two states of one document (the one received last when the times tie); a
    later state from an event keeps the description of the fuller earlier one."""
    if known is None:
        return other
    if known.update_time is not None and other.update_time is not None and other.update_time < known.update_time:
        newer, base = known, other
    else:
        newer, base = other, known
    if newer.raw.HasField("create_time") or not base.raw.HasField("create_time"):
        return newer
    raw = document_pb2.Document()
    raw.CopyFrom(base.raw)
    for name in _STATE_FIELDS:
        setattr(raw, name, getattr(newer.raw, name))
    for name in _STATE_MESSAGES:
        if newer.raw.HasField(name):
            getattr(raw, name).CopyFrom(getattr(newer.raw, name))
        else:
            raw.ClearField(name)
    return Document.from_proto(raw)


def deleted(document: Document) -> Document:
    """A tracked document that was deleted meanwhile: FAILED here, with the reason (client side)."""
    raw = document_pb2.Document()
    raw.CopyFrom(document.raw)
    raw.status = document_pb2.DOCUMENT_STATUS_FAILED
    raw.error_code = "DELETED"
    raw.error_message = "the document was deleted while it was being waited for"
    return Document.from_proto(raw)


class TrackedDocuments:
    """The states of the documents a bulk job waits for, fed by collection events, upload answers
    and listings in whatever order they arrive. Not thread-safe: its owner locks."""

    # Events of documents nobody tracks yet are kept (an upload's answer can arrive after the
    # events of its document), up to this many.
    MAX_UNCLAIMED = 200_000

    def __init__(self) -> None:
        self.documents: dict[str, Document] = {}
        self._unclaimed: dict[str, Document] = {}

    def track(self, document: Document) -> Document:
        state = _newer(self._unclaimed.pop(document.id, None), document)
        state = _newer(self.documents.get(document.id), state)
        self.documents[document.id] = state
        return state

    def apply(self, document: Document) -> Document | None:
        """A state from an event or a listing; the new state when it changes a tracked document."""
        known = self.documents.get(document.id)
        if known is None:
            if len(self._unclaimed) >= self.MAX_UNCLAIMED:
                self._unclaimed.clear()
            self._unclaimed[document.id] = _newer(self._unclaimed.get(document.id), document)
            return None
        state = _newer(known, document)
        if state is known or state.raw == known.raw:
            return None
        self.documents[document.id] = state
        return state

    def remove(self, document: Document) -> Document | None:
        """A deletion event: the tracked document ends (as deleted)."""
        self._unclaimed.pop(document.id, None)
        known = self.documents.get(document.id)
        if known is None or known.done:
            return None
        state = deleted(known)
        self.documents[document.id] = state
        return state

    def pending(self) -> list[Document]:
        return [d for d in self.documents.values() if not d.done]

    @property
    def all_done(self) -> bool:
        return all(d.done for d in self.documents.values())


def timeout_error(documents: list[Document]) -> SluiceError:
    from .errors import WaitTimeout

    waiting = [d for d in documents if not d.done]
    if len(waiting) == 1:
        d = waiting[0]
        message = f"timed out waiting for {d.filename or d.id} (still {d.status.name})"
    else:
        message = f"timed out waiting for {len(waiting)} documents (still processing on the server)"
    return WaitTimeout(message, documents=documents)


__all__ = ["PAGE_SIZE", "Settings", "TrackedDocuments"]


def reindex_collection_request(
    name: str,
    embedder: Embedder | str,
    model: str,
    dimensions: int,
    eval_queries: Iterable[Mapping[str, Any]],
    min_ratio: float,
) -> document_service_pb2.ReindexCollectionRequest:
    """ReindexCollection's request, for both clients (Collections.reindex says what it does)."""
    queries = [
        document_service_pb2.EvalQuery(query=q["query"], relevant=list(q["relevant"]), id=q.get("id", "")) for q in eval_queries
    ]
    return document_service_pb2.ReindexCollectionRequest(
        name=name, embedder=embedder_config(embedder, model, dimensions), eval_queries=queries, min_ratio=min_ratio
    )
