"""Use cases of a document's chunks and bytes (docs/chunks.md): ListChunks, UpdateChunk (disable,
enable, edit with an inline re-embedding) and DownloadDocument."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import NoReturn

import numpy as np
from sluice_common.embedders import Embedder, EmbeddingError, get_embedder
from sluice_common.errors import Aborted, InvalidArgument, Unavailable
from sluice_common.reasons import Reason

from .. import metrics
from ..arguments import decode_token, encode_token, page_size_of, parse_id
from ..domain import safe_error_message
from ..ports import ChunksPort
from ..store.chunks import ChunkCopy, ChunkTarget, DocumentChunkRow, chunk_not_found
from ..store.rows import DocumentRow

log = logging.getLogger("sluice.ingest")

MAX_CHUNK_TEXT = 100_000
CONTENT_SLICE = 1024 * 1024  # as JobService's ReadDocumentContent

EmbedderFactory = Callable[[str, str, int], Embedder]


def parse_chunk_id(value: str) -> int:
    """A chunk id (DocumentChunk.id, SearchHit.chunk_id): a positive integer."""
    if not value:
        raise InvalidArgument("chunk id is required", reason=Reason.MISSING_ID)
    if not value.isascii() or not value.isdigit() or not 0 < int(value) < 2**63:
        raise InvalidArgument(f"chunk id {value[:80]!r} is not a valid chunk id", reason=Reason.INVALID_ID)
    return int(value)


def check_chunk_text(text: str) -> str:
    if "\x00" in text:
        raise InvalidArgument("the chunk's text contains a NUL character", reason=Reason.NUL_CHARACTER)
    if not text.strip():
        raise InvalidArgument("the chunk's text is empty", reason=Reason.INVALID_CHUNK_TEXT)
    if len(text) > MAX_CHUNK_TEXT:
        raise InvalidArgument(
            f"the chunk's text has {len(text)} characters; at most {MAX_CHUNK_TEXT} are allowed", reason=Reason.INVALID_CHUNK_TEXT
        )
    return text


class ChunkUseCases:
    def __init__(self, chunks: ChunksPort, embedder_for: EmbedderFactory = get_embedder) -> None:
        self.chunks = chunks
        self.embedder_for = embedder_for

    async def list_chunks(
        self, tenant_id: int, document_id: str, page_size: int, page_token: str, generation: int
    ) -> tuple[list[DocumentChunkRow], str, int, int]:
        """(chunks, next_page_token, total_size, generation number)."""
        doc_id = parse_id(document_id)
        if generation < 0:
            raise InvalidArgument(
                "generation must be 0 (the ACTIVE one) or a generation's number", reason=Reason.INVALID_GENERATION
            )
        limit = page_size_of(page_size)
        filters = f"{doc_id}|{generation}"
        token = decode_token(page_token, filters)
        after = -1
        if token:
            after = token.get("i", -1)
            if not isinstance(after, int) or after < 0:
                raise InvalidArgument("page_token is not valid", reason=Reason.INVALID_PAGE_TOKEN)
        rows, total, number = await self.chunks.list_chunks(tenant_id, doc_id, generation, after, limit + 1)
        next_token = ""
        if len(rows) > limit:
            next_token = encode_token({"f": filters, "i": rows[limit - 1].chunk_index})
        return rows[:limit], next_token, total, number

    async def update_chunk(
        self,
        tenant_id: int,
        chunk_id: str,
        enabled: bool | None,
        text: str | None,
        etag: str,
        scope: frozenset[str] | None = None,
    ) -> DocumentChunkRow:
        """Read the chunk's copies, embed new text outside any transaction (each generation with
        its own embedder), then write every copy in one transaction that refuses if any changed."""
        if enabled is None and text is None:
            raise InvalidArgument("give `enabled`, `text` or both: this request changes nothing", reason=Reason.NOTHING_TO_UPDATE)
        number = parse_chunk_id(chunk_id)
        if text is not None:
            text = check_chunk_text(text)
        await self.require_chunk_visible(tenant_id, chunk_id, scope)
        target = await self.chunks.chunk_target(tenant_id, number)
        named = target.named
        if etag and etag != named.etag:
            raise_changed()
        if text is None and all(copy.enabled == enabled for copy in target.copies):
            # Already as asked (a retried call): nothing to write, the etag stays.
            return await self._current(tenant_id, target)
        terms = ""
        vectors: dict[int, np.ndarray] = {}
        if text is not None:
            from sluice_common.textsearch import search_terms  # loads jieba: imported when first needed, as jobs.py does

            terms = await asyncio.to_thread(search_terms, text)
            vectors = await self._embed(text, target.copies)
        row = await self.chunks.apply_update(tenant_id, target, enabled, text, terms, vectors)
        if text is not None:
            metrics.CHUNK_UPDATES.labels("edit").inc()
        if enabled is not None and any(copy.enabled != enabled for copy in target.copies):
            metrics.CHUNK_UPDATES.labels("enable" if enabled else "disable").inc()
        log.info(
            "chunk updated",
            extra={
                "document_id": str(target.document_id),
                "chunk_index": target.chunk_index,
                "generations": [c.generation for c in target.copies],
                "enabled": row.enabled,
                "edited": text is not None,
            },
        )
        return row

    async def _current(self, tenant_id: int, target: ChunkTarget) -> DocumentChunkRow:
        rows, _, _ = await self.chunks.list_chunks(
            tenant_id, target.document_id, target.named.generation, target.chunk_index - 1, 1
        )
        if not rows or rows[0].id != target.named.id:
            raise_changed()
        return rows[0]

    async def _embed(self, text: str, copies: tuple[ChunkCopy, ...]) -> dict[int, np.ndarray]:
        """The text's vector in each generation, by generation id (one call per embedder)."""
        by_embedder: dict[tuple[str, str, int], np.ndarray] = {}
        vectors: dict[int, np.ndarray] = {}
        for copy in copies:
            key = (copy.embedder_provider, copy.embedder_model, copy.dimensions)
            if key not in by_embedder:
                by_embedder[key] = await self._embed_one(text, *key)
            vectors[copy.generation_id] = by_embedder[key]
        return vectors

    async def _embed_one(self, text: str, provider: str, model: str, dimensions: int) -> np.ndarray:
        try:
            embedder = self.embedder_for(provider, model, dimensions)
            (vector,) = await embedder.embed_documents([text])
        except EmbeddingError as err:
            if not err.retryable:
                raise InvalidArgument(
                    f"the embedder {provider}/{model} refused the text: {safe_error_message(err.message)}",
                    reason=Reason.INVALID_CHUNK_TEXT,
                ) from None
            raise Unavailable(
                f"the embedder {provider}/{model} could not embed the text, nothing was changed; try again:"
                f" {safe_error_message(err.message)}",
                reason=Reason.EMBEDDER_UNAVAILABLE,
            ) from None
        except Exception as err:  # a model that does not load, a provider misconfigured
            log.warning("chunk embedding failed", extra={"provider": provider, "model": model, "detail": repr(err)[:500]})
            raise Unavailable(
                f"the embedder {provider}/{model} is not available here, nothing was changed", reason=Reason.EMBEDDER_UNAVAILABLE
            ) from None
        array = np.asarray(vector, dtype=np.float32)
        if array.shape != (dimensions,) or not np.isfinite(array).all():
            raise Unavailable(
                f"the embedder {provider}/{model} answered with an unusable vector, nothing was changed",
                reason=Reason.EMBEDDER_UNAVAILABLE,
            )
        return array

    async def require_chunk_visible(self, tenant_id: int, chunk_id: str, scope: frozenset[str] | None) -> None:
        """For a scoped key (docs/tenancy.md, "Scoped keys"): a chunk of a collection outside
        `scope` answers NOT_FOUND as a missing one; an unscoped key (None) costs no read."""
        if scope is None:
            return
        number = parse_chunk_id(chunk_id)
        collection = await self.chunks.chunk_collection(tenant_id, number)
        if collection is not None and collection not in scope:
            raise chunk_not_found(number)

    async def download(self, tenant_id: int, document_id: str) -> tuple[DocumentRow, AsyncIterator[bytes]]:
        """The document (for the header) and its bytes, read a slice at a time."""
        doc_id = parse_id(document_id)
        document = await self.chunks.document_for_download(tenant_id, doc_id)

        async def pieces() -> AsyncIterator[bytes]:
            for offset in range(0, document.size_bytes, CONTENT_SLICE):
                yield await self.chunks.content_slice(tenant_id, doc_id, offset, CONTENT_SLICE)

        return document, pieces()


def raise_changed() -> NoReturn:
    raise Aborted("the chunk changed since that etag was read; read it again", reason=Reason.CHUNK_CHANGED)


__all__ = ["ChunkUseCases", "EmbedderFactory", "check_chunk_text", "parse_chunk_id"]
