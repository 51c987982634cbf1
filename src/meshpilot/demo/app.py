"""The demo's workloads: a tiny HTTP app, a TCP echo service and the "external" server.

Standard library only, run as a script by whatever Python is at hand inside a pod
(`python3 app.py http --service reviews --version v1 --pod reviews-v1 --port 9080`), so an
unprivileged pod user can run it without reading meshpilot's virtualenv.

HTTP answers one line, `<service> <version> pod=<pod> host=<Host> from=<peer>`, plus
` caller=<SPIFFE id>` when the request came over mTLS (the inbound sidecar's
X-Forwarded-Client-Cert names the client's certificate), except:

    /flaky            503 for the first attempt of each x-request-id (retries make it 200)
    /slow?ms=N        answer after N milliseconds (timeouts)
    /status/N         answer with status N
    /header?name=H    the line plus ` H=<value of request header H>` (what filters added)
    /headers          the line and ` headers=name=value ...` of the request as it arrived
    /productpage      with --call URL: call URL (propagating end-user and x-request-id;
                      Host from --call-host if given) and answer `<own line> -> <upstream>`

TCP echo answers each line received with `<service> <version> pod=<pod>: <line>`.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import socketserver
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

__all__ = ["main"]

PROPAGATED = ("end-user", "x-request-id", "x-b3-traceid", "x-b3-spanid", "x-b3-sampled")
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Identity:
    def __init__(
        self, service: str, version: str, pod: str, call: str = "", call_host: str = ""
    ) -> None:
        self.service = service
        self.version = version
        self.pod = pod
        self.call = call
        self.call_host = call_host
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def first_attempt(self, request_id: str) -> bool:
        """True the first time a request id is seen (remembers the last 10000)."""
        with self._lock:
            if request_id in self._seen:
                return False
            self._seen[request_id] = None
            if len(self._seen) > 10000:
                self._seen.popitem(last=False)
            return True


class Handler(BaseHTTPRequestHandler):
    server: HttpServer
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: without TCP_NODELAY the body waits for the peer's
    # delayed ACK (40 ms per request).
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        me = self.server.identity
        url = urlsplit(self.path)
        peer = self.client_address[0]
        line = (
            f"{me.service} {me.version} pod={me.pod} host={self.headers.get('Host', '')} "
            f"from={peer}"
        )
        if caller := _xfcc_uri(self.headers.get("x-forwarded-client-cert", "")):
            line += f" caller={caller}"
        if url.path == "/flaky":
            request_id = self.headers.get("x-request-id", "")
            if not request_id or me.first_attempt(request_id):
                self._answer(503, f"{line} flaky: failed this attempt")
                return
        elif url.path == "/slow":
            millis = int(parse_qs(url.query).get("ms", ["1000"])[0])
            time.sleep(millis / 1000)
        elif url.path == "/header":
            name = parse_qs(url.query).get("name", [""])[0]
            line += f" {name}={self.headers.get(name, '')}"
        elif url.path.startswith("/status/"):
            self._answer(int(url.path.rsplit("/", 1)[1]), line)
            return
        elif url.path == "/headers":  # what reached the app: headers a proxy added show here
            names = sorted(f"{k.lower()}={v}" for k, v in self.headers.items())
            self._answer(200, f"{line} headers={' '.join(names)}")
            return
        elif url.path == "/productpage" and me.call:
            status, upstream = self._call(me.call)
            self._answer(200 if status == 200 else 502, f"{line} -> {upstream}")
            return
        self._answer(200, line)

    def do_POST(self) -> None:  # answered as GET (authorization by method)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.do_GET()

    def _call(self, url: str) -> tuple[int, str]:
        headers = {k: v for k in PROPAGATED if (v := self.headers.get(k))}
        if self.server.identity.call_host:
            headers["Host"] = self.server.identity.call_host
        request = urllib.request.Request(url, headers=headers)
        try:
            with _NO_PROXY.open(request, timeout=5) as reply:
                return reply.status, reply.read().decode().strip()
        except urllib.error.HTTPError as exc:
            return exc.code, f"{exc.code} {exc.read().decode().strip()}"
        except OSError as exc:
            return 0, f"error {exc}"

    def _answer(self, status: int, text: str) -> None:
        body = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _xfcc_uri(value: str) -> str:
    """The URI (SPIFFE id) of the last element of an X-Forwarded-Client-Cert header: the
    certificate of the client that reached this pod's sidecar."""
    found = ""
    for part in value.replace(",", ";").split(";"):
        key, _, val = part.partition("=")
        if key.strip().lower() == "uri":
            found = val.strip().strip('"')
    return found


class HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], identity: Identity) -> None:
        self.identity = identity
        super().__init__(address, Handler)

    def server_bind(self) -> None:
        # Skip HTTPServer's getfqdn(): no DNS in a pod, a lookup would only stall.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]


class EchoHandler(socketserver.StreamRequestHandler):
    server: EchoServer
    disable_nagle_algorithm = True

    def handle(self) -> None:
        me = self.server.identity
        for raw in self.rfile:
            line = raw.decode(errors="replace").rstrip("\r\n")
            self.wfile.write(f"{me.service} {me.version} pod={me.pod}: {line}\n".encode())


class EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], identity: Identity) -> None:
        self.identity = identity
        super().__init__(address, EchoHandler)


def serve(kind: str, identity: Identity, bind: str, ports: Sequence[int]) -> None:
    servers: list[socketserver.TCPServer] = []
    for port in ports:
        if kind == "tcp":
            servers.append(EchoServer((bind, port), identity))
        else:
            servers.append(HttpServer((bind, port), identity))
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="app.py", description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=("http", "tcp"))
    parser.add_argument("--service", required=True)
    parser.add_argument("--version", default="v1")
    parser.add_argument("--pod", default=socket.gethostname())
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--port", type=int, action="append", required=True)
    parser.add_argument("--call", default="", help="URL /productpage calls")
    parser.add_argument("--call-host", default="", help="its Host header (default: the URL's)")
    args = parser.parse_args(argv)
    identity = Identity(args.service, args.version, args.pod, args.call, args.call_host)
    with contextlib.suppress(KeyboardInterrupt):
        serve(args.kind, identity, args.bind, args.port)


if __name__ == "__main__":
    main()
