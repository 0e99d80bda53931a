"""ExportCollection and ImportCollection (docs/bundles.md).

Neither holds a transaction open across the network (docs/contributing.md, Code): the export
writes the bundle's members to temporary files inside one snapshot and only then streams them;
the import spools the whole stream to a temporary file first (uploads.receive: size and SHA-256
confirmed by the trailer), checks the manifest and every table member's checksum, and only then
writes everything in one transaction, reading the spool. A stream cut off, a bad member or a
process killed at any moment leaves nothing. Memory stays bounded whatever the bundle's size:
rows go a row group at a time, originals a piece at a time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from sluice_common.errors import FailedPrecondition, InvalidArgument, SluiceError
from sluice_common.reasons import Reason

from .. import bundle_format as bf
from .. import uploads
from ..bundle_spool import WorkFolder, spool_root
from ..domain import DocumentStatus, GenerationState
from ..settings import IngestSettings
from ..store.bundles import BundleExport, BundleImport, BundleStore, json_binary
from ..store.rows import CollectionRow, NewCollection
from .collections import COLLECTION_NAME, CollectionUseCases

log = logging.getLogger("sluice.ingest.bundles")

ROWS_PER_BATCH = bf.ROW_GROUP_ROWS
STREAM_PIECE_BYTES = 256 * 1024  # one ExportCollectionResponse's data


@dataclass(frozen=True)
class Embedder:
    provider: str
    model: str
    dimensions: int

    def __str__(self) -> str:
        return f"{self.provider} {self.model} ({self.dimensions} dimensions)"


def choose_embedder(bundle: Embedder, wanted: Embedder | None, reembed: bool) -> tuple[Embedder, bool]:
    """The imported collection's embedder, and whether the bundle's vectors are kept: they are
    whenever the embedder is the bundle's (provider, model and dimensions) and no re-embedding
    was asked for; another embedder needs `reembed` (EMBEDDER_MISMATCH otherwise)."""
    if wanted is None or wanted == bundle:
        return bundle, not reembed
    if not reembed:
        raise FailedPrecondition(
            f"the bundle's vectors were made by {bundle}, not by {wanted}: import with the bundle's embedder,"
            " or ask for re-embedding (reembed) to have the workers embed every document again",
            reason=Reason.EMBEDDER_MISMATCH,
            bundle_embedder=str(bundle),
            embedder=str(wanted),
        )
    return wanted, False


@dataclass(frozen=True)
class ImportOptions:
    name: str = ""
    embedder: Embedder | None = None  # None: the bundle's
    reembed: bool = False


@dataclass(frozen=True)
class ExportHeader:
    format_version: int
    collection: str
    documents: int
    chunks: int


@dataclass(frozen=True)
class ExportTrailer:
    size_bytes: int
    sha256: str


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _write_batch(
    writer: bf.TableWriter, columns_of: Callable[[list[tuple[Any, ...]], pa.Schema], dict[str, Any]], rows: list[tuple[Any, ...]]
) -> None:
    writer.write_rows(columns_of(rows, writer.schema), len(rows))


def _columns(rows: list[tuple[Any, ...]], schema: pa.Schema) -> dict[str, Any]:
    return {f.name: list(column) for f, column in zip(schema, zip(*rows, strict=True), strict=True)}


class ExportStream:
    """The bundle's bytes and then its trailer; `aclose()` removes the export's folder whether or not
    the stream was ever read (a generator that never started would not run its `finally`)."""

    def __init__(self, pieces: AsyncGenerator[bytes | ExportTrailer, None], work: WorkFolder) -> None:
        self._pieces = pieces
        self._work = work

    def __aiter__(self) -> AsyncIterator[bytes | ExportTrailer]:
        return self._pieces

    async def aclose(self) -> None:
        try:
            await self._pieces.aclose()
        finally:
            self._work.cleanup()


class BundleUseCases:
    def __init__(self, store: BundleStore, collections: CollectionUseCases, settings: IngestSettings) -> None:
        self.store = store
        self.collections = collections
        self.settings = settings
        self.uploads = uploads.UploadGate(settings.max_concurrent_uploads, settings.upload_idle_timeout_seconds)
        self.spool = spool_root(settings.bundle_spool_dir, settings.upload_spool_dir)

    # --- export -------------------------------------------------------------------------------

    async def export_collection(self, tenant_id: int, name: str) -> tuple[ExportHeader, ExportStream]:
        """The header, then the bundle's bytes and a trailer; the temporary files go when the
        stream is closed (`aclose()`), however it ends."""
        work = WorkFolder(self.spool, "sluice-export-")
        try:
            manifest, originals = await self._write_members(tenant_id, name, work.path)
        except BaseException:
            work.cleanup()
            raise
        counts = manifest.counts
        header = ExportHeader(bf.FORMAT_VERSION, name, counts["documents"], counts["chunks"] + counts["disabled_chunks"])
        return header, ExportStream(self._stream(manifest, work.path, originals, work), work)

    async def _write_members(self, tenant_id: int, name: str, work: Path) -> tuple[bf.Manifest, Path]:
        async with self.store.exporting(tenant_id, name) as ex:
            counts = await ex.counts()
            members = [
                await self._write_table(work / bf.DOCUMENTS, bf.DOCUMENT_SCHEMA, ex.documents(ROWS_PER_BATCH), _columns),
                await self._write_table(work / bf.VERSIONS, bf.VERSION_SCHEMA, ex.versions(ROWS_PER_BATCH), _columns),
            ]
            dims = ex.active.dimensions
            schema = bf.chunk_schema(dims)

            def chunk_columns(rows: list[tuple[Any, ...]], schema: pa.Schema) -> dict[str, Any]:
                columns = _columns(rows, schema)
                columns["embedding"] = bf.embedding_column(bf.vectors_from_pg(columns["embedding"], dims))
                return columns

            for member, disabled in ((bf.CHUNKS, False), (bf.DISABLED_CHUNKS, True)):
                members.append(
                    await self._write_table(work / member, schema, ex.chunks(ROWS_PER_BATCH, disabled=disabled), chunk_columns)
                )
            members.append(await asyncio.to_thread(self._write_eval_sets, work / bf.EVAL_SETS, ex))
            originals = work / "originals.part"
            await self._write_originals(ex, originals)
            c = ex.collection
            manifest = bf.Manifest(
                schema_head=await ex.schema_head(),
                exported_at=dt.datetime.now(dt.UTC).isoformat(),
                collection={
                    "name": c.name,
                    "description": c.description,
                    "chunking": {
                        "max_characters": c.chunk_max_characters,
                        "new_after_n_chars": c.chunk_new_after_n_chars,
                        "overlap": c.chunk_overlap,
                    },
                    "max_attempts": c.max_attempts,
                    "reranker": c.reranker,
                    "vector_precision": c.vector_precision,
                },
                embedder={"provider": ex.active.embedder_provider, "model": ex.active.embedder_model, "dimensions": dims},
                generation={
                    "number": ex.active.number,
                    "vector_precision": ex.active.vector_precision,
                    "activated_at": _iso(ex.active.activated_at),
                },
                generations=[
                    {
                        "number": g.number,
                        "state": g.state,
                        "embedder": {"provider": g.embedder_provider, "model": g.embedder_model, "dimensions": g.dimensions},
                        "vector_precision": g.vector_precision,
                        "created_at": _iso(g.created_at),
                        "activated_at": _iso(g.activated_at),
                        "ended_at": _iso(g.ended_at),
                    }
                    for g in ex.generations
                ],
                counts={
                    "documents": counts.documents,
                    "ready_documents": counts.ready,
                    "original_bytes": counts.original_bytes,
                    "chunks": counts.chunks,
                    "disabled_chunks": counts.disabled_chunks,
                    "edited_chunks": counts.edited_chunks,
                    "versions": members[1].rows,
                    "eval_queries": members[-1].rows,
                },
                members=members,
            )
        return manifest, originals

    @staticmethod
    async def _write_table(
        path: Path,
        schema: pa.Schema,
        batches: AsyncIterator[list[tuple[Any, ...]]],
        columns_of: Callable[[list[tuple[Any, ...]], pa.Schema], dict[str, Any]],
    ) -> bf.MemberInfo:
        writer = bf.TableWriter(path, schema)
        try:
            async for rows in batches:
                await asyncio.to_thread(_write_batch, writer, columns_of, rows)
        finally:
            info = await asyncio.to_thread(writer.close)
        return info

    @staticmethod
    def _write_eval_sets(path: Path, ex: BundleExport) -> bf.MemberInfo:
        writer = bf.TableWriter(path, bf.EVAL_SET_SCHEMA)
        for g in ex.generations:
            rows = [
                (g.number, g.state, g.eval_min_ratio, str(q.get("id", "")), str(q["query"]), [str(r) for r in q["relevant"]])
                for q in g.eval_set or []
            ]
            if rows:
                writer.write_rows(_columns(rows, bf.EVAL_SET_SCHEMA), len(rows))
        return writer.close()

    @staticmethod
    async def _write_originals(ex: BundleExport, path: Path) -> None:
        """Each distinct original as a tar member named by its SHA-256, checked as it is read."""
        with path.open("wb") as out:
            for document_id, sha256, size in await ex.originals():
                out.write(bf.tar_header(bf.ORIGINALS + sha256, size))
                digest = hashlib.sha256()
                written = 0
                async for piece in ex.original_pieces(document_id, size, bf.PIECE_BYTES):
                    digest.update(piece)
                    written += len(piece)
                    out.write(piece)
                if written != size or digest.hexdigest() != sha256:
                    raise SluiceError(f"document {document_id}'s stored original does not match its size and SHA-256")
                out.write(bf.tar_padding(size))

    @staticmethod
    async def _stream(
        manifest: bf.Manifest, work: Path, originals: Path, cleanup: WorkFolder
    ) -> AsyncGenerator[bytes | ExportTrailer, None]:
        digest = hashlib.sha256()
        size = 0

        def files() -> Iterator[bytes]:
            raw = manifest.to_json()
            yield bf.tar_header(bf.MANIFEST, len(raw)) + raw + bf.tar_padding(len(raw))
            for member in manifest.members:
                yield bf.tar_header(member.name, member.size)
                with (work / member.name).open("rb") as f:
                    while piece := f.read(STREAM_PIECE_BYTES):
                        yield piece
                yield bf.tar_padding(member.size)
            with originals.open("rb") as f:
                while piece := f.read(STREAM_PIECE_BYTES):
                    yield piece
            yield bf.TAR_END

        try:
            pieces = files()
            while (piece := await asyncio.to_thread(next, pieces, None)) is not None:
                if piece:
                    digest.update(piece)
                    size += len(piece)
                    yield piece
            yield ExportTrailer(size, digest.hexdigest())
        finally:
            cleanup.cleanup()

    # --- import -------------------------------------------------------------------------------

    def _embedder(self, provider: str, model: str, dimensions: int, what: str) -> Embedder:
        model, dimensions = CollectionUseCases.embedder_of(provider, model, dimensions, what)
        return Embedder(provider, model, dimensions)

    async def import_collection(
        self, tenant_id: int, options: ImportOptions, data: AsyncIterator[bytes | uploads.Trailer]
    ) -> CollectionRow:
        s = self.settings
        if options.name and not COLLECTION_NAME.match(options.name):
            raise InvalidArgument(
                "collection name must be 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit",
                reason=Reason.INVALID_COLLECTION_NAME,
            )
        wanted = (
            None
            if options.embedder is None
            else self._embedder(options.embedder.provider, options.embedder.model, options.embedder.dimensions, "embedder")
        )
        content = await uploads.receive(
            data,
            uploads.Expected(),
            max_bytes=s.max_bundle_bytes,
            spool_memory_bytes=s.upload_spool_memory_bytes,
            spool_dir=s.upload_spool_dir or None,
        )
        try:
            with WorkFolder(self.spool, "sluice-import-") as work:
                return await self._import(tenant_id, options, wanted, bf.TarReader(content.pieces()), work)
        finally:
            content.close()

    async def _import(
        self, tenant_id: int, options: ImportOptions, wanted: Embedder | None, reader: bf.TarReader, work: Path
    ) -> CollectionRow:
        first = await reader.next_member()
        if first is None or first[0] != bf.MANIFEST:
            raise bf.bad_bundle(bf.MANIFEST, "must be the bundle's first member")
        manifest = bf.Manifest.parse(await reader.read_small(bf.MANIFEST_MAX_BYTES))
        new, keep_vectors = self._plan(tenant_id, manifest, options, wanted)
        paths, member = await self._extract_tables(reader, manifest, work)
        namespace = uuid.uuid4()
        dims = int(manifest.embedder["dimensions"])
        counts = manifest.counts
        async with self.store.importing() as tx:
            await tx.create_collection(new, documents=counts["documents"], stored_bytes=counts["original_bytes"])
            eval_set = await asyncio.to_thread(self._active_eval_set, paths[bf.EVAL_SETS], namespace)
            if eval_set is not None:
                await tx.set_eval_set(*eval_set)
            await tx.copy_documents(
                self._rows(paths[bf.DOCUMENTS], bf.DOCUMENTS, bf.DOCUMENT_SCHEMA, self._document_rows(namespace, keep_vectors)),
                new.max_attempts,
            )
            await tx.copy_versions(self._rows(paths[bf.VERSIONS], bf.VERSIONS, bf.VERSION_SCHEMA, self._version_rows(namespace)))
            if keep_vectors:
                schema = bf.chunk_schema(dims)
                await tx.copy_chunks(self._rows(paths[bf.CHUNKS], bf.CHUNKS, schema, self._chunk_rows(namespace, dims)))
                await tx.copy_disabled_chunks(
                    self._rows(paths[bf.DISABLED_CHUNKS], bf.DISABLED_CHUNKS, schema, self._disabled_rows(namespace, dims))
                )
            await self._copy_originals(tx, reader, member)
            problems = await tx.problems()
            if problems:
                raise InvalidArgument(
                    "the bundle is incomplete: " + "; ".join(problems) + "; nothing was imported", reason=Reason.BUNDLE_INVALID
                )
            await tx.build_index(new.dimensions, new.vector_precision)
        log.info(
            "collection imported", extra={"collection": new.name, "documents": counts["documents"], "vectors_kept": keep_vectors}
        )
        return await self.store.collection(tenant_id, new.name)

    def _plan(
        self, tenant_id: int, manifest: bf.Manifest, options: ImportOptions, wanted: Embedder | None
    ) -> tuple[NewCollection, bool]:
        """The collection to create, and whether the bundle's vectors are kept (choose_embedder)."""
        e = manifest.embedder
        try:
            bundle_embedder = self._embedder(str(e["provider"]), str(e["model"]), int(e["dimensions"]), "the bundle's embedder")
        except InvalidArgument as exc:
            if wanted is None or not options.reembed:
                raise FailedPrecondition(
                    f"the bundle's embedder cannot be used here: {exc.message}; import it with reembed and an embedder"
                    " this deployment has",
                    reason=Reason.EMBEDDER_MISMATCH,
                ) from None
            bundle_embedder = Embedder(str(e["provider"]), str(e["model"]), int(e["dimensions"]))
        embedder, keep_vectors = choose_embedder(bundle_embedder, wanted, options.reembed)
        name = options.name or str(manifest.collection["name"])
        if not COLLECTION_NAME.match(name):
            raise bf.bad_bundle(bf.MANIFEST, "names no valid collection")
        c = manifest.collection
        chunking = c["chunking"]
        new = NewCollection(
            tenant_id=tenant_id,
            name=name,
            description=str(c.get("description", "")),
            embedder_provider=embedder.provider,
            embedder_model=embedder.model,
            dimensions=embedder.dimensions,
            chunk_max_characters=int(chunking["max_characters"]),
            chunk_new_after_n_chars=int(chunking["new_after_n_chars"]),
            chunk_overlap=int(chunking["overlap"]),
            max_attempts=int(c["max_attempts"]),
            reranker=c.get("reranker"),
            vector_precision=str(manifest.generation.get("vector_precision") or c.get("vector_precision") or "float4"),
        )
        return new, keep_vectors

    @staticmethod
    async def _extract_tables(
        reader: bf.TarReader, manifest: bf.Manifest, work: Path
    ) -> tuple[dict[str, Path], tuple[str, int] | None]:
        """Every table member, extracted and checked before anything is written; and the member
        after them (the first original, or None)."""
        paths: dict[str, Path] = {}
        member = await reader.next_member()
        while member is not None and not member[0].startswith(bf.ORIGINALS):
            table = member[0]
            if table not in bf.TABLES or table in paths:
                raise bf.bad_bundle(table, "is not a member of format version 1" if table not in paths else "appears twice")
            paths[table] = work / table
            await bf.extract_verified(reader, manifest.member(table), paths[table])
            member = await reader.next_member()
        for table in bf.TABLES:
            if table not in paths:
                raise bf.bad_bundle(table, "is missing")
        return paths, member

    @staticmethod
    async def _copy_originals(tx: BundleImport, reader: bf.TarReader, member: tuple[str, int] | None) -> None:
        """Each original into the documents that hold its bytes, hashed on the way: one whose
        bytes are not its name is refused, naming it (the transaction then writes nothing)."""
        while member is not None:
            original, size = member
            found = bf.ORIGINAL_NAME.match(original)
            if found is None:
                raise bf.bad_bundle(original, "is not a member of format version 1")
            sha256 = found.group(1)
            documents = await tx.documents_with_content(sha256)
            if documents:
                digest = hashlib.sha256()

                async def hashed(digest: Any = digest) -> AsyncIterator[bytes]:
                    async for piece in reader.pieces():
                        digest.update(piece)
                        yield piece

                await tx.copy_content(documents, size, hashed())
                if digest.hexdigest() != sha256:
                    raise bf.bad_bundle(original, "does not match its SHA-256 (its name): it was changed or damaged")
            member = await reader.next_member()

    @staticmethod
    async def _rows(
        path: Path, member: str, schema: pa.Schema, convert: Callable[[pa.RecordBatch], list[tuple[Any, ...]]]
    ) -> AsyncIterator[list[tuple[Any, ...]]]:
        """A verified table's rows, a row group at a time, read and converted in a thread."""
        batches = bf.read_batches(path, member, schema)

        def next_rows() -> list[tuple[Any, ...]] | None:
            batch = next(batches, None)
            if batch is None:
                return None
            try:
                return convert(batch)
            except (ValueError, TypeError, KeyError) as exc:
                raise bf.bad_bundle(member, f"holds a value this Sluice cannot import ({type(exc).__name__})") from None

        while (rows := await asyncio.to_thread(next_rows)) is not None:
            yield rows

    @staticmethod
    def _document_rows(namespace: uuid.UUID, keep_vectors: bool) -> Callable[[pa.RecordBatch], list[tuple[Any, ...]]]:
        ready, pending = str(DocumentStatus.READY), str(DocumentStatus.PENDING)

        def convert(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
            d = batch.to_pydict()
            rows = []
            for i in range(batch.num_rows):
                # READY stays READY with its chunks; anything else is processed again (PENDING).
                is_ready = keep_vectors and d["status"][i] == ready
                rows.append(
                    (
                        bf.imported_id(namespace, d["id"][i]),
                        d["filename"][i],
                        d["mime_type"][i],
                        ready if is_ready else pending,
                        None,
                        None,
                        d["content_sha256"][i],
                        d["size_bytes"][i],
                        json_binary(d["metadata"][i]),
                        d["chunk_count"][i] if is_ready else 0,
                        d["created_at"][i],
                        d["updated_at"][i],
                        d["source_uri"][i],
                        d["version"][i],
                        d["version_role"][i],
                    )
                )
            return rows

        return convert

    @staticmethod
    def _version_rows(namespace: uuid.UUID) -> Callable[[pa.RecordBatch], list[tuple[Any, ...]]]:
        def convert(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
            d = batch.to_pydict()
            d["document_id"] = [bf.imported_id(namespace, x) for x in d["document_id"]]
            return list(zip(*(d[f.name] for f in bf.VERSION_SCHEMA), strict=True))

        return convert

    @staticmethod
    def _chunk_columns(batch: pa.RecordBatch, namespace: uuid.UUID, dims: int) -> dict[str, list[Any]]:
        embedding = batch.column("embedding")
        vectors = embedding.values.to_numpy(zero_copy_only=False).reshape(batch.num_rows, dims)
        columns = {name: batch.column(name).to_pylist() for name in batch.schema.names if name != "embedding"}
        columns["embedding"] = bf.vectors_to_pg(vectors)
        columns["document_id"] = [bf.imported_id(namespace, x) for x in columns["document_id"]]
        columns["boxes"] = [json_binary(x) for x in columns["boxes"]]
        return columns

    @classmethod
    def _chunk_rows(cls, namespace: uuid.UUID, dims: int) -> Callable[[pa.RecordBatch], list[tuple[Any, ...]]]:
        order = [
            "document_id",
            "chunk_index",
            "text",
            "page_number",
            "element_type",
            "element_types",
            "section_title",
            "text_as_html",
            "embedding",
            "search_terms",
            "search_bm25",
            "text_source",
            "ocr_confidence",
            "boxes",
            "original_text",
            "revision",
            "updated_at",
        ]

        def convert(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
            c = cls._chunk_columns(batch, namespace, dims)
            return list(zip(*(c[name] for name in order), strict=True))

        return convert

    @classmethod
    def _disabled_rows(cls, namespace: uuid.UUID, dims: int) -> Callable[[pa.RecordBatch], list[tuple[Any, ...]]]:
        order = [
            "document_id",
            "chunk_index",
            "text",
            "page_number",
            "element_type",
            "element_types",
            "section_title",
            "text_as_html",
            "embedding",
            "search_terms",
            "search_length",
            "text_source",
            "ocr_confidence",
            "boxes",
            "original_text",
            "revision",
            "updated_at",
        ]

        def convert(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
            c = cls._chunk_columns(batch, namespace, dims)
            return list(zip(*(c[name] for name in order), strict=True))

        return convert

    @staticmethod
    def _active_eval_set(path: Path, namespace: uuid.UUID) -> tuple[list[dict[str, Any]], float] | None:
        """The ACTIVE generation's eval set (the one its reindex was gated with), its document ids
        renamed as the import renames the documents (file names and sources stay as they are)."""
        queries: list[dict[str, Any]] = []
        ratio = 1.0
        for batch in bf.read_batches(path, bf.EVAL_SETS, bf.EVAL_SET_SCHEMA):
            d = batch.to_pydict()
            for i in range(batch.num_rows):
                if d["state"][i] != GenerationState.ACTIVE:
                    continue
                ratio = float(d["min_ratio"][i] or 1.0)
                relevant = [_renamed(namespace, r) for r in d["relevant"][i]]
                queries.append({"id": d["query_id"][i], "query": d["query"][i], "relevant": relevant})
        return (queries, ratio) if queries else None


def _renamed(namespace: uuid.UUID, label: str) -> str:
    try:
        exported = uuid.UUID(label)
    except ValueError:
        return label
    return str(bf.imported_id(namespace, str(exported)))


__all__ = [
    "BundleUseCases",
    "Embedder",
    "ExportHeader",
    "ExportStream",
    "ExportTrailer",
    "ImportOptions",
    "choose_embedder",
]
