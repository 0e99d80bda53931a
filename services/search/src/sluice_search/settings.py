"""search settings (SLUICE_* environment variables).

Fields of this service are named `search_*` (SLUICE_SEARCH_BIND, SLUICE_SEARCH_DATABASE_URL,
…) so that one environment can configure every service without collisions; the common
ones (SLUICE_DATABASE_URL, SLUICE_LOG_LEVEL, SLUICE_METRICS_PORT, …) are shared.

The search service only reads. Point it at a replica, or at the primary with a role that has
SELECT only, with SLUICE_SEARCH_DATABASE_URL; it falls back to SLUICE_DATABASE_URL. Every
session it opens is read-only whatever the role (`default_transaction_read_only = on`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from sluice_common.settings import CommonSettings


class SearchSettings(CommonSettings):
    search_bind: str = "localhost:50052"
    # Read-only database URL; empty means SLUICE_DATABASE_URL.
    search_database_url: str = ""
    search_pool_min_size: int = 2
    search_pool_max_size: int = 10
    # Seconds a collection's name → (id, embedder, dimensions) lookup is reused.
    search_collection_cache_seconds: float = 5.0
    # HNSW candidate list per query: recall against exact search rises with it (see bench/).
    # 50 (40 until 2026-12-03): at a million chunks x 384 with half the graph not READY,
    # recall@10 0.967 against 0.949 at 40, gRPC p50 9.2 ms (bench/vector_scale_bench.py,
    # docs/scaling.md "Vectors at scale"); at 100k x 384, 40 gave 0.987 at ~3 ms of SQL.
    search_hnsw_ef_search: int = 50
    # Iterative index scans give up after this many tuples; then the exact fallback runs.
    search_hnsw_max_scan_tuples: int = 20000
    # Candidates each side contributes to reciprocal rank fusion in HYBRID mode.
    search_hybrid_candidates: int = 50
    # Reciprocal rank fusion constant (Cormack, Clarke & Büttcher 2009).
    search_rrf_k: int = 60
    # How HYBRID fuses its two lists: "rrf" (ranks) or "relative_score" (min-max normalised
    # scores); fusion.py, and docs/search.md for the measurements behind the default.
    search_fusion: Literal["rrf", "relative_score"] = "relative_score"
    # The vector list's share of the fusion (the keyword list has the rest), 0 to 1.
    search_hybrid_vector_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    # The same for a query written mostly in another script than Latin, against a collection
    # whose local model knows English only (its vectors of such a query are noise).
    search_hybrid_foreign_vector_weight: float = Field(default=0.1, ge=0.0, le=1.0)
    # HYBRID's document context (docs/search.md, "Document context"): the vector side scores a
    # chunk (1 - w) x its cosine similarity + w x its document's (the normalised mean of the
    # document's chunk vectors). 0 turns it off.
    search_hybrid_document_weight: float = Field(default=0.2, ge=0.0, le=1.0)
    # How many nearest chunks the document context rescores (the best of them go to the fusion).
    search_hybrid_document_depth: int = Field(default=50, ge=1, le=1000)
    # Bounds on a request.
    search_max_top_k: int = 100
    search_max_query_characters: int = 4096
    search_max_filter_keys: int = 16
    search_max_filter_values: int = 100
    # Most levels of all_of / any_of in a filter's `where` tree.
    search_max_filter_depth: int = 4
    # Most conditions in a filter's `where` tree.
    search_max_filter_conditions: int = 32
    # A VECTOR search whose filter selects documents holding at most this many chunks is
    # answered exactly from them instead of walking the HNSW graph past the rejected chunks
    # (0 = always walk the graph). bench/search_bench.py measures both sides of it.
    search_exact_filter_max_chunks: int = 2000
    # Above that floor, a large generation scores a filter's chunks exactly while they number at
    # most sqrt(this x ef_search x the generation's chunks): the exact scan grows with the filter's
    # chunks, the walk with the share it rejects (docs/search.md, "Filters"). 0: the floor alone.
    search_exact_filter_walk_cost: float = Field(default=5.0, ge=0.0, le=1000.0)
    # A collection whose index generation is `binary` (docs/search.md, "Vector precision"): how
    # many candidates its Hamming-distance graph proposes, re-scored exactly on the float4
    # vectors, of which the best top_k are the answer (at least top_k).
    search_binary_rescore_candidates: int = 100
    # A search with a consistency_token waits at most this long (and never past its deadline) for
    # a replica to replay that far, then answers UNAVAILABLE (REPLICA_BEHIND); on a primary it
    # never waits (docs/scaling.md#read-replicas-and-the-consistency-token).
    search_consistency_max_wait_seconds: float = Field(default=5.0, ge=0.0)
    # A search statement running longer is cancelled (milliseconds; 0 = no limit).
    search_statement_timeout_ms: int = 10000
    # The reindex quality gate (eval_gate.py; docs/search.md, "Reindexing with a quality gate"):
    # this instance measures reindexes started with an eval set and records the verdicts. It
    # writes one row per verdict, so it must reach the primary: an instance reading a replica
    # turns it off or names the primary in SLUICE_SEARCH_EVAL_GATE_DATABASE_URL.
    search_eval_gate_enabled: bool = True
    # The database the gate lists generations, takes its lock and records verdicts on (as the
    # search role); empty means the search database URL.
    search_eval_gate_database_url: str = ""
    # Seconds between the gate's looks for generations awaiting a verdict, besides waking on
    # every `sluice_collections` notification.
    search_eval_gate_poll_seconds: float = Field(default=5.0, gt=0.0)

    @property
    def bind(self) -> str:
        return self.search_bind

    @property
    def read_database_url(self) -> str:
        return self.search_database_url or self.database_url

    @property
    def eval_gate_database_url(self) -> str:
        return self.search_eval_gate_database_url or self.read_database_url
