"""The agent's merged Prometheus endpoint, `:15020/stats/prometheus`, as Istio's agent serves
it: Envoy's stats, the agent's own metrics and the app's, in one text exposition.

Injection points Prometheus at 15020 and keeps the app's own `prometheus.io/scrape|port|path`
annotations in the agent's ISTIO_PROMETHEUS_ANNOTATIONS (JSON); the agent scrapes the app at
`http://127.0.0.1:<port><path>` (default path /metrics) when `scrape` is true. Istio's
standard metrics leave stock Envoy as `envoy_istio_*` (a stat namespace Envoy does not know
gets its prefix); here they get Istio's names back (`istio_requests_total`), as Istio's stats
filter names them. Envoy unreachable: 503 naming it. The app unreachable: Envoy's and the
agent's metrics are served and the failure is counted in `istio_agent_app_scrape_errors_total`
(Istio's agent logs it likewise and serves the rest).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import urllib.error
import urllib.request
from dataclasses import dataclass

from meshpilot.agent.admin import EnvoyAdmin
from meshpilot.errors import EnvoyError, MeshpilotError
from meshpilot.supervise import TaskSupervisor

__all__ = ["AppScrape", "MergedMetrics", "app_scrape", "istio_names"]

log = logging.getLogger(__name__)

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Envoy's stats prefix of Istio's metrics, at the start of a sample or of a HELP/TYPE line.
_ENVOY_ISTIO = re.compile(r"^(# (?:HELP|TYPE) )?envoy_istio_", re.MULTILINE)
_TEXT_FORMAT = "text/plain; version=0.0.4"


@dataclass(frozen=True, slots=True)
class AppScrape:
    """Where the app serves its metrics (from its original prometheus.io annotations)."""

    port: int
    path: str = "/metrics"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"


def app_scrape(annotations: str) -> AppScrape | None:
    """ISTIO_PROMETHEUS_ANNOTATIONS (`{"scrape":"true","port":"8080","path":"/metrics"}`):
    None when empty or when the app is not to be scraped; bad JSON or port is an error."""
    if not annotations.strip():
        return None
    try:
        data = json.loads(annotations)
    except json.JSONDecodeError as exc:
        raise MeshpilotError(f"ISTIO_PROMETHEUS_ANNOTATIONS is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise MeshpilotError("ISTIO_PROMETHEUS_ANNOTATIONS must be a JSON object")
    if str(data.get("scrape", "")).lower() != "true":
        return None
    port = str(data.get("port", "80"))  # Prometheus' default for a pod without a port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise MeshpilotError(f"ISTIO_PROMETHEUS_ANNOTATIONS: invalid port {port!r}")
    path = str(data.get("path") or "/metrics")
    return AppScrape(int(port), path if path.startswith("/") else f"/{path}")


def istio_names(exposition: str) -> str:
    """Envoy's exposition with `envoy_istio_*` families renamed to Istio's `istio_*`."""
    return _ENVOY_ISTIO.sub(lambda m: (m.group(1) or "") + "istio_", exposition)


class MergedMetrics:
    def __init__(
        self,
        admin: EnvoyAdmin,
        tasks: TaskSupervisor,
        app: AppScrape | None = None,
        timeout: float = 5.0,
    ) -> None:
        self._admin = admin
        self._tasks = tasks
        self.app = app
        self._timeout = timeout
        self.app_errors = 0

    async def render(self) -> tuple[int, str]:
        """(HTTP status, body): 200 and the merged exposition, or 503 and why not."""
        try:
            envoy = await self._admin.get("/stats/prometheus")
        except EnvoyError as exc:
            return 503, f"failed scraping Envoy's metrics: {exc}\n"
        if envoy.status != 200:
            return 503, f"failed scraping Envoy's metrics: /stats/prometheus {envoy.status}\n"
        app = await self._app_metrics() if self.app is not None else ""
        parts = [istio_names(envoy.body), self._own(), app]
        return 200, "".join(p if p.endswith("\n") or not p else p + "\n" for p in parts)

    def _own(self) -> str:
        errors = (
            "# HELP istio_agent_app_scrape_errors_total Failed scrapes of the app's metrics.\n"
            "# TYPE istio_agent_app_scrape_errors_total counter\n"
            f"istio_agent_app_scrape_errors_total {self.app_errors}\n"
        )
        return self._tasks.render_metrics() + errors

    async def _app_metrics(self) -> str:
        assert self.app is not None
        url = self.app.url
        try:
            return await asyncio.to_thread(self._get, url)
        except (OSError, urllib.error.URLError, UnicodeDecodeError) as exc:
            self.app_errors += 1
            log.warning("failed scraping the app's metrics at %s: %s", url, exc)
            return ""

    def _get(self, url: str) -> str:
        request = urllib.request.Request(url, headers={"Accept": _TEXT_FORMAT})
        with _OPENER.open(request, timeout=self._timeout) as reply:
            if reply.status != 200:
                raise OSError(f"answered {reply.status}")
            body: bytes = reply.read()
        return body.decode()
