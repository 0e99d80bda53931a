"""What a worker says in FailJob reaches the document's owner fit to read (issue 21, 1):
ingest-api cleans the message itself with sluice_common.worker_errors.client_message, so a
worker that did not (another version, a bug) cannot put a path, a traceback or an object
address into a document's error or its attempt history."""

from __future__ import annotations

from sluice.v1 import document_pb2 as D
from sluice_common.worker_errors import internals_in

LEAKY = (
    "the file could not be read as image (ONNXRuntimeError: Traceback (most recent call last):\n"
    '  File "/srv/sluice/.venv/lib/python3.11/site-packages/rapidocr_onnxruntime/utils/infer_engine.py", line 196, in __call__\n'
    "onnxruntime.capi.onnxruntime_pybind11_state.RuntimeException: <_io.BytesIO object at 0x7f2eaa0a0b30>)"
)


def test_a_failure_message_with_server_internals_is_cleaned_by_ingest_api(c):
    assert internals_in(LEAKY)
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.fail(job, retryable=True, code="PARSER_CRASHED", message=LEAKY)
    waiting = c.get(doc.id)
    job = c.claim(wait=5)
    c.fail(job, retryable=False, code="DOCUMENT_CORRUPT", message=LEAKY)
    failed = c.get(doc.id)
    assert failed.status == D.DOCUMENT_STATUS_FAILED
    shown = [waiting.error_message, failed.error_message, *(a.error_message for a in failed.attempt_history)]
    assert len(shown) == 4
    for message in shown:
        assert internals_in(message) == [], message
        assert "the file could not be read as image (ONNXRuntimeError" in message, message
