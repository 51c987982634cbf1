"""The CLI's side of `gitops serve`'s JSON API (api.py): the gitops verbs with `--server URL`
call these instead of acting on the store and the repositories themselves.

    client = ApiClient("http://127.0.0.1:8080", token="<session or API token>")
    client.list_apps(); client.get("argocd", "shop", refresh=True); client.sync(...)

The token travels as `Authorization: Bearer <token>` (never in a message). The server's
errors come back as the GitopsError the direct mode raises (same message): 401 the reason
the server gives, 403 PermissionDenied's text, 404 the not-found text, else its message.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from meshpilot.gitops.errors import GitopsError

__all__ = ["ApiClient", "ApiError"]

_PREFIX = "/api/v1/applications"


class ApiError(GitopsError):
    """The server refused the request (or could not be reached); `status` 0 if unreached."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ApiClient:
    def __init__(self, url: str, token: str | None = None, timeout: float = 300) -> None:
        parsed = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise GitopsError(f"--server {url!r}: expected a URL such as http://127.0.0.1:8080")
        self.base = f"{parsed.scheme}://{parsed.netloc}{parsed.path.rstrip('/')}"
        self.headers = {"Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout

    # -- verbs ---------------------------------------------------------------------------

    def list_apps(self) -> list[dict[str, Any]]:
        items = self._call("GET", _PREFIX).get("items") or []
        return [i for i in items if isinstance(i, dict)]

    def get(self, namespace: str, name: str, refresh: bool = False) -> dict[str, Any]:
        query = "?refresh=normal" if refresh else ""
        return self._call("GET", f"{self._app(namespace, name)}{query}")

    def diff(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call("GET", f"{self._app(namespace, name)}/diff")

    def sync(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", f"{self._app(namespace, name)}/sync", body)

    def history(self, namespace: str, name: str) -> list[dict[str, Any]]:
        items = self._call("GET", f"{self._app(namespace, name)}/history").get("history") or []
        return [i for i in items if isinstance(i, dict)]

    def rollback(self, namespace: str, name: str, history_id: int, prune: bool) -> dict[str, Any]:
        body = {"id": history_id, "prune": prune}
        return self._call("POST", f"{self._app(namespace, name)}/rollback", body)

    # -- transport -----------------------------------------------------------------------

    def _app(self, namespace: str, name: str) -> str:
        quote = urllib.parse.quote
        return f"{_PREFIX}/{quote(namespace, safe='')}/{quote(name, safe='')}"

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Any API call (login, accounts, tokens: cli/gitops_auth.py)."""
        return self._call(method, path, body)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            raise ApiError(_message(exc.read(), exc.code), exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(f"cannot reach the gitops server at {self.base}: {reason}", 0) from None
        try:
            answer = json.loads(payload or b"{}")
        except ValueError:
            raise ApiError(f"{self.base}: the server's answer is not JSON", 0) from None
        if not isinstance(answer, dict):
            raise ApiError(f"{self.base}: unexpected answer from the server", 0)
        return answer


def _message(payload: bytes, status: int) -> str:
    """The API's {"message": ...} (Argo CD's error shape), else the status line."""
    try:
        answer = json.loads(payload)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and answer.get("message"):
        return str(answer["message"])
    return f"the gitops server answered HTTP {status}"
