"""The request to explain: a URL (http, https, tcp, tls), a method and headers."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from meshpilot.errors import MeshpilotError

__all__ = ["ExplainError", "Request", "parse_request"]

_DEFAULT_PORTS = {"http": 80, "https": 443, "tcp": 0, "tls": 443}


class ExplainError(MeshpilotError):
    """Input explain cannot walk: a bad URL or header, an unknown pod."""


@dataclass(frozen=True, slots=True)
class Request:
    scheme: str  # http, https, tcp, tls
    host: str
    port: int
    path: str = "/"
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = field(default=())

    @property
    def is_http(self) -> bool:
        """Whether the sidecar sees HTTP (https and tls are opaque TLS to it)."""
        return self.scheme == "http"

    @property
    def is_tls(self) -> bool:
        return self.scheme in ("https", "tls")

    @property
    def request_id(self) -> str:
        """The x-request-id given with -H ("" when none)."""
        return self.header("x-request-id") or ""

    @property
    def url(self) -> str:
        tail = self.path if self.scheme in ("http", "https") else ""
        return f"{self.scheme}://{self.host}:{self.port}{tail}"

    def header(self, name: str) -> str | None:
        """The request header `name` (case-insensitive); :authority, :path, :method too."""
        lower = name.lower()
        if lower in (":authority", "host"):
            # A Host header given with -H wins over the URL's host, as with curl.
            return next((v for k, v in self.headers if k == "host"), self.host)
        pseudo = {":path": self.path, ":method": self.method}
        if lower in pseudo:
            return pseudo[lower]
        for key, value in self.headers:
            if key.lower() == lower:
                return value
        return None


def parse_request(url: str, method: str = "GET", headers: tuple[str, ...] = ()) -> Request:
    """`http://host:port/path`, `https://...`, `tcp://host:port` or `tls://sni:port`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ExplainError(
            f"request {url!r}: the scheme must be http, https, tcp or tls (as in http://reviews:9080/)"
        )
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError as exc:
        raise ExplainError(f"request {url!r}: the port is not a number in 1-65535") from exc
    if not parts.hostname:
        raise ExplainError(f"request {url!r}: no host (as in {scheme}://reviews:9080)")
    if not port:
        raise ExplainError(f"request {url!r}: a tcp:// request needs a port (tcp://mongodb:27017)")
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return Request(
        scheme=scheme,
        host=parts.hostname.lower(),
        port=port,
        path=path,
        method=method.upper(),
        headers=tuple(_header(h) for h in headers),
    )


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise ExplainError(f"header {text!r}: expected 'name: value'")
    return name.strip().lower(), value.strip()
