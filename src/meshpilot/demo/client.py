"""Requests made from inside a pod: what an application in the mesh would send.

Standard library only, run as a script inside a pod's network namespace (its traffic is
captured like any app's):

    client.py http http://reviews:9080/ [-H end-user:jason] [--count 1000] [-X POST]
    client.py http http://reviews:9080/ --duration 4 --interval 0.02
    client.py http http://reviews:9080/ --count 8 --request-id run1
    client.py tcp tcp-echo 9000 hello

It prints one JSON object: `{"counts": {"<status> <first body line>": n}}` for --count,
`{"log": [[unix time, status, line], ...]}` for --duration, `{"line": "..."}` for tcp
(`--full`: the whole body instead of its first line). `--request-id P` sends request i with
`x-request-id: P-i` and adds `"requests": [[id, status, line], ...]`, so that each answer can
be matched with the proxies' access log lines.
Status 0 means no HTTP answer (the line then holds the error). HTTP connections are kept
alive; `--connect host:port` sends to another address than the URL's (a sidecar's
127.0.0.1 listener when nothing captures traffic).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import time
from collections import Counter
from collections.abc import Sequence
from urllib.parse import urlsplit

__all__ = ["Session", "main"]

_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class Session:
    """GETs over one kept-alive connection, reopened when the server closes it."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        connect: str,
        timeout: float,
        full: bool = False,
        method: str = "GET",
    ) -> None:
        parts = urlsplit(url)
        self.full = full
        self.method = method
        self.host_header = parts.netloc
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host, _, port = (connect or parts.netloc).rpartition(":")
        if not host:
            host, port = connect or parts.netloc, "80"
        self.address = (host, int(port))
        self.headers = {"Host": self.host_header, **headers}
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def get(self) -> tuple[int, str]:
        for attempt in (1, 2):
            reused = self.conn is not None
            try:
                return self._get_once()
            except _STALE as exc:
                self.close()
                if attempt == 2 or not reused:  # only a kept-alive connection gets a retry
                    return 0, f"error: {type(exc).__name__}: {exc}"
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                return 0, f"error: {type(exc).__name__}: {exc}"
        return 0, "error: unreachable"

    def _get_once(self) -> tuple[int, str]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(*self.address, timeout=self.timeout)
        self.conn.request(self.method, self.target, headers=self.headers)
        reply = self.conn.getresponse()
        body = reply.read().decode(errors="replace")
        if reply.will_close:
            self.close()
        if self.full:
            return reply.status, body
        lines = body.strip().splitlines()
        return reply.status, lines[0] if lines else ""

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def run_http(args: argparse.Namespace) -> dict[str, object]:
    headers = dict(h.split(":", 1) for h in args.header)
    headers = {k.strip(): v.strip() for k, v in headers.items()}
    session = Session(args.url, headers, args.connect, args.timeout, args.full, args.method)
    try:
        if args.duration:
            log = []
            end = time.monotonic() + args.duration
            while time.monotonic() < end:
                status, line = session.get()
                log.append([time.time(), status, line])
                time.sleep(args.interval)
            return {"log": log}
        counts: Counter[str] = Counter()
        requests = []
        for i in range(args.count):
            if args.request_id:
                session.headers["x-request-id"] = f"{args.request_id}-{i}"
            status, line = session.get()
            counts[f"{status} {line}"] += 1
            requests.append([session.headers.get("x-request-id", ""), status, line])
        return (
            {"counts": dict(counts), "requests": requests}
            if args.request_id
            else {"counts": dict(counts)}
        )
    finally:
        session.close()


def run_tcp(args: argparse.Namespace) -> dict[str, object]:
    try:
        with socket.create_connection((args.host, args.port), timeout=args.timeout) as sock:
            sock.sendall(args.message.encode() + b"\n")
            line = sock.makefile().readline().strip()
    except OSError as exc:
        return {"line": "", "error": f"{type(exc).__name__}: {exc}"}
    return {"line": line}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="client.py")
    sub = parser.add_subparsers(dest="kind", required=True)
    http_parser = sub.add_parser("http")
    http_parser.add_argument("url")
    http_parser.add_argument("-H", "--header", action="append", default=[])
    http_parser.add_argument("--count", type=int, default=1)
    http_parser.add_argument("--duration", type=float, default=0.0)
    http_parser.add_argument("--interval", type=float, default=0.02)
    http_parser.add_argument("--connect", default="")
    http_parser.add_argument("--timeout", type=float, default=5.0)
    http_parser.add_argument("--full", action="store_true", help="the whole body, not a line")
    http_parser.add_argument("-X", "--method", default="GET")
    http_parser.add_argument("--request-id", default="", help="x-request-id prefix")
    tcp_parser = sub.add_parser("tcp")
    tcp_parser.add_argument("host")
    tcp_parser.add_argument("port", type=int)
    tcp_parser.add_argument("message")
    tcp_parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    result = run_http(args) if args.kind == "http" else run_tcp(args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
