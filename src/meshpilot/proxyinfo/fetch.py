"""GET a JSON page over HTTP with a timeout; every failure is one `FetchError` line that
names what was asked and where (the control plane, or an Envoy's admin).

The standard library's urllib is enough for a few GETs on loopback; proxies from the
environment are ignored, since these addresses are local ones.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from meshpilot.errors import MeshpilotError

__all__ = ["DEFAULT_TIMEOUT", "FetchError", "base_url", "get_json"]

DEFAULT_TIMEOUT = 5.0  # seconds
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class FetchError(MeshpilotError):
    """The page could not be read: nothing answers, an HTTP error, or not JSON.
    `status` is the HTTP status when there was an answer (0 otherwise)."""

    def __init__(self, message: str, status: int = 0, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


def base_url(address: str) -> str:
    """`127.0.0.1:15000` or `http://127.0.0.1:15000/` → `http://127.0.0.1:15000`."""
    address = address.strip().rstrip("/")
    if "://" not in address:
        address = "http://" + address
    parts = urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise FetchError(f"{address!r} is not an http:// address (host:port)")
    return address


def get_json(base: str, target: str, what: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """GET `base` + `target` and parse the JSON body. `what` names the server in errors,
    e.g. "the control plane" or "Envoy admin"."""
    url = base + target
    try:
        with _OPENER.open(url, timeout=timeout) as reply:
            body = reply.read()
    except urllib.error.HTTPError as exc:
        detail = _error_detail(exc.read())
        raise FetchError(
            f"{what} at {base} answered GET {target} with {exc.code} {exc.reason}"
            + (f": {detail}" if detail else ""),
            status=exc.code,
            detail=detail,
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            reason = f"no answer within {timeout:g}s"
        raise FetchError(f"cannot reach {what} at {base}: {_reason(reason)}") from exc
    try:
        return json.loads(body)
    except ValueError as exc:
        raise FetchError(f"{what} at {base} did not answer GET {target} with JSON") from exc


def _reason(reason: object) -> str:
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


def _error_detail(body: bytes) -> str:
    """The control plane answers errors as {"error": "..."}; others as text."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text.splitlines()[0][:200] if text else ""
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])
    return text.splitlines()[0][:200]
