"""Worker settings (SLUICE_* environment variables); defaults fit the embedded run."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict
from sluice_common.embedders import EmbedderSettings
from sluice_common.settings import CommonSettings

if TYPE_CHECKING:
    from sluice_common.tls import ClientTLS


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class WorkerSettings(CommonSettings, EmbedderSettings):
    # A field with an old name besides its own (validation_alias) is still set by its own in code.
    model_config = SettingsConfigDict(validate_by_name=True)

    # ingest-api's JobService; the worker has no database credentials (docs/architecture.md#services).
    ingest_address: str = "localhost:50051"
    # A worker-role API key: JobService accepts nothing else.
    api_key: str = ""
    # Or a file holding it (a mounted secret); used when api_key is empty.
    api_key_file: str = ""
    # TLS to ingest-api: the CA that signed its certificate; a client certificate and key
    # when ingest-api requires mutual TLS. All empty: plaintext (localhost only).
    tls_ca_file: str = ""
    tls_client_cert_file: str = ""
    tls_client_key_file: str = ""
    # A stable name kept in each attempt's history.
    worker_id: str = Field(default_factory=_default_worker_id)
    # Jobs processed at once by this process (each one parse sandbox, one lease).
    worker_concurrency: int = 2
    # ClaimJob long-poll; the server caps it.
    claim_wait_seconds: float = 10.0
    # Pause after ingest-api could not be reached before claiming again.
    claim_error_backoff_seconds: float = 2.0
    # Deadline of one unary JobService call.
    rpc_timeout_seconds: float = 30.0
    # Lease renewal: RenewLease every lease_seconds / lease_renewals_per_lease (a third; rule 6 of
    # docs/architecture.md#the-rules). When this name and its old one are both set, this one wins.
    lease_renewals_per_lease: float = Field(
        default=3.0,
        gt=0.0,
        validation_alias=AliasChoices("SLUICE_LEASE_RENEWALS_PER_LEASE", "SLUICE_HEARTBEAT_DIVISOR"),
    )
    # SIGTERM: in-flight jobs get this long to finish, then they are handed back (ReleaseJob).
    shutdown_grace_seconds: float = 20.0

    # Parsing runs in a separate process with these limits (a hostile file fails, not the worker).
    parse_timeout_seconds: float = 120.0
    parse_memory_limit_mb: int = 2048
    # A sandbox process is replaced after this many documents, to bound memory creep.
    sandbox_max_documents: int = 200
    # The document's own limits: past them it fails permanently.
    max_document_bytes: int = 200 * 1024 * 1024
    max_pages: int = 2000
    # Pixels of one page read by OCR: past it an image fails IMAGE_TOO_LARGE (a PDF page is rendered smaller).
    max_page_pixels: int = 40_000_000
    max_chunks: int = 20000
    # Uncompressed size allowed inside a DOCX/PPTX/EPUB (zip) before it counts as a bomb.
    max_unzipped_bytes: int = 500 * 1024 * 1024

    # Chunking used when a job's ChunkingConfig leaves a value at zero.
    default_chunk_max_characters: int = 1500
    default_chunk_new_after_n_chars: int = 1000

    # Chunks per CompleteJob / SaveSnapshot message.
    chunk_batch_size: int = 256
    # Chunks per embedding call (progress is reported after each call). A remote embedder gets
    # several calls of this size at once, up to its provider's concurrency limit.
    embed_batch_size: int = 64
    # Minimum seconds between two progress reports of one stage.
    progress_interval_seconds: float = 0.5

    def worker_key(self) -> str:
        if self.api_key or not self.api_key_file:
            return self.api_key
        from pathlib import Path

        return Path(self.api_key_file).read_text().strip()

    def client_tls(self) -> ClientTLS:
        from sluice_common.tls import ClientTLS

        return ClientTLS(self.tls_ca_file, self.tls_client_cert_file, self.tls_client_key_file)
