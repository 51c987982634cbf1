"""`gitops serve`'s HTTP side (Argo CD's argocd-server, trimmed), on 127.0.0.1:8080 unless
told otherwise:

    POST /api/webhook          git push webhooks → immediate refresh of matching apps
                               (verified with the secrets of argocd-secret when set)
    /api/v1/session, account   login, logout, accounts and API tokens (auth_api.py)
    /api/v1/applications/...   JSON API for the CLI's `--server URL` (api.py)
    GET  /metrics              argocd_app_info, argocd_app_sync_total, argocd_app_reconcile
    GET  /healthz              ok; 503 naming the task while a background task (store watch,
                               resync, reconcile workers, notifier) has failed and restarts
    GET  /debug/tasks          each background task: state, failures, restarts, last error
    /, /login, /applications/..., /mesh/..., /static/...
                               the web UI (meshpilot/ui): its own login form and session
                               cookie, closed the same way (a GET goes to the login form)

Every path but the login, the webhook, /metrics and /healthz answers 401 without valid
credentials (gitops/auth), before any handler runs: a route added later is closed too.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from meshpilot import http1
from meshpilot.gitops.auth import Authenticator, ServerState, Unauthenticated
from meshpilot.gitops.controller.loop import Controller
from meshpilot.gitops.notify.delivery import PullRequestIndex
from meshpilot.gitops.server.api import ApplicationApi
from meshpilot.gitops.server.auth_api import AuthApi
from meshpilot.gitops.server.http import Request, Response, Router, serve
from meshpilot.gitops.server.webhook import WebhookError, WebhookSecrets, parse_webhook

if TYPE_CHECKING:
    from meshpilot.ui import Ui

__all__ = ["GitopsServer", "WebhookSecrets", "default_state_dir"]

log = logging.getLogger(__name__)


def default_state_dir(store_root: str | Path) -> Path:
    """The server's private directory (token key, initial admin password): in the store."""
    return Path(store_root) / ".gitops" / "server"


# What answers without credentials: the login itself, webhooks (their own secrets), and the
# monitoring paths. Everything else, present or future, needs a valid token.
_PUBLIC = frozenset({
    ("POST", "api/v1/session"), ("POST", "api/webhook"), ("GET", "metrics"), ("GET", "healthz"),
    ("GET", "debug/leaderz"),
})  # fmt: skip


class _AuthenticatedRouter(Router):
    """Refuses requests without valid credentials before routing them, but for _PUBLIC."""

    def __init__(self, auth: Authenticator) -> None:
        super().__init__()
        self.auth = auth
        self.ui: Ui | None = None

    async def dispatch(self, request: Request) -> http1.Response:
        if self.ui is not None and self.ui.owns(request.path):
            return await self.ui.dispatch(request)  # (authenticates every page itself)
        # The path as Router.dispatch reads it: `//api/%761/...` is /api/v1/... too.
        path = "/".join(unquote(p) for p in request.path.strip("/").split("/"))
        if (request.method, path) not in _PUBLIC:
            try:
                await asyncio.to_thread(self.auth.authenticate, request.headers)
            except Unauthenticated as exc:
                return Response.error(str(exc), 401)
        return await super().dispatch(request)


class GitopsServer:
    def __init__(
        self,
        controller: Controller,
        secrets: WebhookSecrets | None = None,
        pull_requests: PullRequestIndex | None = None,
        auth: Authenticator | None = None,
        *,
        discovery: str | None = None,
    ) -> None:
        self.controller = controller
        self.secrets = secrets or WebhookSecrets()
        self.pull_requests = pull_requests
        store = controller.store
        if auth is None:  # beside a directory store; other stores are given their `auth`
            root = getattr(store, "root", None)
            if root is None:
                raise ValueError(f"{store!r}: the GitOps server needs its `auth`")
            auth = Authenticator(store, ServerState(default_state_dir(root)))
        self.auth = auth
        self.router = _AuthenticatedRouter(self.auth)
        self.router.add("POST", "/api/webhook", self.webhook)
        self.router.add("GET", "/metrics", self.metrics)
        self.router.add("GET", "/healthz", self.healthz)
        self.router.add("GET", "/debug/tasks", self.tasks)
        self.router.add("GET", "/debug/leaderz", self.leaderz)
        from meshpilot.ui import Ui  # (the UI calls this package's API handlers)

        api = ApplicationApi(controller, self.auth)
        api.register(self.router)
        self.router.ui = Ui(api, self.auth, discovery)
        AuthApi(self.auth).register(self.router)
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 8080) -> int:
        self._server = await serve(self.router, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            if self.router.ui is not None:
                await self.router.ui.close()  # (its open event streams)
            await self._server.wait_closed()
            self._server = None

    async def webhook(self, request: Request, args: list[str]) -> Response:
        try:
            parsed = parse_webhook(request.headers, request.body, self.secrets)
        except WebhookError as exc:
            log.warning("webhook refused: %s", exc)
            return Response.error(str(exc), exc.status)
        if self.pull_requests is not None:
            for commit, number in parsed.pull_requests.items():
                self.pull_requests.remember(commit, number)
        if parsed.push is None:
            return Response.json({"refreshed": []})
        keys = self.controller.webhook(parsed.push)
        log.info("webhook: push to %s refreshes %d apps", sorted(parsed.push.branches), len(keys))
        return Response.json({"refreshed": [f"{k.namespace}/{k.name}" for k in keys]})

    async def metrics(self, request: Request, args: list[str]) -> Response:
        text = self.controller.metrics.render(self.controller.app_infos())
        text += self.controller.tasks.render_metrics()
        return Response(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    async def healthz(self, request: Request, args: list[str]) -> Response:
        tasks = self.controller.tasks
        if tasks.ready:
            return Response.text("ok\n")
        failing = "".join(f"task {t.name} {t.state}: {t.last_error}\n" for t in tasks.unhealthy())
        return Response.text(f"not ready\n{failing}", 503)

    async def tasks(self, request: Request, args: list[str]) -> Response:
        tasks = self.controller.tasks
        return Response.json({"ready": tasks.ready, "tasks": tasks.status()})

    async def leaderz(self, request: Request, args: list[str]) -> Response:
        """Who leads the GitOps controllers (this one, alone on a directory store)."""
        return Response.json(self.controller.leadership.as_json())
