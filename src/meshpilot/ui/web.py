"""The UI's HTTP vocabulary on meshpilot.http1: HTML answers, redirects, the session cookie,
form bodies, and the same-origin check of every form POST."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

from meshpilot.http1 import BadRequest, HttpError, Request, Response

__all__ = [
    "COOKIE",
    "bearer_headers",
    "check_same_origin",
    "clear_cookie",
    "form",
    "html",
    "redirect",
    "session_cookie",
    "token_of",
]

# The session token of `POST /login` (the API's own JWT). HttpOnly: no script reads it;
# SameSite=Strict: another site's page cannot make the browser send it.
COOKIE = "meshpilot.token"
_NO_STORE = ("Cache-Control", "no-store")
# The pages load nothing from elsewhere: scripts and styles of this origin only.
_CSP = (
    "Content-Security-Policy",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
)


def html(text: str, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(status, text.encode(), "text/html; charset=utf-8", (_NO_STORE, _CSP, *headers))


def redirect(location: str, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    """303: after a form POST the browser GETs `location` (a reload does not resubmit)."""
    return Response(303, b"", "text/plain; charset=utf-8", (("Location", location), *headers))


def session_cookie(token: str) -> tuple[str, str]:
    return ("Set-Cookie", f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict")


def clear_cookie() -> tuple[str, str]:
    return ("Set-Cookie", f"{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")


def token_of(headers: Mapping[str, str]) -> str:
    """The session token of the cookie header, "" when there is none."""
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value.strip()
    return ""


def bearer_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """What the API's Authenticator reads: the cookie's token as a bearer token (no cookie:
    no credentials, so anonymous access is decided exactly as for the API)."""
    token = token_of(headers)
    return {"authorization": f"Bearer {token}"} if token else {}


def form(request: Request) -> dict[str, list[str]]:
    """An application/x-www-form-urlencoded body."""
    kind = request.headers.get("content-type", "application/x-www-form-urlencoded")
    if not kind.startswith("application/x-www-form-urlencoded"):
        raise HttpError("expected a form (application/x-www-form-urlencoded)", 415)
    try:
        text = request.body.decode()
        return parse_qs(text, keep_blank_values=True, max_num_fields=2000)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"the form cannot be read: {exc}") from None


def check_same_origin(request: Request) -> None:
    """A form POST must come from a page of this server: the browser's Origin (or, without
    it, Referer) names our host. Requests without either (curl, scripts holding the cookie
    themselves) are not cross-site forgeries and pass."""
    host = request.headers.get("host", "")
    origin = request.headers.get("origin") or request.headers.get("referer", "")
    if not origin:
        return
    if origin == "null" or urlsplit(origin).netloc != host:
        raise HttpError(f"refused: a form of another site ({origin[:80]}) posted here", 403)
