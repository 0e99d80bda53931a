"""One trace per document, across processes: ingest-api and a worker run as separate
processes and export with OTLP/HTTP to a receiver written here, which decodes the requests
with the opentelemetry-proto messages. The upload's span is the root of the worker's spans
for that document (claim, stages, embedding batches, the calls back to ingest-api, the
commit), and the worker's log lines carry the trace id."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import free_port, wait_serving
from sluice.v1 import document_pb2 as D
from worker.e2e import Docs, WorkerProcess


class OtlpReceiver:
    """POST /v1/traces (OTLP/HTTP, protobuf): every span received, with its service.name."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.spans: list[dict] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.paths.append(self.path)
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            receiver.spans.append(
                                {
                                    "service": attributes.get("service.name"),
                                    "name": span.name,
                                    "kind": span.kind,
                                    "trace_id": span.trace_id.hex(),
                                    "span_id": span.span_id.hex(),
                                    "parent": span.parent_span_id.hex(),
                                    "attributes": {a.key: a.value for a in span.attributes},
                                }
                            )
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()
                self.wfile.write(b"")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def otel_env(endpoint: str) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_TRACES_SAMPLER": "always_on"}


def test_one_document_is_one_trace_across_ingest_api_and_worker(database_url, tmp_path):
    receiver = OtlpReceiver()
    port = free_port()
    address = f"127.0.0.1:{port}"
    env = {
        **os.environ,
        "SLUICE_DATABASE_URL": database_url,
        "SLUICE_BIND": address,
        "SLUICE_SHUTDOWN_GRACE_SECONDS": "2",
        "SLUICE_LOG_JSON": "true",
        **otel_env(receiver.endpoint),
    }
    env.pop("OTEL_SERVICE_NAME", None)
    ingest_log = open(tmp_path / "ingest.log", "w+")  # noqa: SIM115 - the subprocess writes to it until the test ends
    ingest = subprocess.Popen([sys.executable, "-m", "sluice_ingest.main"], env=env, stdout=ingest_log, stderr=subprocess.STDOUT)
    worker = None
    try:
        wait_serving(address)
        worker = WorkerProcess(address, tmp_path / "worker.log", SLUICE_SHUTDOWN_GRACE_SECONDS="2", **otel_env(receiver.endpoint))

        async def upload() -> str:
            docs = Docs(address)
            try:
                await docs.create_collection("traced")
                document = await docs.upload("traced", "traced.md", b"# Traced\n\nOne trace follows this document.\n\n" * 20)
                ready = await docs.wait(document.id, timeout=120)
                assert ready.status == D.DOCUMENT_STATUS_READY, ready
                return document.id
            finally:
                await docs.close()

        document_id = asyncio.run(upload())
        # SIGTERM: each process drains and its span processor flushes at exit.
        worker.signal(signal.SIGTERM)
        assert asyncio.run(worker.wait_exit(60)) == 0
        ingest.send_signal(signal.SIGTERM)
        assert ingest.wait(30) == 0
    finally:
        if worker is not None and worker.process.poll() is None:
            worker.kill()
        if ingest.poll() is None:
            ingest.kill()
        receiver.close()

    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    spans = receiver.spans
    [upload_span] = [s for s in spans if s["name"] == "/sluice.v1.DocumentService/UploadDocument"]
    assert upload_span["service"] == "sluice-ingest-api"
    trace_id = upload_span["trace_id"]
    in_trace = [s for s in spans if s["trace_id"] == trace_id]
    by_id = {s["span_id"]: s for s in in_trace}
    children = defaultdict(list)
    for s in in_trace:
        children[s["parent"]].append(s)

    def only(name: str, service: str) -> dict:
        found = [s for s in in_trace if s["name"] == name and s["service"] == service]
        assert len(found) == 1, (
            f"{name} in {service}: {len(found)} spans; trace has {sorted((s['service'], s['name']) for s in in_trace)}"
        )
        return found[0]

    # Spans from both processes in the one trace.
    assert {s["service"] for s in in_trace} == {"sluice-ingest-api", "sluice-worker"}
    # The worker's job and its claim are children of the upload.
    job = only("sluice.worker.job", "sluice-worker")
    claim = only("sluice.worker.claim", "sluice-worker")
    assert job["parent"] == upload_span["span_id"] and claim["parent"] == upload_span["span_id"]
    assert job["attributes"]["sluice.document_id"].string_value == document_id
    assert job["attributes"]["sluice.outcome"].string_value == "succeeded"
    # Every stage is a child of the job, in the pipeline's order.
    stages = {name: only(f"sluice.stage.{name}", "sluice-worker") for name in ("parsing", "chunking", "embedding", "indexing")}
    assert all(stage["parent"] == job["span_id"] for stage in stages.values())
    batches = [s for s in in_trace if s["name"] == "sluice.embed_batch"]
    assert batches and all(b["parent"] == stages["embedding"]["span_id"] for b in batches)
    # The worker's calls back to ingest-api: a client span in the worker under its stage, and
    # ingest-api's server span under that client span (context propagated over gRPC).
    # (The document is small: it came with its claim, so there is no ReadDocumentContent call.)
    assert not [s for s in in_trace if s["name"].endswith("/ReadDocumentContent")]
    for method, stage in [("SaveSnapshot", "chunking"), ("CompleteJob", "indexing")]:
        client = only(f"/sluice.v1.JobService/{method}", "sluice-worker")
        server = only(f"/sluice.v1.JobService/{method}", "sluice-ingest-api")
        assert client["parent"] == stages[stage]["span_id"], method
        assert server["parent"] == client["span_id"], method
    reports = [s for s in in_trace if s["name"] == "/sluice.v1.JobService/ReportStage"]
    clients = {s["span_id"] for s in reports if s["service"] == "sluice-worker"}
    assert {s["parent"] for s in reports if s["service"] == "sluice-worker"} == {stage["span_id"] for stage in stages.values()}
    assert {s["parent"] for s in reports if s["service"] == "sluice-ingest-api"} == clients
    # No orphan: the upload is the one root, every other span has its parent in the trace.
    assert [s for s in in_trace if s["parent"] not in by_id] == [upload_span]
    # Long-polls, lease renewals and health checks are not traced.
    assert not [s for s in spans if s["name"].endswith(("/ClaimJob", "/RenewLease", "/Check"))]

    # Log lines carry the trace id.
    worker_events = [json.loads(line) for line in (tmp_path / "worker.log").read_text().splitlines() if line.startswith("{")]
    ready = [e for e in worker_events if e.get("event") == "document ready"]
    assert ready and ready[0]["trace_id"] == trace_id
    ingest_log.seek(0)
    ingest_events = [json.loads(line) for line in ingest_log if line.startswith("{")]
    uploaded = [e for e in ingest_events if e.get("event") == "document uploaded"]
    assert uploaded and uploaded[0]["trace_id"] == trace_id


def test_tracing_is_off_without_an_endpoint(monkeypatch):
    from sluice_common import tracing

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert tracing.configure_tracing("test") is False
    assert tracing.server_interceptors() == [] and tracing.aio_client_interceptors() == []
    assert tracing.current_trace_context() is None
    # A stored context that cannot be read is no context, never an error.
    assert tracing.decode_trace_context("not json") == {} and tracing.decode_trace_context(None) == {}
    assert tracing.decode_trace_context('{"traceparent": "00-abc-def-01"}') == {"traceparent": "00-abc-def-01"}


@pytest.mark.parametrize("module", ["sluice_ingest.main", "sluice_search.main", "sluice_worker.main"])
def test_every_service_configures_tracing(module):
    import importlib
    import inspect

    source = inspect.getsource(importlib.import_module(module))
    assert "configure_tracing(" in source
