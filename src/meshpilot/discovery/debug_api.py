"""The monitoring port's pages: istiod's debug API, readiness and Prometheus metrics.

/ready is 503 while a background task (config watch, debouncer, push dispatcher, front
Envoy) has failed and is restarting or has not yet run a second since, naming it;
/debug/tasks shows every task's state, failures and last error; /metrics adds
meshpilot_task_failures_total and meshpilot_task_up (supervise.py)."""

from __future__ import annotations

import json
import socket
from typing import Any

from meshpilot.config.diagnostics import Severity
from meshpilot.discovery.http import HttpRequest, HttpResponse, Route
from meshpilot.discovery.objects_api import object_routes
from meshpilot.model.proxy import Proxy, ProxyType, as_verified, proxy_from_pod
from meshpilot.store.base import ConfigStore
from meshpilot.xds import debug
from meshpilot.xds.name_tables import name_table_for
from meshpilot.xds.server import DiscoveryServer

__all__ = ["debug_routes"]

_JSON = "application/json"
_METRICS = "text/plain; version=0.0.4; charset=utf-8"


def _json(data: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(status, (json.dumps(data, indent=2) + "\n").encode(), _JSON)


def debug_routes(server: DiscoveryServer, store: ConfigStore) -> dict[str, Route]:
    control_plane_id = f"meshpilot-{socket.gethostname()}"

    async def syncz(_: HttpRequest) -> HttpResponse:
        return _json(debug.syncz(server.connections.values(), control_plane_id))

    async def configz(_: HttpRequest) -> HttpResponse:
        return _json(debug.configz(store.snapshot(), server.push_context))

    async def registryz(_: HttpRequest) -> HttpResponse:
        return _json(debug.registryz(server.push_context))

    async def config_dump(request: HttpRequest) -> HttpResponse:
        proxy_id = request.param("proxyID")
        if not proxy_id:
            return _json({"error": "proxyID=<pod>.<namespace> is required"}, 400)
        proxy = _find_proxy(server, proxy_id, request.param("type"))
        if proxy is None:
            return _json({"error": f"no connected proxy and no Pod {proxy_id!r}"}, 404)
        return _json(debug.config_dump(server.push_context, proxy))

    async def ndsz(request: HttpRequest) -> HttpResponse:
        """istiod's /debug/ndsz: the DNS name table a proxy's agent gets."""
        proxy_id = request.param("proxyID")
        if not proxy_id:
            return _json({"error": "proxyID=<pod>.<namespace> is required"}, 400)
        auto = (request.param("autoAllocate") or "").lower() in ("1", "true")
        try:
            return _json(name_table_for(server, proxy_id, auto))
        except LookupError as exc:
            return _json({"error": str(exc)}, 404)

    async def ready(_: HttpRequest) -> HttpResponse:
        if server.ready:
            return HttpResponse.text("ok\n")
        failing = "".join(
            f"task {t.name} {t.state}: {t.last_error}\n" for t in server.tasks.unhealthy()
        )
        return HttpResponse.text(f"not ready\n{failing}", 503)

    async def tasks(_: HttpRequest) -> HttpResponse:
        return _json({"ready": server.tasks.ready, "tasks": server.tasks.status()})

    async def metrics(_: HttpRequest) -> HttpResponse:
        snapshot = store.snapshot()
        errors = sum(1 for d in snapshot.diagnostics if d.severity is Severity.ERROR)
        server.metrics.config_errors.set(value=errors + (1 if snapshot.error else 0))
        body = server.metrics.render() + server.tasks.render_metrics()
        return HttpResponse(200, body.encode(), _METRICS)

    routes: dict[str, Route] = {
        "/debug/syncz": syncz,
        "/debug/configz": configz,
        "/debug/registryz": registryz,
        "/debug/config_dump": config_dump,
        "/debug/ndsz": ndsz,
        "/debug/tasks": tasks,
        "/ready": ready,
        "/metrics": metrics,
        **object_routes(store),  # /debug/objectz, for `meshpilot analyze --discovery`
    }

    async def index(_: HttpRequest) -> HttpResponse:
        return HttpResponse.text("".join(f"{path}\n" for path in sorted(routes)))

    routes["/"] = routes["/debug"] = index
    return routes


def _find_proxy(server: DiscoveryServer, proxy_id: str, type_name: str | None) -> Proxy | None:
    """A connected proxy of that id (the last to connect: with the identity its stream
    proved), else one for the Pod of that name."""
    connected = [c for c in server.connections.values() if c.proxy.id == proxy_id]
    if connected and not type_name:
        return connected[-1].proxy
    name, _, namespace = proxy_id.partition(".")
    pod = server.push_context.pod(namespace or "default", name)
    if pod is None:
        return connected[-1].proxy if connected else None
    try:
        proxy_type = ProxyType(type_name or "sidecar")
    except ValueError:
        proxy_type = ProxyType.SIDECAR
    # What it gets once connected with its own identity (private keys are redacted).
    return as_verified(proxy_from_pod(pod, proxy_type, server.push_context.domain_suffix))
