"""A Zipkin-format span collector for tests: `POST /api/v2/spans` with a JSON list of spans
(Zipkin v2, what Envoy's zipkin tracer sends), kept in memory; 202 like Zipkin."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SPANS_PATH = "/api/v2/spans"


class Collector:
    def __init__(self) -> None:
        self._spans: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.address: tuple[str, int] = ("", 0)

    def add(self, spans: list[dict[str, Any]]) -> None:
        with self._lock:
            self._spans.extend(spans)

    def spans(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._spans)

    def traces(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for span in self.spans():
            out.setdefault(span["traceId"], []).append(span)
        return out


def _handler(collector: Collector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _body(self) -> bytes:
            """The request body, whole or chunked (Envoy's tracer streams it chunked)."""
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            out = b""
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                out += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()  # the empty line after the last chunk
            return out

        def do_POST(self) -> None:
            body = self._body()
            if self.path != SPANS_PATH:
                self.send_response(404)
            else:
                spans = json.loads(body or b"[]")
                collector.add(spans if isinstance(spans, list) else [])
                self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def zipkin_collector(host: str) -> Iterator[Collector]:
    """A collector listening on `host` (a free port), stopped when the block ends."""
    collector = Collector()
    server = ThreadingHTTPServer((host, 0), _handler(collector))
    collector.address = (host, server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield collector
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
