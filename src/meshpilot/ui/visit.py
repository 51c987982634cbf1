"""One authenticated page request: who asks (the session cookie's subject, under the store's
RBAC), and the same request as the JSON API would get it (the cookie's token as a bearer
token), so the pages call the API's handlers and inherit their RBAC checks unchanged."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from meshpilot.gitops.admission import Caller
from meshpilot.http1 import HttpError, Request, Response

__all__ = ["ApiFailed", "Visit"]


class ApiFailed(HttpError):
    """The API refused (its status and Argo CD error message), shown on an error page."""


@dataclass(frozen=True, slots=True)
class Visit:
    request: Request
    user: str
    caller: Caller
    api_headers: dict[str, str]

    def api_request(self, method: str, path: str, body: Any = None) -> Request:
        data = json.dumps(body).encode() if body is not None else b""
        headers = {**self.api_headers, "content-type": "application/json"}
        return Request(method, path, headers, {}, data)

    @staticmethod
    def answer(response: Response) -> Any:
        """The API's JSON answer; ApiFailed with its message when it refused."""
        data = json.loads(response.body or b"null")
        if response.status >= 400:
            message = data.get("message", "") if isinstance(data, dict) else str(data)
            raise ApiFailed(message or f"the API answered {response.status}", response.status)
        return data
