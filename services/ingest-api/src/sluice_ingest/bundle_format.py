"""The collection bundle's format (docs/bundles.md), version 1.

A bundle is an uncompressed tar (GNU headers) of, in this order:

- `manifest.json`: the format and its version, the schema head it was exported from, the
  collection's settings, its ACTIVE generation's embedder and precision, the generations' history,
  the counts, and the size and SHA-256 of every table member;
- the table members, Parquet files (zstd inside, row groups of ROW_GROUP_ROWS rows):
  `documents.parquet`, `versions.parquet`, `chunks.parquet`, `disabled_chunks.parquet`,
  `eval_sets.parquet`, with the columns of the schemas below;
- the originals, one member each, named `originals/<SHA-256 of its bytes>`: a member checks
  itself, and documents with the same bytes share it.

Reading never holds a member whole: the tar is read as a stream (`TarReader`), a table member is
written to a file while it is hashed and only then read by row group, and an original goes on to
PostgreSQL piece by piece. This module knows no database and no gRPC.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import tarfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sluice_common.errors import InvalidArgument
from sluice_common.reasons import Reason

FORMAT = "sluice-collection-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MANIFEST_MAX_BYTES = 1024 * 1024
DOCUMENTS = "documents.parquet"
VERSIONS = "versions.parquet"
CHUNKS = "chunks.parquet"
DISABLED_CHUNKS = "disabled_chunks.parquet"
EVAL_SETS = "eval_sets.parquet"
TABLES = (DOCUMENTS, VERSIONS, CHUNKS, DISABLED_CHUNKS, EVAL_SETS)
ORIGINALS = "originals/"
ORIGINAL_NAME = re.compile(r"^originals/([0-9a-f]{64})$")

BLOCK = 512
ROW_GROUP_ROWS = 2000
PIECE_BYTES = 1024 * 1024

_TS = pa.timestamp("us", tz="UTC")

DOCUMENT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("filename", pa.string()),
        ("mime_type", pa.string()),
        ("status", pa.string()),
        ("error_code", pa.string()),
        ("error_message", pa.string()),
        ("content_sha256", pa.string()),
        ("size_bytes", pa.int64()),
        ("metadata", pa.string()),  # the JSON object, as text
        ("chunk_count", pa.int32()),
        ("created_at", _TS),
        ("updated_at", _TS),
        ("source_uri", pa.string()),
        ("version", pa.int32()),
        ("version_role", pa.string()),
    ]
)

VERSION_SCHEMA = pa.schema(
    [
        ("source_uri", pa.string()),
        ("version", pa.int32()),
        ("document_id", pa.string()),
        ("content_sha256", pa.string()),
        ("created_at", _TS),
        ("serving_at", _TS),
        ("ended_at", _TS),
        ("outcome", pa.string()),
        ("error_message", pa.string()),
    ]
)


def chunk_schema(dimensions: int) -> pa.Schema:
    """chunks.parquet and disabled_chunks.parquet: the chunks of the ACTIVE generation. The vector
    is a fixed-size list of float32; `search_bm25` is the chunk's BM25 vector as pgvector sends a
    sparsevec (big-endian int32 dimensions, count, 0, the 0-based indices, then float32 values),
    null for a disabled chunk; `search_terms` the words the keyword index reads."""
    return pa.schema(
        [
            ("document_id", pa.string()),
            ("chunk_index", pa.int32()),
            ("text", pa.string()),
            ("page_number", pa.int32()),
            ("element_type", pa.string()),
            ("element_types", pa.list_(pa.string())),
            ("section_title", pa.string()),
            ("text_as_html", pa.string()),
            ("embedding", pa.list_(pa.float32(), int(dimensions))),
            ("search_terms", pa.string()),
            ("search_length", pa.int32()),
            ("search_bm25", pa.binary()),
            ("text_source", pa.string()),
            ("ocr_confidence", pa.float32()),
            ("boxes", pa.string()),  # the JSON array, as text
            ("original_text", pa.string()),  # the parser's text of an edited chunk (docs/chunks.md)
            ("revision", pa.int32()),
            ("updated_at", _TS),
        ]
    )


EVAL_SET_SCHEMA = pa.schema(
    [
        ("generation", pa.int32()),
        ("state", pa.string()),
        ("min_ratio", pa.float32()),
        ("query_id", pa.string()),
        ("query", pa.string()),
        ("relevant", pa.list_(pa.string())),
    ]
)


def bad_bundle(member: str, why: str) -> InvalidArgument:
    return InvalidArgument(
        f"the bundle's member {member} {why}; nothing was imported", reason=Reason.BUNDLE_INVALID, member=member
    )


# --- vectors: pgvector's binary form (what COPY sends) <-> float32 rows -----------------------


def vectors_from_pg(blobs: list[bytes], dimensions: int) -> np.ndarray:
    """pgvector `vector_send` values (int16 dimensions, int16 0, big-endian float32s) as an n x d
    float32 array."""
    width = 4 + 4 * dimensions
    joined = b"".join(blobs)
    if len(joined) != width * len(blobs):
        raise ValueError(f"a vector of the generation does not have {dimensions} dimensions")
    return np.frombuffer(joined, dtype=">f4").reshape(len(blobs), dimensions + 1)[:, 1:].astype("<f4")


def vectors_to_pg(vectors: np.ndarray) -> list[bytes]:
    """An n x d float32 array as pgvector's binary vectors, one per row."""
    n, d = vectors.shape
    framed = np.empty((n, 4 + 4 * d), dtype=np.uint8)
    framed[:, :4] = np.frombuffer(struct.pack(">hh", d, 0), dtype=np.uint8)
    framed[:, 4:] = np.ascontiguousarray(vectors, dtype=">f4").view(np.uint8).reshape(n, 4 * d)
    raw = framed.tobytes()
    width = 4 + 4 * d
    return [raw[i * width : (i + 1) * width] for i in range(n)]


# --- writing ---------------------------------------------------------------------------------


def tar_header(name: str, size: int, mtime: float = 0) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = int(mtime)
    info.mode = 0o644
    return info.tobuf(format=tarfile.GNU_FORMAT)


def tar_padding(size: int) -> bytes:
    return b"\0" * (-size % BLOCK)


TAR_END = b"\0" * (2 * BLOCK)


class TableWriter:
    """One table member written to a file, a record batch at a time, hashed at the end."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path = path
        self.schema = schema
        self.rows = 0
        self._writer = pq.ParquetWriter(str(path), schema, compression="zstd")

    def write_rows(self, columns: dict[str, Any], count: int) -> None:
        """`columns`: each of the schema's columns as a list (or an Arrow array) of `count` values."""
        if count:
            self._writer.write_batch(
                pa.record_batch([pa.array(columns[f.name], type=f.type) for f in self.schema], schema=self.schema),
                row_group_size=ROW_GROUP_ROWS,
            )
            self.rows += count

    def close(self) -> MemberInfo:
        self._writer.close()
        digest = hashlib.sha256()
        size = 0
        with self.path.open("rb") as f:
            while piece := f.read(PIECE_BYTES):
                digest.update(piece)
                size += len(piece)
        return MemberInfo(self.path.name, size, digest.hexdigest(), self.rows)


def embedding_column(vectors: np.ndarray) -> pa.Array:
    n, d = vectors.shape
    return pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(vectors, dtype="<f4").reshape(n * d)), d)


@dataclass(frozen=True)
class MemberInfo:
    name: str
    size: int
    sha256: str
    rows: int = 0


@dataclass
class Manifest:
    """manifest.json; `members` lists the table members (the originals name their own SHA-256)."""

    schema_head: str
    exported_at: str
    collection: dict[str, Any]
    embedder: dict[str, Any]
    generation: dict[str, Any]
    generations: list[dict[str, Any]]
    counts: dict[str, int]
    members: list[MemberInfo] = field(default_factory=list)
    format_version: int = FORMAT_VERSION

    def to_json(self) -> bytes:
        body = {
            "format": FORMAT,
            "format_version": self.format_version,
            "schema_head": self.schema_head,
            "exported_at": self.exported_at,
            "collection": self.collection,
            "embedder": self.embedder,
            "generation": self.generation,
            "generations": self.generations,
            "counts": self.counts,
            "members": [{"name": m.name, "size": m.size, "sha256": m.sha256, "rows": m.rows} for m in self.members],
        }
        return json.dumps(body, indent=2, sort_keys=True).encode()

    @classmethod
    def parse(cls, raw: bytes) -> Manifest:
        try:
            body = json.loads(raw)
            if body.get("format") != FORMAT:
                raise bad_bundle(MANIFEST, "is not a Sluice collection bundle's manifest")
            version = int(body["format_version"])
            if version != FORMAT_VERSION:
                raise InvalidArgument(
                    f"the bundle has format version {version}; this Sluice reads version {FORMAT_VERSION}",
                    reason=Reason.BUNDLE_VERSION_UNSUPPORTED,
                    format_version=version,
                )
            members = [
                MemberInfo(str(m["name"]), int(m["size"]), str(m["sha256"]), int(m.get("rows", 0))) for m in body["members"]
            ]
            manifest = cls(
                schema_head=str(body["schema_head"]),
                exported_at=str(body["exported_at"]),
                collection=dict(body["collection"]),
                embedder=dict(body["embedder"]),
                generation=dict(body["generation"]),
                generations=list(body.get("generations", [])),
                counts={str(k): int(v) for k, v in body["counts"].items()},
                members=members,
                format_version=version,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise bad_bundle(MANIFEST, f"cannot be read ({type(exc).__name__})") from None
        if {m.name for m in manifest.members} != set(TABLES):
            raise bad_bundle(MANIFEST, f"must list exactly the members {', '.join(TABLES)}")
        return manifest

    def member(self, name: str) -> MemberInfo:
        return next(m for m in self.members if m.name == name)


# --- reading -----------------------------------------------------------------------------------


class TarReader:
    """A tar read from an async stream of pieces, one member at a time, never a member whole."""

    def __init__(self, pieces: AsyncIterator[bytes]) -> None:
        self._pieces = aiter(pieces)
        self._buffer = bytearray()
        self._ended = False
        self._pending: tuple[str, int] | None = None  # a member whose header was read, not its data
        self._left = 0  # bytes of the current member's data (and padding) still unread

    async def _fill(self, n: int) -> bool:
        while len(self._buffer) < n and not self._ended:
            try:
                self._buffer += await anext(self._pieces)
            except StopAsyncIteration:
                self._ended = True
        return len(self._buffer) >= n

    async def _take(self, n: int) -> bytes:
        await self._fill(min(n, PIECE_BYTES))
        piece = bytes(self._buffer[:n])
        del self._buffer[: len(piece)]
        return piece

    async def next_member(self) -> tuple[str, int] | None:
        """The next member's (name, size), or None at the end of the archive."""
        if self._pending is not None:
            return self._pending
        while self._left:  # the rest of a member nobody read
            skipped = await self._take(min(self._left, PIECE_BYTES))
            if not skipped:
                raise bad_bundle("(archive)", "ends in the middle of a member")
            self._left -= len(skipped)
        if not await self._fill(BLOCK):
            raise bad_bundle("(archive)", "ends without the end of the archive: it was cut short")
        header = bytes(self._buffer[:BLOCK])
        del self._buffer[:BLOCK]
        if header == b"\0" * BLOCK:
            return None
        try:
            info = tarfile.TarInfo.frombuf(header, "utf-8", "strict")
        except tarfile.TarError:
            raise bad_bundle("(archive)", "has a damaged header") from None
        if not info.isfile():
            raise bad_bundle(info.name, "is not a plain file")
        self._pending = (info.name, info.size)
        return self._pending

    async def pieces(self) -> AsyncIterator[bytes]:
        """The current member's bytes, in pieces; the reader then stands before the next header."""
        assert self._pending is not None, "next_member() first"
        name, size = self._pending
        self._pending = None
        self._left = size + (-size % BLOCK)
        remaining = size
        while remaining:
            piece = await self._take(min(remaining, PIECE_BYTES))
            if not piece:
                raise bad_bundle(name, "is cut short")
            remaining -= len(piece)
            self._left -= len(piece)
            yield piece
        padding = await self._take(self._left)
        self._left -= len(padding)

    async def read_small(self, limit: int) -> bytes:
        name, size = self._pending or ("", 0)
        if size > limit:
            raise bad_bundle(name, f"is larger than {limit} bytes")
        return b"".join([p async for p in self.pieces()])


async def extract_verified(reader: TarReader, expected: MemberInfo, path: Path) -> None:
    """The current member into `path`, refused (BUNDLE_INVALID, naming it) unless its size and
    SHA-256 are the manifest's."""
    digest = hashlib.sha256()
    size = 0
    with path.open("wb") as f:
        async for piece in reader.pieces():
            digest.update(piece)
            size += len(piece)
            f.write(piece)
    if size != expected.size:
        raise bad_bundle(expected.name, f"has {size} bytes, not the {expected.size} of the manifest")
    if digest.hexdigest() != expected.sha256:
        raise bad_bundle(expected.name, "does not match its SHA-256 in the manifest: it was changed or damaged")


def read_batches(path: Path, name: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """A verified table member, a record batch (row group) at a time."""
    try:
        table = pq.ParquetFile(str(path))
        if not table.schema_arrow.equals(schema):
            raise bad_bundle(name, "does not have the columns of format version 1")
        yield from table.iter_batches(batch_size=ROW_GROUP_ROWS)
    except (pa.ArrowException, OSError):
        raise bad_bundle(name, "is not a readable Parquet file") from None


def imported_id(namespace: uuid.UUID, exported: str) -> uuid.UUID:
    """A document's id in the importing deployment: new for every import (the same deployment may
    hold the exported collection), the same for every mention of it within one."""
    return uuid.uuid5(namespace, exported)


__all__ = [
    "CHUNKS",
    "DISABLED_CHUNKS",
    "DOCUMENTS",
    "DOCUMENT_SCHEMA",
    "EVAL_SETS",
    "EVAL_SET_SCHEMA",
    "FORMAT_VERSION",
    "MANIFEST",
    "ORIGINALS",
    "ORIGINAL_NAME",
    "TABLES",
    "TAR_END",
    "VERSIONS",
    "VERSION_SCHEMA",
    "Manifest",
    "MemberInfo",
    "TableWriter",
    "TarReader",
    "bad_bundle",
    "chunk_schema",
    "embedding_column",
    "extract_verified",
    "imported_id",
    "read_batches",
    "tar_header",
    "tar_padding",
    "vectors_from_pg",
    "vectors_to_pg",
]
