"""Resource failures: how running out of memory is recognised, and what the owner is told.

Used on both sides of the sandbox: inside it, so that an allocation failure that a parser
wrapped in its own exception is never taken for a damaged file; in the worker, for the
watchdog's kill.
"""

from __future__ import annotations

_ALLOCATION_FAILED = (
    "bad_alloc",
    "bad allocation",
    "failed to allocate",
    "memory allocation failed",
    "out of memory",
    "cannot allocate memory",
)


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc`, or any exception it was raised from, says an allocation failed: a
    MemoryError, or a C library's error that a parser wrapped in its own exception (ONNX
    Runtime's "bad allocation" inside RapidOCR's ONNXRuntimeError, libxml2's "Memory
    allocation failed" inside lxml's XMLSyntaxError)."""
    seen: BaseException | None = exc
    for _ in range(20):  # a chain is short; a cycle must not hang us
        if seen is None:
            return False
        if isinstance(seen, MemoryError):
            return True
        text = str(seen).lower()
        if any(marker in text for marker in _ALLOCATION_FAILED):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def memory_message(memory_limit_mb: int) -> str:
    return (
        f"the document is too large to read: parsing it needed more than the {memory_limit_mb} MB of memory "
        "allowed (a decompression bomb, or a very large file or page?)"
    )
