"""The agent's status server (15020) and its readiness probe, as pilot-agent's.

`/healthz/ready` answers 200 once Envoy has its first configuration from the control plane
and is serving, and 503 before (or while the agent drains). Envoy's static listener 15021
routes `/healthz/ready` here (cluster `agent`), so a probe of 15021 also proves Envoy serves.

Readiness is decided as pilot-agent's probe decides it (`status/ready/probe.go`):
1. Envoy has received config: `cluster_manager.cds.update_success` and
   `listener_manager.lds.update_success` are both non-zero;
2. Envoy is initialized: `server.state` is LIVE (0) and `listener_manager.workers_started`
   is 1.
Each holds for the life of one Envoy process once seen, so it is remembered until Envoy is
restarted (`reset()`). Before both: the agent's own background tasks (certificate rotation)
are healthy; while one has failed and is being restarted the 503 names it. The status server
also answers GET /debug/tasks (JSON: each task's state, failures, last error), GET
/metrics (meshpilot_task_failures_total, meshpilot_task_up; meshpilot/supervise.py) and GET
/stats/prometheus (Envoy's, the agent's and the app's metrics merged, Istio's names).
"""

from __future__ import annotations

import asyncio
import logging

from meshpilot import http1
from meshpilot.agent.admin import EnvoyAdmin
from meshpilot.agent.merged_metrics import MergedMetrics
from meshpilot.errors import EnvoyError, MeshpilotError
from meshpilot.supervise import TaskSupervisor

__all__ = ["ReadinessProbe", "StatusServer"]

log = logging.getLogger(__name__)

_CONFIG_STATS = r"^(cluster_manager\.cds|listener_manager\.lds)\.(update_success|update_rejected)$"
_LIVE_STATS = r"^(server\.state|listener_manager\.workers_started)$"
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
_SERVER_STATES = {0: "LIVE", 1: "DRAINING", 2: "PRE_INITIALIZING", 3: "INITIALIZING"}


class ReadinessProbe:
    def __init__(self, admin: EnvoyAdmin, tasks: TaskSupervisor | None = None) -> None:
        self._admin = admin
        self.tasks = tasks or TaskSupervisor("agent")
        self._config_received = False
        self._live_once = False
        self._draining = False

    def reset(self) -> None:
        """A new Envoy process: it must receive its configuration again."""
        self._config_received = False
        self._live_once = False

    def set_draining(self) -> None:
        self._draining = True

    async def check(self) -> str | None:
        """None when ready, else why not (the 503 body)."""
        if self._draining:
            return "server is not live, current state is: DRAINING"
        failing = self.tasks.unhealthy()
        if failing:
            return f"task {failing[0].name} {failing[0].state}: {failing[0].last_error}"
        try:
            return await self._config_status() or await self._envoy_status()
        except EnvoyError as exc:
            return str(exc)

    async def _config_status(self) -> str | None:
        if self._config_received:
            return None
        stats = await self._admin.stats(_CONFIG_STATS)
        cds = stats.get("cluster_manager.cds.update_success", 0)
        lds = stats.get("listener_manager.lds.update_success", 0)
        if cds > 0 and lds > 0:
            self._config_received = True
            return None
        summary = (
            f"cds updates: {cds} successful, "
            f"{stats.get('cluster_manager.cds.update_rejected', 0)} rejected; "
            f"lds updates: {lds} successful, "
            f"{stats.get('listener_manager.lds.update_rejected', 0)} rejected"
        )
        return f"config not received from XDS server (is the control plane running?): {summary}"

    async def _envoy_status(self) -> str | None:
        if self._live_once:
            return None
        stats = await self._admin.stats(_LIVE_STATS)
        state = stats.get("server.state")
        if state is not None and state != 0:
            return f"server is not live, current state is: {_SERVER_STATES.get(state, state)}"
        if stats.get("listener_manager.workers_started") != 1:
            return "workers have not yet started"
        self._live_once = True
        return None


class StatusServer:
    """The agent's HTTP/1.1 server (meshpilot.http1): GET /healthz/ready, /debug/tasks,
    /metrics, /stats/prometheus (merged: agent/merged_metrics.py); 404 for anything else,
    and 4xx for requests it cannot read."""

    def __init__(
        self,
        probe: ReadinessProbe,
        port: int,
        host: str = "0.0.0.0",
        metrics: MergedMetrics | None = None,
    ) -> None:
        self._probe = probe
        self._metrics = metrics
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        try:
            self._server = await http1.serve(self._respond, self._host, self._port)
        except OSError as exc:
            raise MeshpilotError(
                f"agent status server cannot listen on {self._host}:{self._port}: {exc.strerror}"
            ) from exc
        log.info("status server listening on %s:%d", self._host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _respond(self, request: http1.Request) -> http1.Response:
        paths = ("/healthz/ready", "/debug/tasks", "/metrics", "/stats/prometheus")
        if request.path not in paths or (request.path == paths[3] and self._metrics is None):
            return http1.Response.text("not found\n", 404)
        if request.method not in ("GET", "HEAD"):
            return http1.Response.text("method not allowed\n", 405)
        tasks = self._probe.tasks
        if request.path == "/debug/tasks":
            body = {"ready": tasks.ready, "tasks": tasks.status()}
            return http1.Response.json(body)
        if request.path == "/metrics":
            return http1.Response.text(tasks.render_metrics())
        if request.path == "/stats/prometheus" and self._metrics is not None:
            code, text = await self._metrics.render()
            return http1.Response(code, text.encode(), PROMETHEUS_TEXT)
        reason = await self._probe.check()
        if reason is None:
            return http1.Response(200)
        return http1.Response.text(reason + "\n", 503)
