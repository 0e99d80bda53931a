"""Parsing in isolated processes with a wall-clock limit and a memory limit.

A hostile file (one that hangs the parser, or a decompression bomb) must fail its document,
never the worker. Each job's parse therefore runs in a sandbox process:

* started with the "spawn" method (never fork a process that runs gRPC threads);
* held to `memory_limit_mb` of *resident* memory (RSS) by a watchdog thread in the worker
  (`MemoryWatch`), which reads the resident size of the sandbox and of any process it started
  from /proc every 50 ms and kills the sandbox when it passes the limit. Address space is no
  measure: ONNX Runtime, OpenBLAS and every thread reserve far more of it than they touch (OCR
  of one 1,700 x 2,200 page: 1.6 GB of address space for 0.9 GB resident), so an RLIMIT_AS at
  the limit failed ordinary scans. RLIMIT_AS stays only as a backstop at
  `ADDRESS_SPACE_FACTOR` times the limit;
* warmed once (unstructured and the spaCy model imported, a tiny text partitioned) and then
  reused for many documents, because that warm-up takes seconds;
* killed when it exceeds its time limit, when the job is cancelled, or after it ran out of
  memory, and replaced by a fresh one; the pool never hands out a sandbox in doubt.

Running out of memory is a resource failure, never "the file is corrupt": the sandbox reports
PARSE_MEMORY_LIMIT, whether the watchdog killed it or an allocation failed inside it (a
MemoryError, or a C library's allocation error that a parser wrapped in its own exception).
A sandbox that had parsed other documents before may have been short of room because of what
they left behind, so the pool parses the document once more in a fresh sandbox; only when that
fails too is the document "too large to read" (permanent).

The protocol over the pipe is a short conversation per document, so that the worker can
report CHUNKING (status before action) between the two steps while the parsed elements stay
in the sandbox:

    worker → sandbox  ("parse", data, filename, mime_type, limits)
    sandbox → worker  ("progress", done, total, unit)*  then ("parsed", summary) | ("error", …)
    worker → sandbox  ("chunk", settings, max_chunks)
    sandbox → worker  ("chunked", [chunk dicts]) | ("error", code, message, retryable)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sluice_worker.domain import (
    PARSE_MEMORY_LIMIT,
    PARSE_TIMEOUT,
    PARSER_CRASHED,
    PARSER_UNAVAILABLE,
    ChunkingSettings,
    ChunkRecord,
    DocumentInvalid,
    JobFailure,
    ParseSummary,
    TransientFailure,
)
from sluice_worker.parsing.resources import memory_message, out_of_memory

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from unstructured.documents.elements import Element

log = logging.getLogger("sluice.worker.sandbox")

ProgressCallback = Callable[[int, int, str], Awaitable[None]]
# A message from the sandbox over its pipe: (kind, *fields), as sandbox_main sends it (pickled).
Reply = tuple[Any, ...]
_MEMORY_EXIT = 3
# RLIMIT_AS, a backstop only (the watchdog holds resident memory to the limit): this many
# times the memory limit, room for what libraries reserve and never touch.
ADDRESS_SPACE_FACTOR = 4
# How often the watchdog reads the sandbox's resident memory.
WATCH_INTERVAL_SECONDS = 0.05


# --------------------------------------------------------------------------- inside the sandbox


def _limit_self(memory_limit_mb: int) -> None:
    import resource

    # Die with the worker, even if it is killed with SIGKILL (Linux). The signal follows the
    # *thread* that started us: sandboxes are started from the event loop's thread only.
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle
    # If the machine itself runs short, the kernel's OOM killer takes a sandbox first, not the
    # worker (its jobs would be lost to their leases) or the database.
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text("1000")
    if memory_limit_mb > 0:
        limit = memory_limit_mb * ADDRESS_SPACE_FACTOR * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _warm_up() -> None:
    # The sandbox never needs torch; thinc (under spaCy) imports it when it can, which costs
    # seconds and hundreds of megabytes of the memory limit. None in sys.modules makes
    # `import torch` raise ImportError, which thinc handles.
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]  # typeshed allows modules only
    from unstructured.partition.text import partition_text

    import sluice_worker.parsing.chunking
    import sluice_worker.parsing.partition  # noqa: F401 - imported for their import-time cost, paid here once

    partition_text(text="Warm up. The spaCy model loads on first use.")


def sandbox_main(conn: Connection, memory_limit_mb: int, target: str | None = None) -> None:
    """Entry point of a sandbox process. `target` names a test function to run instead of
    the parse protocol (tests use it to check the limits with a hang or a memory hog)."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("SCARF_NO_ANALYTICS", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    logging.basicConfig(level=logging.WARNING)
    try:
        _limit_self(memory_limit_mb)
        if target is None:
            _warm_up()
        conn.send(("ready", os.getpid()))
    except BaseException as exc:  # even SystemExit: the worker must hear why the sandbox did not start
        with contextlib.suppress(Exception):
            conn.send(("error", PARSER_UNAVAILABLE, f"the parser could not start: {type(exc).__name__}: {exc}", True))
        return
    elements: list[Element] | None = None
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the worker is gone
        command = message[0]
        if command == "exit":
            return
        try:
            if command == "call":  # tests only
                module, _, func = message[1].rpartition(".")
                import importlib

                conn.send(("result", getattr(importlib.import_module(module), func)(*message[2])))
            elif command == "parse":
                elements = None
                elements, summary = _parse(conn, *message[1:])
                conn.send(("parsed", asdict(summary)))
            elif command == "chunk":
                from sluice_worker.parsing.chunking import chunk_elements

                if elements is None:
                    raise RuntimeError("chunk before parse")
                settings, max_chunks = message[1], message[2]
                records = chunk_elements(elements, ChunkingSettings(**settings), max_chunks)
                elements = None
                conn.send(("chunked", [record.to_dict() for record in records]))
        except DocumentInvalid as exc:
            elements = None
            conn.send(("error", exc.code, exc.message, False))
        except Exception as exc:  # a bug or a parser failure on these bytes: reported, the sandbox lives on
            elements = None
            if out_of_memory(exc):
                # The heap may be in any state now: report, then leave so a fresh sandbox replaces us.
                with contextlib.suppress(BaseException):
                    conn.send(("error", PARSE_MEMORY_LIMIT, memory_message(memory_limit_mb), False))
                os._exit(_MEMORY_EXIT)
            # A deterministic failure of our own code or of a parser on these bytes; the log has
            # the details (the sandbox's stderr is the worker's), the owner gets the kind of error.
            log.warning("parse failed", exc_info=True)
            conn.send(("error", PARSER_CRASHED, f"the document could not be processed ({type(exc).__name__})", False))


def _parse(
    conn: Connection, data: bytes, filename: str, mime_type: str, limits: dict[str, int]
) -> tuple[list[Element], ParseSummary]:
    from sluice_worker.parsing.partition import ParseLimits, partition_document

    last = [0.0]

    def progress(done: int, total: int, unit: str) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.2 or done == total:
            last[0] = now
            conn.send(("progress", done, total, unit))

    return partition_document(data, filename, mime_type, ParseLimits(**limits), progress)


# --------------------------------------------------------------------------- the memory watchdog


def _resident_bytes(pid: int) -> int:
    """Resident memory of one process (statm's second field, in pages)."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _process_tree(pid: int) -> list[int]:
    """`pid` and every process it started, as far as /proc lists them."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        with contextlib.suppress(OSError, ValueError):
            for task in Path(f"/proc/{current}/task").iterdir():
                todo.extend(int(child) for child in (task / "children").read_text().split())
    return tree


def _resident(members: list[int]) -> int:
    """Resident memory of these processes (one gone meanwhile counts 0)."""
    total = 0
    for member in members:
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += _resident_bytes(member)
    return total


class MemoryWatch:
    """Kills a sandbox, and whatever it started, once their resident memory passes the limit.

    A thread of the worker process, not of the sandbox: it acts even while the sandbox's own
    threads are stuck in C code. Where /proc cannot be read (not Linux), it watches nothing and
    the RLIMIT_AS backstop is the only limit."""

    def __init__(self, pid: int, limit_bytes: int, interval: float = WATCH_INTERVAL_SECONDS) -> None:
        self.pid, self.limit_bytes, self.interval = pid, limit_bytes, interval
        self.exceeded = False
        self.peak_bytes = 0  # the highest resident size seen since the last reset_peak()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sluice-memwatch-{pid}", daemon=True)
        if limit_bytes > 0 and Path(f"/proc/{pid}/statm").exists():
            self._thread.start()

    def reset_peak(self) -> None:
        self.peak_bytes = 0

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if not Path(f"/proc/{self.pid}").exists():
                return
            members = _process_tree(self.pid)
            resident = _resident(members)
            self.peak_bytes = max(self.peak_bytes, resident)
            if resident > self.limit_bytes:
                self.exceeded = True
                log.warning(
                    "parse sandbox over its memory limit, killed",
                    extra={"resident_mb": resident // 2**20, "limit_mb": self.limit_bytes // 2**20},
                )
                for member in reversed(members):  # children first, the sandbox last
                    with contextlib.suppress(OSError):
                        os.kill(member, signal.SIGKILL)
                return

    def stop(self) -> None:
        self._stop.set()


# --------------------------------------------------------------------------- the worker's side


class Sandbox:
    """One sandbox process and its pipe."""

    def __init__(self, memory_limit_mb: int, target: str | None = None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=True)
        self.memory_limit_mb = memory_limit_mb
        self.process = ctx.Process(target=sandbox_main, args=(child, memory_limit_mb, target), daemon=True, name="sluice-parse")
        self.process.start()
        child.close()
        assert self.process.pid is not None  # set by start()
        self.memory = MemoryWatch(self.process.pid, memory_limit_mb * 1024 * 1024)
        self.documents = 0
        self.broken = False

    async def wait_ready(self, timeout: float) -> None:
        try:
            reply = await self._receive(
                timeout, on_timeout=lambda: TransientFailure(PARSER_UNAVAILABLE, "the parser did not start in time")
            )
        except DocumentInvalid as failure:  # it died starting (a memory limit too low for it): not the document's fault
            raise TransientFailure(PARSER_UNAVAILABLE, f"the parser could not start: {failure.message}") from None
        if reply[0] != "ready":
            self.kill()
            raise TransientFailure(reply[1], reply[2])

    async def parse(
        self,
        data: bytes,
        filename: str,
        mime_type: str,
        limits: dict[str, int],
        *,
        timeout: float,
        progress: ProgressCallback | None,
    ) -> ParseSummary:
        self.documents += 1
        self.memory.reset_peak()
        self.conn.send(("parse", data, filename, mime_type, limits))
        reply = await self._conversation(timeout, progress)
        return ParseSummary(**reply[1])

    async def chunk(self, settings: ChunkingSettings, max_chunks: int, *, timeout: float) -> list[ChunkRecord]:
        self.conn.send(("chunk", asdict(settings), max_chunks))
        reply = await self._conversation(timeout, None)
        return [ChunkRecord(**record) for record in reply[1]]

    async def call(self, function: str, *args: object, timeout: float) -> object:
        """Run a module-level function in the sandbox (tests: hangs, memory hogs)."""
        self.conn.send(("call", function, args))
        return (await self._conversation(timeout, None))[1]

    async def _conversation(self, timeout: float, progress: ProgressCallback | None) -> Reply:
        deadline = time.monotonic() + timeout
        while True:
            reply = await self._receive(
                deadline - time.monotonic(),
                on_timeout=lambda: DocumentInvalid(
                    PARSE_TIMEOUT, f"parsing the document took longer than {timeout:g} seconds and was stopped"
                ),
            )
            if reply[0] == "progress":
                if progress is not None:
                    await progress(reply[1], reply[2], reply[3])
                continue
            if reply[0] == "error":
                _, code, message, retryable = reply
                if code == PARSE_MEMORY_LIMIT:
                    self.broken = True
                raise (TransientFailure if retryable else DocumentInvalid)(code, message)
            return reply

    async def _receive(self, timeout: float, on_timeout: Callable[[], JobFailure]) -> Reply:
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()
        fd = self.conn.fileno()

        def wake() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(fd, wake)
        try:
            await asyncio.wait_for(readable, max(0.0, timeout))
        except TimeoutError:
            self.kill()
            raise on_timeout() from None
        except BaseException:
            # Cancelled (lease lost, shutdown): the sandbox may be mid-parse; stop it now.
            self.kill()
            raise
        finally:
            loop.remove_reader(fd)
        try:
            return await asyncio.to_thread(self.conn.recv)
        except (EOFError, OSError):
            raise self._death() from None
        except BaseException:
            self.kill()
            raise

    def _death(self) -> JobFailure:
        self.broken = True
        self.memory.stop()
        self.process.join(timeout=5)
        code = self.process.exitcode
        if code == _MEMORY_EXIT or self.memory.exceeded:
            return DocumentInvalid(PARSE_MEMORY_LIMIT, memory_message(self.memory_limit_mb))
        if code is not None and code < 0 and -code in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS):
            # Under RLIMIT_AS, C code that cannot allocate often aborts or crashes: the file did it.
            return DocumentInvalid(
                PARSER_CRASHED, f"the parser crashed on this document (signal {-code}); the file is damaged or too large to parse"
            )
        # Killed from outside (the system's OOM killer, an operator): not the document's fault.
        return TransientFailure(PARSER_CRASHED, f"the parser process stopped unexpectedly (exit code {code})")

    def kill(self) -> None:
        self.broken = True
        self.memory.stop()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        with contextlib.suppress(Exception):
            self.conn.close()

    def close(self) -> None:
        if not self.broken and self.process.is_alive():
            with contextlib.suppress(Exception):
                self.conn.send(("exit",))
            self.process.join(timeout=2)
        self.kill()


class SandboxPool:
    """Up to `size` warm sandboxes, one per job in flight."""

    def __init__(self, size: int, *, memory_limit_mb: int, max_documents: int = 200, start_timeout: float = 180.0) -> None:
        self.size = size
        self.memory_limit_mb = memory_limit_mb
        self.max_documents = max_documents
        self.start_timeout = start_timeout
        self._idle: list[Sandbox] = []
        self._slots: asyncio.Semaphore | None = None
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def warm(self) -> None:
        """Start every sandbox now rather than on first use."""
        boxes = [Sandbox(self.memory_limit_mb) for _ in range(self.size - len(self._idle))]
        results = await asyncio.gather(*(box.wait_ready(self.start_timeout) for box in boxes), return_exceptions=True)
        for box, result in zip(boxes, results):
            if isinstance(result, BaseException):
                box.kill()
                log.error("parse sandbox failed to start", extra={"error": str(result)})
            else:
                self._idle.append(box)

    async def _fresh(self) -> Sandbox:
        box = Sandbox(self.memory_limit_mb)
        await box.wait_ready(self.start_timeout)
        return box

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[PooledSession]:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots_loop is not loop:  # a semaphore serves one loop
            self._slots, self._slots_loop = asyncio.Semaphore(self.size), loop
        async with self._slots:
            box = self._idle.pop() if self._idle else None
            if box is None or box.broken or not box.process.is_alive():
                if box is not None:
                    box.kill()
                box = await self._fresh()
            session = PooledSession(self, box)
            try:
                yield session
            finally:
                box = session.box
                if box.broken or self._closed or box.documents >= self.max_documents:
                    box.close()
                else:
                    self._idle.append(box)

    async def close(self) -> None:
        self._closed = True
        for box in self._idle:
            box.close()
        self._idle.clear()


class PooledSession:
    """One job's use of a pooled sandbox: parse, then chunk, in the same process.

    A parse that runs out of memory in a sandbox that had parsed other documents before is
    parsed once more in a fresh sandbox (what the others left behind may have taken the room),
    within the same time limit; a fresh sandbox's failure stands."""

    def __init__(self, pool: SandboxPool, box: Sandbox) -> None:
        self.pool, self.box = pool, box

    async def parse(
        self,
        data: bytes,
        filename: str,
        mime_type: str,
        limits: dict[str, int],
        *,
        timeout: float,
        progress: ProgressCallback | None,
    ) -> ParseSummary:
        deadline = time.monotonic() + timeout
        try:
            return await self.box.parse(data, filename, mime_type, limits, timeout=timeout, progress=progress)
        except DocumentInvalid as failure:
            if failure.code != PARSE_MEMORY_LIMIT or self.box.documents <= 1:
                raise
            log.info(
                "parse ran out of memory in a used sandbox; once more in a fresh one", extra={"documents": self.box.documents}
            )
            self.box.kill()
            self.box = await self.pool._fresh()
            return await self.box.parse(
                data, filename, mime_type, limits, timeout=max(1.0, deadline - time.monotonic()), progress=progress
            )

    async def chunk(self, settings: ChunkingSettings, max_chunks: int, *, timeout: float) -> list[ChunkRecord]:
        return await self.box.chunk(settings, max_chunks, timeout=timeout)

    @property
    def peak_resident_bytes(self) -> int:
        """The sandbox's highest resident memory during the last parse (0 where not watched)."""
        return self.box.memory.peak_bytes
