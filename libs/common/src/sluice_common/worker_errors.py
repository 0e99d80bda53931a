"""The registry of error codes a worker may report through FailJob, and the one place where
a failure's message is made fit for the document's owner.

ingest-api refuses any other code (INVALID_ARGUMENT, reason UNKNOWN_ERROR_CODE): a worker key
cannot make up a reason that its owner would read as the cause of a failure. The message a
worker sends is bounded and cleaned too (sluice_ingest.domain.safe_error_message).

Failure messages are built from what went wrong, and what went wrong is often an exception
whose text was written for a developer: a traceback, a path on the server, the address of a
Python object, a statement, a key. `client_message` takes all of that out; the worker sends
every failure through it (pipeline.JobPipeline._fail), and `internals_in` names what would be
left, for the tests that scan every message a client can see (docs/operations.md, "What a
client is told").
"""

from __future__ import annotations

import enum
import re


class WorkerErrorCode(enum.StrEnum):
    # The document's own fault (permanent).
    PDF_ENCRYPTED = "PDF_ENCRYPTED"
    DOCUMENT_CORRUPT = "DOCUMENT_CORRUPT"
    DOCUMENT_EMPTY = "DOCUMENT_EMPTY"
    UNSUPPORTED_TYPE = "UNSUPPORTED_TYPE"
    DOCUMENT_TOO_LARGE = "DOCUMENT_TOO_LARGE"
    TOO_MANY_PAGES = "TOO_MANY_PAGES"
    # An image (or an image page) with more pixels than allowed: a decompression bomb, or a scan far too big.
    IMAGE_TOO_LARGE = "IMAGE_TOO_LARGE"
    TOO_MANY_CHUNKS = "TOO_MANY_CHUNKS"
    PARSER_LOST_TEXT = "PARSER_LOST_TEXT"
    PARSER_LIMIT = "PARSER_LIMIT"
    INVALID_CHUNK_TEXT = "INVALID_CHUNK_TEXT"
    # The parsing sandbox.
    PARSE_TIMEOUT = "PARSE_TIMEOUT"
    PARSE_MEMORY_LIMIT = "PARSE_MEMORY_LIMIT"
    PARSER_CRASHED = "PARSER_CRASHED"
    PARSER_UNAVAILABLE = "PARSER_UNAVAILABLE"
    # Embedders.
    EMBEDDER_DIMENSION_MISMATCH = "EMBEDDER_DIMENSION_MISMATCH"
    EMBEDDER_MODEL_NOT_FOUND = "EMBEDDER_MODEL_NOT_FOUND"
    EMBEDDER_UNSUPPORTED = "EMBEDDER_UNSUPPORTED"
    EMBEDDING_AUTH_FAILED = "EMBEDDING_AUTH_FAILED"
    EMBEDDING_BAD_RESPONSE = "EMBEDDING_BAD_RESPONSE"
    EMBEDDING_INPUT_REJECTED = "EMBEDDING_INPUT_REJECTED"
    EMBEDDING_PROVIDER_ERROR = "EMBEDDING_PROVIDER_ERROR"
    EMBEDDING_RATE_LIMITED = "EMBEDDING_RATE_LIMITED"
    EMBEDDING_REQUEST_TOO_LARGE = "EMBEDDING_REQUEST_TOO_LARGE"
    EMBEDDING_TIMEOUT = "EMBEDDING_TIMEOUT"
    EMBEDDING_UNAVAILABLE = "EMBEDDING_UNAVAILABLE"
    # ingest-api refused the job's own data (see the worker's jobs client).
    INGEST_REJECTED = "INGEST_REJECTED"
    INGEST_ERROR = "INGEST_ERROR"
    # Anything else inside the worker.
    WORKER_INTERNAL_ERROR = "WORKER_INTERNAL_ERROR"


REGISTERED: frozenset[str] = frozenset(code.value for code in WorkerErrorCode)


def is_registered(code: str) -> bool:
    return code in REGISTERED


# ---------------------------------------------------------------------------- client messages

MAX_MESSAGE_CHARS = 1000
WITHHELD = "…"

# What a message a client can see must never carry, each with what it is replaced by.
# The leading spaces are taken from where a run of them starts, at once (`(?<!\s)`, possessive):
# tried from inside a run, a message of 20,000 newlines took seconds.
_TRACEBACK = re.compile(r"(?<!\s)\s*+Traceback \(most recent call last\):.*", re.DOTALL)
_FRAME = re.compile(r'(?<!\s)\s*+File "[^"\n]*", line \d+(?:, in [^\s,]+)?')
_OBJECT = re.compile(r"(?<!\s)\s*+<[^<>\n]*? at 0x[0-9a-fA-F]+>")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
_SQL = re.compile(
    r"\b(?:SELECT\b[^\n]{0,400}?\bFROM|INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|(?:CREATE|ALTER|DROP)\s+(?:TABLE|INDEX|ROLE|EXTENSION|DATABASE)"
    r"|GRANT\s+\w+\s+ON|LINE \d+:|DETAIL:|(?:relation|column|constraint|index) \"[^\"]+\").*",
    re.DOTALL,
)
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.DOTALL)
# A scheme starts where no scheme character stands before it, so each run is tried once (linear).
_URL_USER = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*+://)(?!…@)[^/\s@]++@")
_SECRETS = (
    re.compile(r"\bslk_[A-Za-z0-9]+_[A-Za-z0-9_-]+"),  # a Sluice API key
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),  # an OpenAI-style key
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # an AWS access key id
    re.compile(r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}"),  # a JSON web token
    re.compile(r"(?i)\bbearer\s+[\w.~+/=-]{8,}"),
)
# `password=…` whatever follows; after a colon only what looks like a value (quoted, with a
# digit or a symbol, 16 characters long, or after Bearer or Basic), not a sentence ("must not
# hold a password: name the variable") nor a placeholder ("authorization: Bearer <key>").
_KEY_VALUE = re.compile(
    r"(?i)\b(api[_-]?key|password|passwd|pwd|secret|token|access[_-]?key|authorization|credentials?)"
    r"(\s*=\s*|\s*:\s*(?=(?:bearer|basic)\s+(?![<…])\S|[\"']|(?!<)[^\s,;&)…]*[\d_+/=.-]|[^\s,;&)…<]{16}))"
    r"((?:bearer|basic)\s+)?"
    r"(\"[^\"]*\"|'[^']*'|[^\s,;&)…]+)"
)
# An absolute path (two segments at least: /tmp/x, C:\\x\\y) not inside a URL or a word, and
# not a route of the public API (/v1/collections/{collection}/documents, /sluice.v1.X/Method:
# docs/http.md), or any path that names a source or library file (site-packages/x/y.py).
_PATH = re.compile(r"(?<![\w./:~-])(?!/v1/|/sluice\.v1\.)(?:~|[A-Za-z]:)?(?:[\\/][\w.@+~-]+){2,}[\\/]?")
_FILE_URL = re.compile(r"(?i)\bfile:/+[^\s'\")]*")
# It starts only where a word starts (not inside a name or after a slash), and its segments are
# possessive: each start is tried once, in linear time. Without both, a 100,000-character message
# of `a/a/a/…` took minutes (FailJob's error_message is the worker's text; tests/worker/test_client_messages.py).
_SOURCE_PATH = re.compile(r"(?<![\w.@+~\\/-])(?:[\w.@+~-]++[\\/])++[\w.-]+\.(?:py|pyc|pyx|pxd|so|dll|dylib|c|cc|cpp|h|hpp)\b")
_SPACES = re.compile(r"[ \t]{2,}")


def client_message(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`message` as its document's owner may read it: no traceback, no path on the server, no
    object address, no statement and no secret; at most `limit` characters, never empty."""
    text = _TRACEBACK.sub("", message or "")
    text = _FRAME.sub("", text)
    text = _PEM.sub(WITHHELD, text)
    text = _SQL.sub("(database details withheld)", text)
    text = _OBJECT.sub("", text)
    text = _ADDRESS.sub(WITHHELD, text)
    text = _URL_USER.sub(lambda m: m.group(1) + WITHHELD + "@", text)
    for secret in _SECRETS:
        text = secret.sub(WITHHELD, text)
    text = _KEY_VALUE.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) or "") + WITHHELD, text)
    text = _FILE_URL.sub(WITHHELD, text)
    text = _SOURCE_PATH.sub(WITHHELD, text)
    text = _PATH.sub(WITHHELD, text)
    text = _SPACES.sub(" ", " ".join(text.split("\n"))).strip().rstrip(":,;").strip()
    text = _balance(text)
    if not text:
        text = "processing failed for an unknown reason"
    if len(text) > limit:
        text = _balance(text[: limit - 2].rstrip()) + " " + WITHHELD
    return text


def _balance(text: str) -> str:
    """Close the brackets that a cut left open ("… (ValueError: …" → "… (ValueError: …)")."""
    closing = {"(": ")", "[": "]", "{": "}"}
    stack: list[str] = []
    for char in text:
        if char in closing:
            stack.append(closing[char])
        elif stack and char == stack[-1]:
            stack.pop()
    return text.rstrip(" :") + "".join(reversed(stack)) if stack else text


# What `internals_in` looks for: what `client_message` removes, as the tests name it.
_FINDINGS: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    ("a traceback", (re.compile(r"Traceback \(most recent call last\)|File \"[^\"]*\", line \d+"),)),
    ("an object address", (re.compile(r"\bat 0x[0-9a-fA-F]+|\b0x[0-9a-fA-F]{6,}\b"),)),
    ("a filesystem path", (_PATH, _SOURCE_PATH, _FILE_URL)),
    ("SQL", (_SQL,)),
    ("a secret", (*_SECRETS, _PEM, _KEY_VALUE, _URL_USER)),
)


def internals_in(message: str) -> list[str]:
    """What a client must not see in `message` ("a traceback", "a filesystem path", …), with
    the text found; empty when the message is fit to show."""
    found = []
    for name, patterns in _FINDINGS:
        for pattern in patterns:
            match = pattern.search(message or "")
            if match:
                found.append(f"{name}: {match.group(0)[:80]!r}")
                break
    return found


__all__ = ["MAX_MESSAGE_CHARS", "REGISTERED", "WorkerErrorCode", "client_message", "internals_in", "is_registered"]
