"""The rows search's statements return: one dataclass per shape, read by column name.

A statement names its columns (`AS` where PostgreSQL's own name would not do), and the dataclass
of its shape declares the same names in the same order. `named(cls)` compares the two once per
statement and then builds each row from its values: a column renamed, added or moved without its
dataclass fails the statement (ProgrammingError) instead of shifting every field after it.
psycopg's class_row reads by name too, but builds a dict for every row and reads the names through
`cursor.description`: reading 10 hits (statement and decoding, in-process, medians in turns on a
loaded machine) cost 6 us more than tuple rows this way, 41 us more with class_row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import pq, sql
from psycopg.rows import BaseRowFactory, RowMaker, no_result
from sluice_common.reranking import RerankerSpec

from . import explain
from .domain import Collection, Hit

T = TypeVar("T")
_ROWS = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.SINGLE_TUPLE, pq.ExecStatus.TUPLES_CHUNK)
# What a statement can be given as (psycopg.abc.Query, without templates).
Statement = sql.SQL | sql.Composed | bytes | str


_FIELDS: dict[type[Any], tuple[str, ...]] = {}


def fields(cls: type[Any]) -> tuple[str, ...]:
    """The names of a row dataclass's fields, in order."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def column_names(cursor: Any) -> tuple[str, ...] | None:
    """The names of the columns of the cursor's result; None without rows (a SET, a BEGIN). Read
    from the result itself: `cursor.description` makes a Column object per column and statement."""
    result = cursor.pgresult
    if result is None or result.status not in _ROWS:
        return None
    return tuple(result.fname(i).decode() for i in range(result.nfields))


def check_names(names: Sequence[str], expected: Sequence[str], shape: str) -> None:
    if tuple(names) != tuple(expected):
        raise psycopg.ProgrammingError(f"the statement's columns {list(names)} are not {shape}'s {list(expected)}")


def named(cls: type[T]) -> BaseRowFactory[T]:
    """A row factory: each row as a `cls`, whose fields are the statement's columns by name."""
    expected = fields(cls)

    def factory(cursor: Any) -> RowMaker[T]:
        names = column_names(cursor)
        if names is None:
            return no_result
        check_names(names, expected, cls.__name__)
        return lambda values: cls(*values)

    return factory


async def fetch(conn: psycopg.AsyncConnection, query: Statement, params: Any, factory: BaseRowFactory[T]) -> list[T]:
    """Every row of one statement, made by `factory` (named(cls), filtered(cls))."""
    cursor = conn.cursor(row_factory=factory)
    await cursor.execute(query, params)
    return await cursor.fetchall()


async def fetch_one(conn: psycopg.AsyncConnection, query: Statement, params: Any, factory: BaseRowFactory[T]) -> T | None:
    """The first row of one statement, made by `factory`, or None."""
    cursor = conn.cursor(row_factory=factory)
    await cursor.execute(query, params)
    return await cursor.fetchone()


# ------------------------------------------------------------ collections


@dataclass(slots=True)
class CollectionRow:
    """A collection resolved to one of its generations (collection_sql.py)."""

    id: int
    name: str
    embedder_provider: str
    embedder_model: str
    dimensions: int
    tenant_id: int
    generation_id: int
    generation: int
    chunk_overlap: int
    vector_precision: str
    reranker: Any  # collections.reranker, JSON

    def collection(self) -> Collection:
        return Collection(
            self.id,
            self.name,
            self.embedder_provider,
            self.embedder_model,
            self.dimensions,
            self.tenant_id,
            self.generation_id,
            self.generation,
            self.chunk_overlap,
            reranker=RerankerSpec.from_json(self.reranker),
            vector_precision=self.vector_precision,
        )


@dataclass(slots=True)
class NumberedCollectionRow(CollectionRow):
    """A collection and its generation of a given number, whatever its state. The generation's
    columns, `state` with them, are NULL when the collection has no such generation (a LEFT JOIN;
    `state` is NOT NULL in the table)."""

    state: str | None


@dataclass(slots=True)
class EmbedderRow:
    """An embedder some collection uses (sluice_embedders_in_use(), migration 0004)."""

    provider: str
    model: str
    dimensions: int


# ------------------------------------------------------------ hits

# A hit's columns, over `chunks c` and `documents d`: HitRow's fields.
HIT_COLUMNS = sql.SQL(
    "c.id, c.text, d.id::text AS document_id, d.filename, c.chunk_index, c.page_number, c.element_type, d.metadata,"
    " c.text_as_html, c.text_source, c.ocr_confidence, c.boxes"
)
# HYBRID's candidates are ranked on ids and scores alone; only the fused answer's rows are read
# whole (hits_by_id): fusing 2 x 50 candidates into 10 reads no text, metadata or boxes for 90.
ID_COLUMNS = sql.SQL("c.id")
# The vector side of HYBRID with document context reads each candidate's document too
# (vector_sql.with_document_similarity).
ID_DOCUMENT_COLUMNS = sql.SQL("c.id, c.document_id")
# An explained KEYWORD search reads the hit's BM25 vector (KeywordWordsHitRow).
BM25_COLUMN = sql.SQL(", c.search_bm25")
# An explained VECTOR search's two more columns (VectorWordsHitRow): the hit's BM25 vector, and
# the query's words as the index stems them (%(kw_text)s, an InitPlan computed once).
WORD_COLUMNS = sql.SQL(
    ", c.search_bm25, (SELECT coalesce(array_agg(l.lexeme ORDER BY l.lexeme COLLATE \"C\"), '{}')"
    " FROM unnest(to_tsvector('sluice_text', %(kw_text)s)) l) AS query_words"
)


@dataclass(slots=True)
class HitRow:
    """A chunk as a hit (HIT_COLUMNS): HYBRID's fused answer (chunk_sql.hits_by_id_query)."""

    id: int
    text: str
    document_id: str
    filename: str
    chunk_index: int
    page_number: int
    element_type: str
    metadata: dict[str, Any] | None
    text_as_html: str | None
    text_source: str | None
    ocr_confidence: float | None
    boxes: list[dict[str, Any]] | None

    def hit(self, score: float) -> Hit:
        return Hit(
            chunk_id=self.id,
            text=self.text,
            score=score,
            document_id=self.document_id,
            filename=self.filename,
            chunk_index=self.chunk_index,
            page_number=self.page_number,
            element_type=self.element_type,
            metadata=dict(self.metadata or {}),
            text_as_html=self.text_as_html or "",
            text_source=self.text_source or "",
            ocr_confidence=float(self.ocr_confidence or 0.0),
            boxes=list(self.boxes or ()),
        )


@dataclass(slots=True)
class ExplainedHitRow(HitRow):
    """A hit and what an explanation reads of it (explain_sql.explain_columns)."""

    held_words: list[int] | None  # the indexes (from 1) of the words held
    keyword_score: float | None
    vector_distance: float | None

    def details(self, words: Sequence[str]) -> explain.Details:
        """explain.Details of the hit; `words` are the words `held_words` indexes name."""
        return explain.Details(
            # + 0.0: a chunk without the query's words scores -(0), which is -0.0
            keyword_score=None if self.keyword_score is None else float(self.keyword_score) + 0.0,
            vector_similarity=None if self.vector_distance is None else 1.0 - float(self.vector_distance),
            matched_terms=[words[i - 1] for i in self.held_words or ()],
        )


@dataclass(slots=True)
class VectorHitRow(HitRow):
    """A hit of a VECTOR statement (vector_sql), with its exact cosine distance to the query."""

    distance: float


@dataclass(slots=True)
class VectorWordsHitRow(HitRow):
    """A hit of an explained VECTOR statement (WORD_COLUMNS), then its distance."""

    search_bm25: Any  # pgvector SparseVector, or None
    query_words: list[str] | None
    distance: float


@dataclass(slots=True)
class KeywordHitRow(HitRow):
    """A hit of a KEYWORD statement (keyword.py), with its BM25 score."""

    rank: float


@dataclass(slots=True)
class KeywordWordsHitRow(HitRow):
    """A hit of an explained KEYWORD statement (BM25_COLUMN), then its BM25 score."""

    search_bm25: Any  # pgvector SparseVector, or None
    rank: float


@dataclass(slots=True)
class VectorCandidateRow:
    """HYBRID's vector candidate (ID_COLUMNS)."""

    id: int
    distance: float


@dataclass(slots=True)
class DocumentCandidateRow:
    """HYBRID's vector candidate with document context (ID_DOCUMENT_COLUMNS,
    vector_sql.with_document_similarity): NULL similarity for a document without a vector."""

    id: int
    document_id: Any  # uuid
    distance: float
    document_similarity: float | None


@dataclass(slots=True)
class KeywordCandidateRow:
    """HYBRID's keyword candidate (ID_COLUMNS)."""

    id: int
    rank: float


@dataclass(slots=True)
class ChunkTextRow:
    """A neighbour's text (chunk_sql.chunk_texts_query)."""

    document_id: str
    chunk_index: int
    text: str


# ------------------------------------------------------------ a selective filter's statement


@dataclass(slots=True)
class FilteredRow(Generic[T]):
    """A row of vector_sql.selective_vector_query: the filter's READY documents, their chunks and
    the cap, then one of the exact plan's rows (None: one row of NULLs, too many chunks)."""

    documents: int
    chunks: int
    cap: int
    row: T | None


FILTER_COUNTS = ("documents", "chunks", "cap")


def filtered(cls: type[T]) -> BaseRowFactory[FilteredRow[T]]:
    """A row factory for selective_vector_query's rows whose hit columns are `cls`'s."""
    expected = fields(cls)

    def wrap(values: Sequence[Any]) -> FilteredRow[T]:
        return FilteredRow(values[0], values[1], values[2], None if values[3] is None else cls(*values[3:]))

    def factory(cursor: Any) -> RowMaker[FilteredRow[T]]:
        names = column_names(cursor)
        if names is None:
            return no_result
        check_names(names, (*FILTER_COUNTS, *expected), f"FilteredRow[{cls.__name__}]")
        return wrap

    return factory
