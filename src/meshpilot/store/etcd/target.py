"""Where an etcd store is: `etcd://host:port[,host:port...]/prefix`, TLS with `etcd+https://`.

    etcd://127.0.0.1:2379/meshpilot
    etcd+https://a:2379,b:2379/meshpilot?cacert=ca.pem&cert=client.pem&key=client-key.pem

Every object is one key under the prefix (`/meshpilot/<Kind>/<namespace>/<name>`); the
default prefix is `/meshpilot`. Client certificate files are read when the store is opened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from meshpilot.store.etcd.errors import EtcdUrlError

__all__ = ["ETCD_SCHEMES", "EtcdTarget", "EtcdTls", "parse_etcd_url"]

ETCD_SCHEMES = frozenset({"etcd", "etcd+http", "etcd+https"})
_ENDPOINT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$")
_TLS_PARAMS = ("cacert", "cert", "key")


@dataclass(frozen=True, slots=True)
class EtcdTls:
    """PEM bytes for the gRPC channel: the CA to trust (None: the system roots), and a
    client certificate and key (both or neither)."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None


@dataclass(frozen=True, slots=True)
class EtcdTarget:
    endpoints: tuple[str, ...]
    prefix: str  # "/meshpilot/": every key of the store starts with it
    tls: EtcdTls | None = None

    def display(self) -> str:
        scheme = "etcd+https" if self.tls else "etcd"
        return f"{scheme}://{','.join(self.endpoints)}{self.prefix.rstrip('/')}"


def parse_etcd_url(url: str) -> EtcdTarget:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ETCD_SCHEMES:
        raise EtcdUrlError(f"{url!r} is not an etcd URL (etcd://host:port[,host:port]/prefix)")
    endpoints = tuple(e.strip() for e in parts.netloc.split(",") if e.strip())
    if not endpoints:
        raise EtcdUrlError(f"{url!r}: give at least one endpoint: etcd://host:port/prefix")
    for endpoint in endpoints:
        match = _ENDPOINT.match(endpoint)
        if match is None or not 0 < int(match.group(2)) < 65536:
            raise EtcdUrlError(f"{url!r}: endpoint {endpoint!r} is not host:port")
    path = unquote(parts.path).strip("/")
    if any(not segment for segment in path.split("/")) and path:
        raise EtcdUrlError(f"{url!r}: the prefix {parts.path!r} has an empty segment")
    prefix = f"/{path or 'meshpilot'}/"
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(_TLS_PARAMS))
    if unknown:
        raise EtcdUrlError(f"{url!r}: unknown parameter {unknown[0]!r} (known: cacert, cert, key)")
    files = {name: query[name][-1] for name in _TLS_PARAMS if name in query}
    if scheme != "etcd+https":
        if files:
            raise EtcdUrlError(f"{url!r}: TLS files need an etcd+https:// URL")
        return EtcdTarget(endpoints, prefix)
    if ("cert" in files) != ("key" in files):
        raise EtcdUrlError(f"{url!r}: a client certificate needs both cert= and key=")
    tls = EtcdTls(*(_read(files.get(name), name) for name in _TLS_PARAMS))
    return EtcdTarget(endpoints, prefix, tls)


def _read(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise EtcdUrlError(f"etcd TLS {what} {path}: {exc.strerror}") from exc
