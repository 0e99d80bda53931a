"""A local OpenAI-compatible embeddings server for tests: real HTTP on 127.0.0.1.

POST /v1/embeddings answers with deterministic vectors (the hashing embedder's, at the
requested dimensions), in float or base64 encoding, like the real API. Failures can be
injected: a script of responses consumed one per request, a seeded random failure rate,
or a permanent failure.

An injected `delay` is the server's latency: the answer leaves `delay` seconds after the
request arrived, its own work (vectors, JSON) done inside that time, so a benchmark against it
measures the client, not this server's Python. Answers go out in one write, without Nagle.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sluice_common.embedders import HashingEmbedder


@dataclass
class Injected:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "injected failure"
    delay: float = 0.0


@dataclass
class Request:
    time: float
    inputs: list[str]
    dimensions: int | None
    status: int


@lru_cache(maxsize=65_536)
def _vector(text: str, dimensions: int) -> tuple[float, ...]:
    return tuple(HashingEmbedder("local-test", dimensions).embed_one(text))


@lru_cache(maxsize=65_536)
def _vector_base64(text: str, dimensions: int) -> str:
    vector = _vector(text, dimensions)
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # A client that gave up (timeout tests) leaves a broken pipe behind: expected here.
        pass


class LocalOpenAIServer:
    def __init__(self, *, default_dimensions: int = 64) -> None:
        self.default_dimensions = default_dimensions
        self.script: list[Injected] = []
        self.failure_rate = 0.0
        self.random_failures = [Injected(429, {"retry-after": "0"}, "rate limited"), Injected(500, {}, "server error")]
        self.always: Injected | None = None
        self.reject_containing: str | None = None
        # Like servers that answer as they please: vectors listed last index first, or JSON
        # floats whatever `encoding_format` asked for.
        self.reverse_data = False
        self.ignore_encoding_format = False
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._random = random.Random(1234)
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> LocalOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def succeeded(self) -> list[Request]:
        return [r for r in self.requests if r.status == 200]

    def _next_failure(self, inputs: list[str]) -> Injected | None:
        with self._lock:
            if self.script:
                return self.script.pop(0)
            if self.always is not None:
                return self.always
            if self.reject_containing and any(self.reject_containing in text for text in inputs):
                return Injected(400, {}, "input rejected by content policy")
            if self.failure_rate and self._random.random() < self.failure_rate:
                return self._random.choice(self.random_failures)
        return None

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            wbufsize = 1 << 16  # headers and body leave in one write (flushed after each request)

            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                arrived = time.monotonic()
                length = int(self.headers.get("content-length", 0))
                payload = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/embeddings":
                    self._send(404, {"error": {"message": "not found"}})
                    return
                inputs = payload.get("input", [])
                inputs = [inputs] if isinstance(inputs, str) else list(inputs)
                dimensions = payload.get("dimensions")
                failure = server._next_failure(inputs)
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    status, body, headers = self._answer(payload, inputs, dimensions, failure)
                    if failure is not None and failure.delay:
                        time.sleep(max(0.0, arrived + failure.delay - time.monotonic()))
                finally:
                    with server._lock:  # before the answer leaves: the client may send the next at once
                        server.in_flight -= 1
                server.requests.append(Request(time.monotonic(), inputs, dimensions, status))
                self._send(status, body, headers)

            def _answer(
                self, payload: dict, inputs: list, dimensions: int | None, failure: Injected | None
            ) -> tuple[int, dict, dict]:
                if failure is not None and failure.status != 200:  # 200 = only slow
                    return failure.status, {"error": {"message": failure.message, "type": "injected"}}, failure.headers
                if any(not isinstance(text, str) or text == "" for text in inputs):
                    return 400, {"error": {"message": "input must be non-empty strings"}}, {}
                size = dimensions or server.default_dimensions
                base64_wanted = payload.get("encoding_format") == "base64" and not server.ignore_encoding_format
                encode = _vector_base64 if base64_wanted else _vector
                data = [
                    {"object": "embedding", "index": index, "embedding": encode(text, size)} for index, text in enumerate(inputs)
                ]
                if server.reverse_data:
                    data.reverse()
                tokens = sum(len(text.split()) for text in inputs)
                body = {
                    "object": "list",
                    "data": data,
                    "model": payload.get("model", ""),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
                return 200, body, {}

        return Handler
