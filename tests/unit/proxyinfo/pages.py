"""A loopback HTTP server answering fixed pages (path with query → status and body), for
the fetch and CLI tests that need something at a URL; the real control plane and Envoy
are exercised in tests/e2e/test_proxy_info.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Pages = Mapping[str, tuple[int, Any]]  # target → (status, JSON value or raw bytes)


def _handler(pages: Pages) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, value = pages.get(self.path, (404, {"error": f"no page {self.path}"}))
            body = value if isinstance(value, bytes) else json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serving(pages: Pages) -> Iterator[str]:
    """The base URL (http://127.0.0.1:<port>) while the pages are served."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(pages))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
