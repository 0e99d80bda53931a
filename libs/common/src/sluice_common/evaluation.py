"""Retrieval evaluation: known-item query sets and the metrics of a ranked hit list.

A query set is a JSONL file, one object per line (blank lines are skipped):

    {"id": "ls.1", "query": "list directory contents", "relevant": ["ls.1.txt"], "lang": "en"}

A hit is relevant when its filename, its document_id or its metadata value "source" is one of
`relevant`. The metrics are computed over the hit list as the Search RPC returns it (chunks,
best first; a document may come back more than once):

* hit@k: 1 when a relevant hit is among the first k hits, else 0;
* MRR@10: 1 / the rank of the first relevant hit within the first 10, else 0;
* nDCG@10: binary gains, each relevant label credited once, at the first hit that matches it
  (later chunks of the same document gain nothing), discounted by 1/log2(rank + 1); divided by
  the ideal DCG of min(|relevant|, 10) relevant documents at the top.

Each is averaged over the queries; latencies (seconds), when given, are summarised by their
median (p50, reported in milliseconds). docs/evaluation.md defines them with examples.

Pure Python: no IO but `load_queries` reading its file.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CUTOFF = 10
HIT_AT = (1, 3, 10)
METRICS = ("hit@1", "hit@3", "hit@10", "mrr@10", "ndcg@10")


class QuerySetError(ValueError):
    """A query set that cannot be used; `line` is 1-based (0 when it concerns the whole file)."""

    def __init__(self, path: str | Path, line: int, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Query:
    id: str
    query: str
    relevant: tuple[str, ...]
    lang: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Hit:
    """What the metrics need of a hit: any object with these attributes will do (a SearchHit too)."""

    filename: str = ""
    document_id: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)


def parse_query(obj: Any) -> Query:
    """One query object; raises ValueError naming what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    qid, text, relevant, lang = obj.get("id"), obj.get("query"), obj.get("relevant"), obj.get("lang", "")
    if not isinstance(qid, str) or not qid:
        raise ValueError('"id" must be a non-empty string')
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f'query {qid!r}: "query" must be a non-empty string')
    if not isinstance(relevant, list) or not relevant or not all(isinstance(r, str) and r for r in relevant):
        raise ValueError(f'query {qid!r}: "relevant" must be a non-empty list of strings')
    if not isinstance(lang, str):
        raise ValueError(f'query {qid!r}: "lang" must be a string')
    extra = {k: v for k, v in obj.items() if k not in ("id", "query", "relevant", "lang")}
    return Query(qid, text, tuple(dict.fromkeys(relevant)), lang, extra)


def load_queries(path: str | Path) -> list[Query]:
    """Read a JSONL query set. Raises QuerySetError with the line number of the first bad line,
    or for a missing, unreadable or empty file, or a repeated id."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise QuerySetError(path, 0, "no such file") from None
    except UnicodeDecodeError as err:
        raise QuerySetError(path, 0, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise QuerySetError(path, 0, err.strerror or str(err)) from None
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise QuerySetError(path, number, f"not valid JSON: {err.msg} (column {err.colno})") from None
        try:
            query = parse_query(obj)
        except ValueError as err:
            raise QuerySetError(path, number, str(err)) from None
        if query.id in seen:
            raise QuerySetError(path, number, f"query id {query.id!r} repeats line {seen[query.id]}")
        seen[query.id] = number
        queries.append(query)
    if not queries:
        raise QuerySetError(path, 0, "no queries in the file")
    return queries


def hit_labels(hit: Any) -> set[str]:
    """The names under which a hit can be relevant: filename, document_id, metadata["source"]."""
    labels = {getattr(hit, "filename", ""), getattr(hit, "document_id", "")}
    metadata = getattr(hit, "metadata", None)
    if metadata is not None and "source" in metadata:
        labels.add(metadata["source"])
    labels.discard("")
    return labels


def judge(hits: Sequence[Any], relevant: Iterable[str], cutoff: int = CUTOFF) -> list[bool]:
    """For the first `cutoff` hits: does each one bring a relevant label not credited before?

    A relevant document that comes back as several chunks is credited at its first chunk only."""
    wanted = set(relevant)
    credited: set[str] = set()
    gains: list[bool] = []
    for hit in hits[:cutoff]:
        new = (hit_labels(hit) & wanted) - credited
        credited |= new
        gains.append(bool(new))
    return gains


@dataclass(frozen=True)
class QueryResult:
    hit_at: Mapping[int, float]
    mrr: float
    ndcg: float

    def as_dict(self) -> dict[str, float]:
        return {**{f"hit@{k}": v for k, v in self.hit_at.items()}, "mrr@10": self.mrr, "ndcg@10": self.ndcg}


def score(hits: Sequence[Any], relevant: Sequence[str], cutoff: int = CUTOFF) -> QueryResult:
    """The metrics of one query's ranked hits (best first)."""
    gains = judge(hits, relevant, cutoff)
    first = next((rank for rank, gain in enumerate(gains, start=1) if gain), None)
    hit_at = {k: 1.0 if first is not None and first <= k else 0.0 for k in HIT_AT}
    dcg = sum(1.0 / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1) if gain)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(set(relevant)), cutoff) + 1))
    return QueryResult(hit_at, 1.0 / first if first else 0.0, dcg / ideal if ideal else 0.0)


@dataclass(frozen=True)
class Summary:
    queries: int
    metrics: Mapping[str, float]
    p50_ms: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"queries": self.queries, **self.metrics, "p50_ms": self.p50_ms}


def summarize(results: Sequence[QueryResult], latencies: Sequence[float] | None = None) -> Summary:
    """Means over queries; p50 of `latencies` (seconds) in milliseconds when given."""
    if not results:
        return Summary(0, {name: 0.0 for name in METRICS}, None)
    rows = [r.as_dict() for r in results]
    metrics = {name: sum(row[name] for row in rows) / len(rows) for name in METRICS}
    p50 = statistics.median(latencies) * 1000 if latencies else None
    return Summary(len(results), metrics, p50)


def evaluate(
    queries: Sequence[Query], ranked: Mapping[str, Sequence[Any]], latencies: Mapping[str, float] | None = None
) -> Summary:
    """Score every query against its hits (`ranked[query.id]`, missing = no hits) and summarise."""
    results = [score(ranked.get(q.id, ()), q.relevant) for q in queries]
    times = [latencies[q.id] for q in queries if q.id in latencies] if latencies else None
    return summarize(results, times)
