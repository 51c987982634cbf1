"""The web UI of `meshpilot gitops serve`, on the API's port: server-rendered pages (Jinja2)
with htmx and a few lines of script, every asset in the package (no CDN, no build step).

    GET  /                                  -> /applications
    GET  /login, POST /login, POST /logout  the session cookie (the API's session token)
    GET  /applications[?project&sync&health&repo&namespace&q&page]
    GET  /applications/{ns}/{name}          tree, sync form, history, conditions, live status
    GET  /applications/{ns}/{name}/diff     the side-by-side diff (loaded by htmx)
    GET  /applications/{ns}/{name}/events   server-sent events: the live status panel
    GET  /applications/{ns}/{name}/preview?head=BRANCH   `gitops preview` of a branch
    POST /applications/{ns}/{name}/sync     {dry_run, prune, resource...} -> the app page
    POST /applications/{ns}/{name}/rollback {id}
    GET  /mesh, /mesh/proxies/{id}          with `--discovery`: proxy-status, proxy-config
    GET  /mesh/explain?from&url&method&headers&gateway   a request's path (meshpilot explain)
    GET  /static/{file}

Every page but the login form and /static needs a valid session: without one a GET is sent
to the login form and anything else gets 401, before any handler runs (a page added later
is closed too). The pages call the API's own handlers with the session's token, so RBAC is
the API's: a read-only user sees no sync button and a forged POST gets the API's 403.
"""

from __future__ import annotations

import asyncio
import contextlib
from importlib import resources
from urllib.parse import quote, unquote

from meshpilot import http1
from meshpilot.gitops.auth import Authenticator, Unauthenticated
from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.server.api import ApplicationApi
from meshpilot.gitops.server.http import Request, Response
from meshpilot.http1 import HttpError
from meshpilot.ui.apps import AppPages
from meshpilot.ui.mesh import MeshPages
from meshpilot.ui.operations import Operations
from meshpilot.ui.templates import render
from meshpilot.ui.visit import Visit
from meshpilot.ui.web import (
    bearer_headers,
    check_same_origin,
    clear_cookie,
    form,
    html,
    redirect,
    session_cookie,
)

__all__ = ["Ui"]

_SECTIONS = frozenset({"", "login", "logout", "applications", "mesh", "static"})
_STATIC = {
    "htmx.min.js": "text/javascript; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
    "ui.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


class Ui:
    def __init__(
        self, api: ApplicationApi, auth: Authenticator, discovery: str | None = None
    ) -> None:
        self.auth = auth
        self.operations = Operations(api)
        self.apps = AppPages(api, self.operations)
        self.mesh = MeshPages(discovery, api.store)

    async def close(self) -> None:
        await self.operations.close()

    @staticmethod
    def owns(path: str) -> bool:
        """The paths the UI answers (everything else is the API's)."""
        return unquote(path.strip("/").split("/")[0]) in _SECTIONS

    async def dispatch(self, request: Request) -> http1.Response:
        parts = request.path.strip("/").split("/")
        section = unquote(parts[0])
        try:
            if section == "static" and request.method == "GET" and len(parts) == 2:
                return self._static(unquote(parts[1]))
            if section == "login":
                return await self._login(request)
            visit = await self._authenticate(request)
            if visit is None:
                if request.method == "GET":
                    return redirect("/login?next=" + quote(request.path))
                return html(render("error.html", user="", message="log in first"), 401)
            if request.method != "GET":
                check_same_origin(request)
            if section == "":
                return redirect("/applications")
            if section == "logout" and request.method == "POST":
                return await self._logout(visit)
            if section == "applications":
                return await self.apps.dispatch(visit, [unquote(p) for p in parts[1:]])
            if section == "mesh":
                return await self.mesh.dispatch(visit, [unquote(p) for p in parts[1:]])
            return self._error(visit.user, "no such page", 404)
        except HttpError as exc:
            return self._error("", str(exc), exc.status)

    async def _authenticate(self, request: Request) -> Visit | None:
        headers = bearer_headers(request.headers)
        try:
            subject = await asyncio.to_thread(self.auth.authenticate, headers)
        except Unauthenticated:
            return None
        caller = self.auth.caller(subject)
        return Visit(request, subject.name, caller, headers)

    async def _login(self, request: Request) -> http1.Response:
        target = request.param("next") or "/applications"
        if not target.startswith("/") or target.startswith("//"):
            target = "/applications"  # never a redirect to another site
        if request.method == "GET":
            return html(render("login.html", user="", error="", next=target))
        if request.method != "POST":
            return self._error("", "method not allowed", 405)
        check_same_origin(request)
        fields = form(request)
        username = (fields.get("username") or [""])[0]
        password = (fields.get("password") or [""])[0]
        try:
            token = await asyncio.to_thread(self.auth.login, username, password)
        except Unauthenticated as exc:
            page = render("login.html", user="", error=str(exc), next=target)
            return html(page, 401)
        return redirect(target, (session_cookie(token),))

    async def _logout(self, visit: Visit) -> http1.Response:
        # An API token in the cookie has no session to revoke: still logged out here.
        with contextlib.suppress(GitopsError):
            subject = await asyncio.to_thread(self.auth.authenticate, visit.api_headers)
            await asyncio.to_thread(self.auth.logout, subject)
        return redirect("/login", (clear_cookie(),))

    def _static(self, name: str) -> http1.Response:
        kind = _STATIC.get(name)
        if kind is None:
            return Response.error(f"no such file: /static/{name}", 404)
        data = resources.files("meshpilot.ui").joinpath("static", name).read_bytes()
        return http1.Response(200, data, kind, (("Cache-Control", "max-age=300"),))

    @staticmethod
    def _error(user: str, message: str, status: int) -> http1.Response:
        return html(render("error.html", user=user, message=message), status)
