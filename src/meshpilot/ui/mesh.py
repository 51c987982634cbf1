"""The mesh pages, read from the control plane's debug API (`--discovery ADDR`, its port
15014) with the library `proxy-status` and `proxy-config` use: the connected proxies with
their xDS sync state per type and the analyzer's findings over the objects it serves, one
proxy's listeners, routes, clusters, endpoints and certificates as the control plane
generates them, and the request-path page (explain_page.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from meshpilot import http1
from meshpilot.analysis import analyze
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.errors import MeshpilotError
from meshpilot.explain.live_mesh import read_live_mesh
from meshpilot.gitops.model import Application
from meshpilot.http1 import HttpError
from meshpilot.proxyinfo.clusters import ClusterFilter, cluster_table
from meshpilot.proxyinfo.endpoints import EndpointFilter, endpoint_table
from meshpilot.proxyinfo.listeners import ListenerFilter, listener_table
from meshpilot.proxyinfo.routes import RouteFilter, route_table
from meshpilot.proxyinfo.secrets import secret_table
from meshpilot.proxyinfo.source import from_control_plane
from meshpilot.proxyinfo.status import ProxySync, find_proxy, read_syncz
from meshpilot.proxyinfo.table import Table
from meshpilot.store.base import LiveStore
from meshpilot.ui.explain_page import ExplainForm, explain_view
from meshpilot.ui.templates import render
from meshpilot.ui.visit import Visit
from meshpilot.ui.web import html

__all__ = ["MeshPages"]

# The columns proxy-status shows per type, in its order.
XDS_TYPES = ("cds", "lds", "eds", "rds")


@dataclass(frozen=True, slots=True)
class Section:
    id: str  # the page anchor
    title: str
    table: Table


class MeshPages:
    def __init__(self, discovery: str | None, store: LiveStore) -> None:
        self.discovery = discovery
        self.store = store

    async def dispatch(self, visit: Visit, parts: list[str]) -> http1.Response:
        if visit.request.method != "GET":
            raise HttpError("method not allowed", 405)
        if self.discovery is None:
            message = (
                "no control plane: start `meshpilot gitops serve` with "
                "--discovery 127.0.0.1:15014 to see the mesh"
            )
            return html(render("error.html", user=visit.user, message=message), 404)
        # Reading the mesh is an RBAC action of its own (Argo CD has none: `logs, get`
        # is the nearest); the debug API's data needs a logged-in user at least.
        try:
            if parts in ([], [""]):
                return await self.proxies(visit)
            if len(parts) == 2 and parts[0] == "proxies":
                return await self.proxy(visit, parts[1])
            if parts == ["explain"]:
                return await self.explain(visit)
        except MeshpilotError as exc:  # the control plane unreachable, an unknown proxy
            return html(render("error.html", user=visit.user, message=str(exc)), 502)
        raise HttpError("no such page", 404)

    async def proxies(self, visit: Visit) -> http1.Response:
        assert self.discovery is not None
        syncs = await asyncio.to_thread(read_syncz, self.discovery)
        findings = await asyncio.to_thread(self._findings)
        page = render(
            "mesh.html", user=visit.user, discovery=self.discovery, syncs=syncs,
            types=XDS_TYPES, findings=findings,
        )  # fmt: skip
        return html(page)

    def _findings(self) -> list[Diagnostic]:
        """`meshpilot analyze` over the objects the control plane serves."""
        assert self.discovery is not None
        return analyze(read_live_mesh(self.discovery).push)

    async def proxy(self, visit: Visit, proxy_id: str) -> http1.Response:
        assert self.discovery is not None
        discovery = self.discovery
        syncs = await asyncio.to_thread(read_syncz, discovery)
        found: list[ProxySync] = find_proxy(syncs, proxy_id, discovery)
        data = await asyncio.to_thread(from_control_plane, discovery, found[0].proxy)
        sections = [
            Section("listeners", "Listeners", listener_table(data.dump, ListenerFilter())),
            Section("routes", "Routes", route_table(data.dump, RouteFilter())),
            Section("clusters", "Clusters", cluster_table(data.dump, ClusterFilter())),
            Section("endpoints", "Endpoints", endpoint_table(data, EndpointFilter())),
            Section("certificates", "Certificates", secret_table(data.dump)),
        ]
        page = render(
            "proxy.html", user=visit.user, sync=found[0], source=data.source,
            sections=sections, types=XDS_TYPES,
        )  # fmt: skip
        return html(page)

    async def explain(self, visit: Visit) -> http1.Response:
        assert self.discovery is not None
        form = ExplainForm.of(visit.request.query)
        apps = await asyncio.to_thread(self._apps_by_object)
        view = await explain_view(self.discovery, form, lambda k, ns, n: apps.get((k, ns, n)))
        return html(render("explain.html", user=visit.user, view=view))

    def _apps_by_object(self) -> dict[tuple[str, str, str], str]:
        """(kind, namespace, name) -> the page of the Application whose status lists it."""
        out: dict[tuple[str, str, str], str] = {}
        for obj in self.store.snapshot().of_kind(Kind.APPLICATION):
            app = obj.model
            if not isinstance(app, Application):
                continue
            for res in app.status.resources:
                out.setdefault(
                    (res.kind, res.namespace, res.name), f"/applications/{obj.namespace}/{obj.name}"
                )
        return out
