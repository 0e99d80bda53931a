"""An in-memory DocumentService and SearchService for the CLI's fast tests.

It follows the contract closely enough for the client's behaviour (paging, streaming,
rich errors, terminal states) and nothing more; the real services are exercised by the
end-to-end tests in test_e2e_dev.py. Documents whose content contains b"FAIL" end FAILED.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
import uuid
from concurrent import futures

import grpc
from google.protobuf import timestamp_pb2

from sluice.v1 import (
    collection_pb2,
    document_pb2,
    document_service_pb2,
    document_service_pb2_grpc,
    search_service_pb2,
    search_service_pb2_grpc,
)
from sluice_common.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, SluiceError, to_grpc_status

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
STAGES = [
    document_pb2.DOCUMENT_STATUS_PARSING,
    document_pb2.DOCUMENT_STATUS_CHUNKING,
    document_pb2.DOCUMENT_STATUS_EMBEDDING,
    document_pb2.DOCUMENT_STATUS_INDEXING,
]
TERMINAL = {document_pb2.DOCUMENT_STATUS_READY, document_pb2.DOCUMENT_STATUS_FAILED}


def _now() -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.GetCurrentTime()
    return ts


def _abort(context, error: SluiceError):
    context.abort_with_status(to_grpc_status(error))


class FakeStore:
    def __init__(self, step_seconds: float) -> None:
        self.step_seconds = step_seconds
        self.collections: dict[str, collection_pb2.Collection] = {}
        self.documents: dict[str, document_pb2.Document] = {}
        self.contents: dict[str, bytes] = {}
        self.order: list[str] = []
        self.by_request: dict[str, str] = {}
        self.changed = threading.Condition()
        self.uploads: list[document_service_pb2.UploadDocumentMetadata] = []
        # A small page size makes the client's paging visible in tests.
        self.max_page_size = 1000

    def set(self, doc: document_pb2.Document) -> None:
        with self.changed:
            doc.update_time.CopyFrom(_now())
            self.documents[doc.id] = doc
            self.changed.notify_all()

    def process(self, doc_id: str) -> None:
        """Walk the document through the stages in a background thread."""

        def run():
            content = self.contents[doc_id]
            for stage in STAGES:
                time.sleep(self.step_seconds)
                with self.changed:
                    doc = self.documents.get(doc_id)
                    if doc is None:
                        return
                    doc = document_pb2.Document.FromString(doc.SerializeToString())
                doc.status = stage
                doc.progress.CopyFrom(document_pb2.Progress(stage=stage, done=1, total=2, unit="chunks"))
                if stage == document_pb2.DOCUMENT_STATUS_PARSING:
                    doc.attempts += 1
                    doc.job_status = document_pb2.INGESTION_JOB_STATUS_RUNNING
                    doc.attempt_history.append(document_pb2.Attempt(number=doc.attempts, worker_id="fake-worker", stage=stage, outcome=document_pb2.ATTEMPT_OUTCOME_RUNNING, start_time=_now()))
                doc.attempt_history[-1].stage = stage
                self.set(doc)
                if b"FAIL" in content and stage == document_pb2.DOCUMENT_STATUS_PARSING:
                    time.sleep(self.step_seconds)
                    doc = document_pb2.Document.FromString(doc.SerializeToString())
                    doc.status = document_pb2.DOCUMENT_STATUS_FAILED
                    doc.job_status = document_pb2.INGESTION_JOB_STATUS_FAILED
                    doc.error_code = "DOCUMENT_CORRUPT"
                    doc.error_message = "the file could not be parsed: it looks corrupt"
                    attempt = doc.attempt_history[-1]
                    attempt.outcome = document_pb2.ATTEMPT_OUTCOME_PERMANENT_FAILURE
                    attempt.error_code = doc.error_code
                    attempt.error_message = doc.error_message
                    attempt.end_time.CopyFrom(_now())
                    self.set(doc)
                    return
            time.sleep(self.step_seconds)
            with self.changed:
                doc = self.documents.get(doc_id)
                if doc is None:
                    return
                doc = document_pb2.Document.FromString(doc.SerializeToString())
            doc.status = document_pb2.DOCUMENT_STATUS_READY
            doc.job_status = document_pb2.INGESTION_JOB_STATUS_SUCCEEDED
            doc.ClearField("progress")
            doc.chunk_count = max(1, len(content) // 100)
            doc.attempt_history[-1].outcome = document_pb2.ATTEMPT_OUTCOME_SUCCEEDED
            doc.attempt_history[-1].end_time.CopyFrom(_now())
            self.set(doc)

        threading.Thread(target=run, daemon=True).start()


class FakeDocumentService(document_service_pb2_grpc.DocumentServiceServicer):
    def __init__(self, store: FakeStore) -> None:
        self.store = store

    def _collection(self, name, context) -> collection_pb2.Collection:
        if name not in self.store.collections:
            _abort(context, NotFound(f"collection {name!r} does not exist", reason="COLLECTION_NOT_FOUND"))
        return self.store.collections[name]

    def _document(self, doc_id, context) -> document_pb2.Document:
        if doc_id not in self.store.documents:
            _abort(context, NotFound(f"document {doc_id!r} does not exist", reason="DOCUMENT_NOT_FOUND"))
        return self.store.documents[doc_id]

    def CreateCollection(self, request, context):
        c = request.collection
        if not NAME.match(c.name):
            _abort(context, InvalidArgument(f"invalid collection name {c.name!r}: use 1 to 63 lowercase letters, digits, '-' or '_'", reason="INVALID_COLLECTION_NAME"))
        if c.name in self.store.collections:
            _abort(context, AlreadyExists(f"collection {c.name!r} already exists", reason="COLLECTION_EXISTS"))
        created = collection_pb2.Collection()
        created.CopyFrom(c)
        created.create_time.CopyFrom(_now())
        if not created.chunking.max_characters:
            created.chunking.CopyFrom(collection_pb2.ChunkingConfig(max_characters=1500, new_after_n_chars=1000, overlap=150))
        self.store.collections[c.name] = created
        return created

    def _counted(self, c):
        c = collection_pb2.Collection.FromString(c.SerializeToString())
        docs = [d for d in self.store.documents.values() if d.collection == c.name]
        c.document_count = len(docs)
        c.ready_document_count = sum(d.status == document_pb2.DOCUMENT_STATUS_READY for d in docs)
        return c

    def GetCollection(self, request, context):
        return self._counted(self._collection(request.name, context))

    def ListCollections(self, request, context):
        names = sorted(self.store.collections)
        start = int(request.page_token or 0)
        size = min(request.page_size or 100, self.store.max_page_size)
        page = names[start : start + size]
        token = str(start + size) if start + size < len(names) else ""
        return document_service_pb2.ListCollectionsResponse(collections=[self._counted(self.store.collections[n]) for n in page], next_page_token=token)

    def DeleteCollection(self, request, context):
        self._collection(request.name, context)
        docs = [d for d in self.store.documents.values() if d.collection == request.name]
        if docs and not request.force:
            _abort(context, FailedPrecondition(f"collection {request.name!r} has {len(docs)} documents; delete with force", reason="COLLECTION_NOT_EMPTY"))
        for d in docs:
            del self.store.documents[d.id]
        del self.store.collections[request.name]
        return document_service_pb2.DeleteCollectionResponse(deleted_documents=len(docs))

    def UploadDocument(self, request_iterator, context):
        first = next(request_iterator, None)
        if first is None or not first.HasField("metadata"):
            _abort(context, InvalidArgument("the first message must carry the metadata", reason="METADATA_REQUIRED"))
        meta = first.metadata
        self._collection(meta.collection, context)
        data = b"".join(m.data for m in request_iterator)
        self.store.uploads.append(meta)
        if meta.request_id and meta.request_id in self.store.by_request:
            return self.store.documents[self.store.by_request[meta.request_id]]
        sha = hashlib.sha256(data).hexdigest()
        for d in self.store.documents.values():
            if d.collection == meta.collection and d.content_sha256 == sha:
                return d
        doc = document_pb2.Document(
            id=str(uuid.uuid4()),
            collection=meta.collection,
            filename=meta.filename,
            mime_type=meta.mime_type or "application/octet-stream",
            status=document_pb2.DOCUMENT_STATUS_PENDING,
            job_status=document_pb2.INGESTION_JOB_STATUS_PENDING,
            max_attempts=3,
            content_sha256=sha,
            size_bytes=len(data),
            metadata=dict(meta.metadata),
            create_time=_now(),
        )
        doc.name = f"collections/{doc.collection}/documents/{doc.id}"
        self.store.contents[doc.id] = data
        self.store.order.insert(0, doc.id)
        if meta.request_id:
            self.store.by_request[meta.request_id] = doc.id
        self.store.set(doc)
        self.store.process(doc.id)
        return doc

    def GetDocument(self, request, context):
        return self._document(request.id, context)

    def ListDocuments(self, request, context):
        ids = [i for i in self.store.order if i in self.store.documents]
        docs = [self.store.documents[i] for i in ids]
        if request.collection:
            self._collection(request.collection, context)
            docs = [d for d in docs if d.collection == request.collection]
        if request.status:
            docs = [d for d in docs if d.status == request.status]
        start = int(request.page_token or 0)
        size = min(request.page_size or 100, self.store.max_page_size)
        page = docs[start : start + size]
        token = str(start + size) if start + size < len(docs) else ""
        return document_service_pb2.ListDocumentsResponse(documents=[self._light(d) for d in page], next_page_token=token)

    @staticmethod
    def _light(d):
        d = document_pb2.Document.FromString(d.SerializeToString())
        d.ClearField("attempt_history")
        return d

    def DeleteDocument(self, request, context):
        doc = self._document(request.id, context)
        running = doc.job_status == document_pb2.INGESTION_JOB_STATUS_RUNNING
        with self.store.changed:
            del self.store.documents[request.id]
            self.store.changed.notify_all()
        return document_service_pb2.DeleteDocumentResponse(cancelled_running_job=running)

    def RetryDocument(self, request, context):
        doc = self._document(request.id, context)
        if doc.status != document_pb2.DOCUMENT_STATUS_FAILED:
            _abort(context, FailedPrecondition(f"only a FAILED document can be retried; this one is {document_pb2.DocumentStatus.Name(doc.status)}", reason="DOCUMENT_NOT_FAILED"))
        doc = document_pb2.Document.FromString(doc.SerializeToString())
        doc.status = document_pb2.DOCUMENT_STATUS_PENDING
        doc.job_status = document_pb2.INGESTION_JOB_STATUS_PENDING
        doc.error_message = ""
        doc.error_code = ""
        doc.attempts = 0
        self.store.contents[doc.id] = self.store.contents[doc.id].replace(b"FAIL", b"fine")
        self.store.set(doc)
        self.store.process(doc.id)
        return doc

    def WatchDocument(self, request, context):
        doc = self._document(request.id, context)
        sequence = 1
        yield document_pb2.DocumentEvent(document=doc, sequence=sequence)
        last = doc.SerializeToString()
        while doc.status not in TERMINAL and context.is_active():
            with self.store.changed:
                self.store.changed.wait(timeout=0.5)
                current = self.store.documents.get(request.id)
            if current is None:
                _abort(context, NotFound("the document was deleted", reason="DOCUMENT_NOT_FOUND"))
            if current.SerializeToString() != last:
                doc = current
                last = doc.SerializeToString()
                sequence += 1
                yield document_pb2.DocumentEvent(document=doc, sequence=sequence)


class FakeSearchService(search_service_pb2_grpc.SearchServiceServicer):
    def __init__(self, store: FakeStore) -> None:
        self.store = store

    def Search(self, request, context):
        if request.collection not in self.store.collections:
            _abort(context, NotFound(f"collection {request.collection!r} does not exist", reason="COLLECTION_NOT_FOUND"))
        words = [w.lower() for w in request.query.split()]
        hits = []
        for doc in self.store.documents.values():
            if doc.collection != request.collection or doc.status != document_pb2.DOCUMENT_STATUS_READY:
                continue
            text = self.store.contents[doc.id].decode("utf-8", "replace")
            lower = text.lower()
            found = [(lower.find(w), lower.find(w) + len(w)) for w in words if w in lower]
            if found:
                hits.append(search_service_pb2.SearchHit(
                    chunk_id=doc.id + "-0", text=text, score=len(found) / len(words), document_id=doc.id,
                    filename=doc.filename, chunk_index=0, page_number=1,
                    highlights=[search_service_pb2.Highlight(start=s, end=e) for s, e in found],
                ))
        hits.sort(key=lambda h: -h.score)
        mode = request.mode or search_service_pb2.SEARCH_MODE_HYBRID
        return search_service_pb2.SearchResponse(hits=hits[: request.top_k or 10], mode=mode)


def start_fake(step_seconds: float = 0.05):
    """Start both fake services on one free port; returns (server, address, store)."""
    store = FakeStore(step_seconds)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    document_service_pb2_grpc.add_DocumentServiceServicer_to_server(FakeDocumentService(store), server)
    search_service_pb2_grpc.add_SearchServiceServicer_to_server(FakeSearchService(store), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}", store
