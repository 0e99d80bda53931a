"""The store's row types: what goes in (New*, ChunkRow) and what comes out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class NewCollection:
    tenant_id: int
    name: str
    description: str
    embedder_provider: str
    embedder_model: str
    dimensions: int
    chunk_max_characters: int
    chunk_new_after_n_chars: int
    chunk_overlap: int
    max_attempts: int


class UploadedContent(Protocol):
    """An upload's bytes, read back in pieces (uploads.SpooledContent): never one bytes object."""

    size: int

    def pieces(self) -> AsyncIterator[bytes]: ...


@dataclass(frozen=True)
class NewDocument:
    tenant_id: int
    collection: str
    filename: str
    mime_type: str
    metadata: dict[str, str]
    request_id: str | None
    content: UploadedContent
    content_sha256: str


@dataclass(frozen=True)
class ChunkRow:
    index: int
    text: str
    page_number: int
    element_type: str
    section_title: str
    text_as_html: str
    embedding: np.ndarray | None
    search_terms: str = ""


@dataclass(frozen=True)
class JobPolicy:
    lease_seconds: float
    retry_delay_seconds: float
    max_retry_delay_seconds: float
