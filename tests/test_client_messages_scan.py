"""The suite-wide scan of client-visible messages (tests/client_messages.py) fails a test that
reads server internals, whatever channel read them, and leaves alone what the client sent
itself and what only the worker reads. Run in a pytest of its own (pytester), against a real
gRPC server that answers with the messages below."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent

SERVER = """
import sys
from concurrent import futures

sys.path.insert(0, {tests!r})
pytest_plugins = ["client_messages"]

import grpc
import pytest
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js

TRACEBACK = 'Traceback (most recent call last):\\n  File "/srv/sluice/worker.py", line 3, in run'


def get_document(request, context):
    if request.id == "leaky-error":
        context.abort(grpc.StatusCode.INTERNAL, "cannot open /var/lib/sluice/tmp/part.bin: Permission denied")
    if request.id == "leaky-document":
        return D.Document(id=request.id, error_message="the file could not be read (" + TRACEBACK + ")")
    if request.id == "leaky-attempt":
        return D.Document(id=request.id, attempt_history=[D.Attempt(error_message="<_io.BytesIO object at 0x7f2eaa0a0b30>")])
    if request.id.startswith("/"):
        context.abort(grpc.StatusCode.NOT_FOUND, f"no document {{request.id!r}}")
    return D.Document(id=request.id, error_message="the PDF is protected by a password")


def watch_document(request, context):
    yield D.DocumentEvent(document=D.Document(id="a"))
    yield D.DocumentEvent(document=D.Document(id="b", error_message=TRACEBACK if request.id == "leaky" else "fine"))


def fail_job(request, context):
    context.abort(grpc.StatusCode.FAILED_PRECONDITION, "lease of /var/lib/sluice/job lost")


@pytest.fixture(scope="module")
def address():
    server = grpc.server(futures.ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers([
        grpc.method_handlers_generic_handler("sluice.v1.DocumentService", {{
            "GetDocument": grpc.unary_unary_rpc_method_handler(
                get_document, ds.GetDocumentRequest.FromString, D.Document.SerializeToString),
            "WatchDocument": grpc.unary_stream_rpc_method_handler(
                watch_document, ds.WatchDocumentRequest.FromString, D.DocumentEvent.SerializeToString),
        }}),
        grpc.method_handlers_generic_handler("sluice.v1.JobService", {{
            "FailJob": grpc.unary_unary_rpc_method_handler(
                fail_job, js.FailJobRequest.FromString, js.FailJobResponse.SerializeToString),
        }}),
    ])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{{port}}"
    server.stop(None)


def call(address, kind, method, request, response_type):  # a stream's messages as a list
    with grpc.insecure_channel(address) as channel:
        multicallable = getattr(channel, kind)(
            method, request_serializer=type(request).SerializeToString, response_deserializer=response_type.FromString
        )
        answer = multicallable(request)
        return list(answer) if kind == "unary_stream" else answer


def get(address, document_id):
    return call(address, "unary_unary", GET_DOCUMENT, ds.GetDocumentRequest(id=document_id), D.Document)


async def aio_get(address, document_id):
    async with grpc.aio.insecure_channel(address) as channel:
        get_document = channel.unary_unary(
            GET_DOCUMENT, request_serializer=ds.GetDocumentRequest.SerializeToString, response_deserializer=D.Document.FromString
        )
        return await get_document(ds.GetDocumentRequest(id=document_id))


GET_DOCUMENT = "/sluice.v1.DocumentService/GetDocument"
"""


TESTS_FILE = """
import asyncio

import grpc
import pytest
from conftest import aio_get, call, get
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js


def test_leaky_error(address):
    with pytest.raises(grpc.RpcError):
        get(address, "leaky-error")


def test_leaky_document(address):
    assert get(address, "leaky-document").error_message


def test_leaky_attempt_read_over_asyncio(address):
    assert asyncio.run(aio_get(address, "leaky-attempt")).attempt_history


def test_leaky_error_over_asyncio(address):
    with pytest.raises(grpc.RpcError):
        asyncio.run(aio_get(address, "leaky-error"))


def test_leaky_streamed_document(address):
    events = call(address, "unary_stream", "/sluice.v1.DocumentService/WatchDocument", ds.WatchDocumentRequest(id="leaky"), D.DocumentEvent)
    assert len(events) == 2


def test_clean_answers(address):
    assert get(address, "clean").error_message
    assert asyncio.run(aio_get(address, "clean")).error_message


def test_what_the_client_sent_is_not_a_leak(address):
    with pytest.raises(grpc.RpcError, match="/home/me/notes/a.txt"):
        get(address, "/home/me/notes/a.txt")


def test_only_the_worker_reads_job_service(address):
    with pytest.raises(grpc.RpcError):
        call(address, "unary_unary", "/sluice.v1.JobService/FailJob", js.FailJobRequest(), js.FailJobResponse)


@pytest.mark.shows_internals
def test_marked_on_purpose(address):
    assert get(address, "leaky-document").error_message
"""


def test_the_scan_fails_every_test_that_reads_internals_and_no_other(pytester):
    pytester.makeconftest(SERVER.format(tests=str(TESTS)))
    pytester.makepyfile(test_scanned=TESTS_FILE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=9, errors=5)
    failed = sorted(line.split("::")[1].split(" ")[0] for line in result.outlines if line.startswith("ERROR test_scanned.py::"))
    assert failed == [
        "test_leaky_attempt_read_over_asyncio",
        "test_leaky_document",
        "test_leaky_error",
        "test_leaky_error_over_asyncio",
        "test_leaky_streamed_document",
    ]
    output = result.stdout.str()
    assert "a message a client can read carries server internals" in output
    assert "a filesystem path" in output and "a traceback" in output and "an object address" in output


def test_the_clis_output_is_scanned_for_tracebacks_and_object_addresses_only():
    from client_messages import scan_cli_output, unreported

    unreported()  # what came before is not this test's
    scan_cli_output(["upload", "/home/me/docs"], "✓ /home/me/docs/a.md  READY\n\nkey slk_abc_def", "")
    assert unreported() == []  # the files it uploads and the key it made are the CLI's to print
    scan_cli_output(
        ["search", "q"], "", 'Traceback (most recent call last):\n  File "/srv/x.py", line 1\n\n<Foo object at 0x7f2eaa0a0b30>'
    )
    found = unreported()
    assert len(found) == 2 and "a traceback" in found[0] and "an object address" in found[1]
