"""A local rerank server for tests: real HTTP on 127.0.0.1, speaking the three APIs search calls.

POST /v2/rerank (Cohere: {"results": [{"index", "relevance_score"}]}), POST /v1/rerank (Jina:
the same shape) and POST /rerank (Hugging Face TEI: [{"index", "score"}]). A document's score is
the share of the query's words it contains less a little for length (`score`), so a test
knows the order to expect. Failures can
be injected: an HTTP status, an unreadable answer, an answer missing candidates, a delay. Every
request is recorded with its path, headers and body.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def score(query: str, text: str) -> float:
    """The share of the query's words in the text, less a little for length (so that it
    disagrees with BM25, which rewards repeated words)."""
    words = set(query.lower().split())
    found = set(text.lower().replace(".", " ").replace(",", " ").replace(":", " ").split())
    return round(len(words & found) / max(1, len(words)) - len(text) / 1000, 6)


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict


@dataclass
class Behaviour:
    status: int = 200
    delay: float = 0.0
    garbage: bool = False  # an answer that is not the API's
    drop_last: bool = False  # leave one candidate without a score
    requests: list[Request] = field(default_factory=list)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # a client that gave up (the time budget) leaves a broken pipe: expected here


class LocalRerankServer:
    def __init__(self) -> None:
        self.behaviour = Behaviour()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[Request]:
        return self.behaviour.requests

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # http.server's name
                b = server.behaviour
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                b.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if b.delay:
                    time.sleep(b.delay)
                if b.status != 200:
                    self._send(b.status, {"message": "injected failure"})
                    return
                if self.path in ("/v2/rerank", "/v1/rerank"):
                    texts, key = body["documents"], "relevance_score"
                elif self.path == "/rerank":
                    texts, key = body["texts"], "score"
                else:
                    self._send(404, {"message": f"no route {self.path}"})
                    return
                results = [{"index": i, key: score(body["query"], text)} for i, text in enumerate(texts)]
                results.sort(key=lambda r: -r[key])  # the APIs answer best first
                if b.drop_last:
                    results = results[:-1]
                if b.garbage:
                    self._send(200, {"unexpected": True})
                elif self.path == "/rerank":
                    self._send(200, results)
                else:
                    self._send(200, {"id": "test", "results": results, "meta": {}})

            def _send(self, status: int, payload) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
