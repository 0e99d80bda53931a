"""No message a client can see carries a server path, a traceback, an object address, SQL or a
secret (issue 21).

The worker cleans every failure it reports in one place (sluice_common.worker_errors.
client_message, called by JobPipeline._fail). Here a corpus of hostile and damaged files of
every supported format goes through upload, the worker's sandbox and ingest-api, together with
the calls a client gets wrong, and every document error, attempt error and gRPC error detail
that comes back is scanned with `internals_in`. The DocumentService client of the worker tests
(e2e.Docs) scans what it reads in every other worker test as well.
"""

from __future__ import annotations

import io
import zipfile

import grpc
import pytest
from client_messages import assert_fit_for_client, client_visible_texts
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice_common.worker_errors import client_message, internals_in

from . import ocr_fixtures as fx
from .e2e import InProcessWorker, worker_settings
from .test_hostile_inputs import office_docx
from .test_parsing import docx_bomb

# Messages as they reached clients before (issue 21), and other internals a message may carry.
LEAKY = [
    'the file could not be read as image (ONNXRuntimeError: Traceback (most recent call last):\n  File "/srv/sluice/.venv/lib/'
    'python3.11/site-packages/rapidocr_onnxruntime/utils/infer_engine.py", line 196, in __call__\n    return self.session.run('
    "self.get_output_names(), input_dict)\nonnxruntime.capi.onnxruntime_pybind11_state.RuntimeException: [ONNXRuntimeError] : 6 : "
    "RUNTIME_EXCEPTION : bad allocation)",
    "the image is damaged and cannot be read (UnidentifiedImageError: cannot identify image file <_io.BytesIO object at 0x7f2eaa0a0b30>)",
    "cannot open /var/lib/sluice/tmp/upload-1234/part.bin: Permission denied",
    "error in site-packages/docx/oxml/parser.py while reading",
    'ingest-api: duplicate key value violates unique constraint "chunks_pkey" DETAIL: Key (document_id, chunk_index)=(1, 2) already exists.',
    "the query SELECT id FROM documents WHERE tenant_id = $1 failed",
    "could not connect to postgresql://sluice:hunter2@db:5432/sluice",
    "the embedder refused the key slk_k3v9x0p2m4aa_Zm9vYmFyYmF6cXV4 (Bearer sk-proj-abcdefghijklmnop1234)",
    "provider said: api_key=abc123secret, password: 'hunter2'",
    "the proxy sent authorization: Basic dXNlcjpwYXNz and password: hunter2",
    "C:\\Users\\operator\\sluice\\data\\file.docx is locked",
    "could not load file:///opt/sluice/models/rapidocr/det.onnx",
]
# Messages that are fine as they are.
CLEAN = [
    "the PDF is protected by a password; upload a copy without the password",
    "the file type of 'notes.bin' is not supported; supported are PDF, DOCX, PPTX, HTML, Markdown, plain text, e-mail, Excel (XLSX), CSV and images (PNG, JPEG, TIFF, WebP)",
    "the image is 60000×60000 pixels (3600 megapixels), more than the 40 megapixels allowed per page (a decompression bomb?)",  # noqa: RUF001 - a times sign
    "the embedder at https://api.openai.com/v1/embeddings answered 503 (text/html)",
    "parsing the document took longer than 120 seconds and was stopped",
    "港务长在星期二记录了四十二艘船只。 1/2 of 2024/01/05",
    # What the servers answer a call without a key and a reranker given a password (the
    # suite-wide scan, tests/client_messages.py, found the old pattern took them for secrets).
    "this call needs an API key: send `authorization: Bearer <key>` metadata",
    "rerank.reranker.base_url must not hold a user or password: name the key's variable in api_key_env",
    "UploadDocument is a client stream: POST the file as the body of /v1/collections/{collection}/documents (docs/http.md, Uploads)",
    "no such method: /sluice.v1.DocumentService/Nope (see /openapi.json)",
]


@pytest.mark.parametrize("message", LEAKY)
def test_client_message_takes_server_internals_out(message):
    assert internals_in(message), "the scan must see what is wrong with it"
    cleaned = client_message(message)
    assert internals_in(cleaned) == [], cleaned
    assert cleaned and "0x7f" not in cleaned and "hunter2" not in cleaned and "slk_k3v9" not in cleaned


@pytest.mark.parametrize("message", CLEAN)
def test_client_message_leaves_a_clean_message_alone(message):
    assert internals_in(message) == []
    assert client_message(message) == message


def test_client_message_keeps_what_the_owner_needs_and_stays_bounded():
    assert client_message(LEAKY[0]) == "the file could not be read as image (ONNXRuntimeError)"
    assert (
        client_message(LEAKY[1]) == "the image is damaged and cannot be read (UnidentifiedImageError: cannot identify image file)"
    )
    assert len(client_message("x" * 5000)) <= 1000
    assert client_message("") == "processing failed for an unknown reason"


# Runs of one unit, 200,000 characters long: each took one of the patterns back over the run from
# every position (minutes for `a/a/a/…`, seconds for newlines; FailJob carries a worker's text).
# Linear now, this takes well under a second; quadratic, it would take hours and hit the suite's
# timeout. What each gives back is checked, not how fast.
RUNS = ["a", "a/", "ab.", "\n", "\t", "SELECT ", "http://a", 'File "', "password:", "a@b ", "x/y.py/"]


@pytest.mark.parametrize("unit", RUNS)
def test_a_long_hostile_message_is_cleaned_whole_and_bounded(unit):
    message = unit * (200_000 // len(unit)) + " slk_k3v9x0p2m4aa_Zm9vYmFyYmF6cXV4"
    cleaned = client_message(message)
    assert 0 < len(cleaned) <= 1000 and "slk_k3v9" not in cleaned and internals_in(cleaned) == []


def damaged_zip(name: str, parts: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for part, content in parts.items():
            archive.writestr(part, content)
    return out.getvalue()


def hostile_corpus(documents_dir) -> dict[str, bytes]:
    """Files that fail, one or more of each format and of each way to fail."""
    png = fx.image_bytes(fx.render_page(["A small page."], size=(400, 200)), "PNG")
    corpus = {
        name: (documents_dir / "malformed" / name).read_bytes()
        for name in ("truncated.pdf", "random.pdf", "encrypted.pdf", "not-a-zip.docx", "blank.txt", "no-text.pdf")
    }
    corpus.update(
        {
            "not-an-image.png": b"\x89PNG\r\n\x1a\n" + b"this is not an image" * 50,
            "cut.png": png[: len(png) // 2],
            "garbage.jpg": b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8,
            "garbage.tiff": b"II*\x00" + bytes(range(256)) * 8,
            "garbage.webp": b"RIFF\x00\x10\x00\x00WEBPVP8 " + bytes(range(256)) * 8,
            "bomb.png": fx.pixel_bomb_png(),
            "bomb.docx": docx_bomb(520 * 1024 * 1024),
            "damaged.docx": b"PK\x03\x04" + b"\x00" * 200 + b"not really a zip package",
            "parts-missing.pptx": damaged_zip("x", {"hello.txt": b"no slides here"}),
            "broken-xml.docx": office_docx("<w:p><w:r><w:t>an element that never ends"),
            "too-deep.docx": office_docx("<w:sdt><w:sdtContent>" * 3000 + "<w:p/>" + "</w:sdtContent></w:sdt>" * 3000),
            "broken.xlsx": damaged_zip("x", {"[Content_Types].xml": b"<Types/>", "xl/workbook.xml": b"<workbook><sheets><sheet"}),
            "broken.epub": damaged_zip(
                "x", {"mimetype": b"application/epub+zip", "META-INF/container.xml": b"<container><rootfiles"}
            ),
            "garbage.msg": bytes(range(256)) * 16,
            "old.doc": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(512),
            "program.exe": b"MZ\x90\x00" + bytes(range(256)) * 4,
            "blob.bin": bytes(range(256)) * 8,
            "only-script.html": b"<html><head><script>var secret = 1;</script></head><body> </body></html>",
        }
    )
    return corpus


async def test_no_client_visible_message_carries_server_internals(ingest_api, docs, sandbox_pool, documents_dir):
    scanned: list[str] = []

    def scan(item) -> None:
        scanned.extend(client_visible_texts(item))
        assert_fit_for_client(item)

    await docs.create_collection("hostile", max_attempts=2)
    corpus = hostile_corpus(documents_dir)
    uploaded = {name: await docs.upload("hostile", name, data) for name, data in corpus.items()}

    # The calls a client gets wrong: every answer's message and details are scanned.
    wrong_calls = [
        docs.upload("hostile", "empty.png", b""),
        docs.upload("no-such-collection", "a.txt", b"text"),
        docs.get("00000000-0000-0000-0000-000000000000"),
        docs.get("not-an-id"),
        docs.create_collection("Bad Name With Spaces!"),
        docs.stub.RetryDocument(ds.RetryDocumentRequest(id=next(iter(uploaded.values())).id)),
        docs.delete("00000000-0000-0000-0000-000000000000"),
    ]
    for call in wrong_calls:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call
        scan(refused.value)

    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool):
        finished = await docs.wait_all([d.id for d in uploaded.values()], timeout=300)
    for document in finished:
        assert document.status == D.DOCUMENT_STATUS_FAILED, (document.filename, document.error_message)
        assert document.error_code and document.error_message, document.filename
        scan(document)
    codes = {d.filename: d.error_code for d in finished}
    print("\n".join(f"{d.filename}: {d.error_code}: {d.error_message}" for d in finished))
    assert codes["bomb.docx"] == "DOCUMENT_TOO_LARGE" and codes["bomb.png"] == "IMAGE_TOO_LARGE"
    assert codes["not-an-image.png"] == "DOCUMENT_CORRUPT" and codes["too-deep.docx"] == "PARSER_LIMIT"
    # Everything scanned, nothing found: the scan saw every document's and call's messages.
    assert len(scanned) >= len(corpus) + len(wrong_calls)
    assert all(internals_in(text) == [] for text in scanned)
