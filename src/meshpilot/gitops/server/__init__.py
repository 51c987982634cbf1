"""`gitops serve`'s HTTP side (Argo CD's argocd-server, trimmed), on 127.0.0.1:8080 unless
told otherwise:

    POST /api/webhook          git push webhooks → immediate refresh of matching apps
    /api/v1/applications/...   JSON API for the CLI's `--server URL` (api.py)
    GET  /metrics              argocd_app_info, argocd_app_sync_total, argocd_app_reconcile
    GET  /healthz              ok; 503 naming the task while a background task (store watch,
                               resync, reconcile workers, notifier) has failed and restarts
    GET  /debug/tasks          each background task: state, failures, restarts, last error
"""

from __future__ import annotations

import asyncio
import logging

from meshpilot.gitops.controller.loop import Controller
from meshpilot.gitops.notify.delivery import PullRequestIndex
from meshpilot.gitops.server.api import ApplicationApi
from meshpilot.gitops.server.http import Request, Response, Router, serve
from meshpilot.gitops.server.webhook import WebhookError, WebhookSecrets, parse_webhook

__all__ = ["GitopsServer", "WebhookSecrets"]

log = logging.getLogger(__name__)


class GitopsServer:
    def __init__(
        self,
        controller: Controller,
        secrets: WebhookSecrets | None = None,
        pull_requests: PullRequestIndex | None = None,
    ) -> None:
        self.controller = controller
        self.secrets = secrets or WebhookSecrets()
        self.pull_requests = pull_requests
        self.router = Router()
        self.router.add("POST", "/api/webhook", self.webhook)
        self.router.add("GET", "/metrics", self.metrics)
        self.router.add("GET", "/healthz", self.healthz)
        self.router.add("GET", "/debug/tasks", self.tasks)
        ApplicationApi(controller).register(self.router)
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 8080) -> int:
        self._server = await serve(self.router, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
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
