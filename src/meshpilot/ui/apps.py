"""The application pages: the list (filters, pages) and one application (resource tree, sync
form, history with rollback, conditions, the live status panel, the diff)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from meshpilot import http1
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.rbac import app_objects
from meshpilot.gitops.server.api import ApplicationApi
from meshpilot.http1 import HttpError
from meshpilot.ui.diffview import side_by_side
from meshpilot.ui.operations import Operations
from meshpilot.ui.preview_page import preview_branch
from meshpilot.ui.templates import render
from meshpilot.ui.views import AppRow, Filters, Page, tree
from meshpilot.ui.visit import ApiFailed, Visit
from meshpilot.ui.web import html

__all__ = ["AppPages"]

_API = "/api/v1/applications"
_MAX_OWNERS = 8  # an owner chain longer than this is cut (and a cycle cannot loop)


class AppPages:
    def __init__(self, api: ApplicationApi, operations: Operations) -> None:
        self.api = api
        self.operations = operations

    async def dispatch(self, visit: Visit, parts: list[str]) -> http1.Response:
        get = visit.request.method == "GET"
        try:
            if parts in ([], [""]) and get:
                return await self.list_page(visit)
            if len(parts) == 2 and get:
                return await self.app_page(visit, parts[0], parts[1])
            if len(parts) == 3:
                ns, name, what = parts
                if what == "diff" and get:
                    return await self.diff(visit, ns, name)
                if what == "preview" and get:
                    return await self.preview(visit, ns, name)
                if what == "events" and get:
                    return await self.operations.events(visit, ns, name)
                if what == "sync" and not get:
                    return await self.operations.sync(visit, ns, name)
                if what == "rollback" and not get:
                    return await self.operations.rollback(visit, ns, name)
        except ApiFailed as exc:
            page = render("error.html", user=visit.user, message=str(exc))
            return html(page, exc.status)
        raise HttpError("no such page", 404)

    async def list_page(self, visit: Visit) -> http1.Response:
        # The API's list (its RBAC filter), read from the models rather than as JSON.
        visible = await asyncio.to_thread(self.api.visible_apps, visit.caller)
        rows = [AppRow.of_model(key.namespace, app) for key, app in visible]
        filters = Filters.of(visit.request.query)
        try:
            number = int(visit.request.param("page") or "1")
        except ValueError:
            number = 1
        page = Page.of(rows, filters, number)
        return html(render("apps.html", user=visit.user, page=page, filters=filters))

    async def app_page(self, visit: Visit, ns: str, name: str) -> http1.Response:
        path = f"{_API}/{ns}/{name}"
        manifest = visit.answer(await self.api.get(visit.api_request("GET", path), [ns, name]))
        row = AppRow.of(manifest)
        objects = app_objects(row.project, ns, name)
        status = manifest.get("status") or {}
        owners = await asyncio.to_thread(self._owner_chains, status.get("resources") or [])
        page = render(
            "app.html",
            user=visit.user,
            app=row,
            tree=tree(manifest, owners),
            can_sync=visit.caller.allows("applications", "sync", objects),
            history=list(reversed(status.get("history") or [])),
            conditions=status.get("conditions") or [],
            live=self.operations.panel(ns, name, manifest),
        )
        return html(page)

    async def diff(self, visit: Visit, ns: str, name: str) -> http1.Response:
        """The fragment htmx puts into the app page: each differing resource side by side."""
        path = f"{_API}/{ns}/{name}/diff"
        response = await self.api.diff(visit.api_request("GET", path), [ns, name])
        try:
            answer = visit.answer(response)
        except ApiFailed as exc:
            return html(render("diff.html", diffs=[], error=str(exc)))
        diffs = side_by_side(str(answer.get("diff", "")))
        return html(render("diff.html", diffs=diffs, error=""))

    async def preview(self, visit: Visit, ns: str, name: str) -> http1.Response:
        path = f"{_API}/{ns}/{name}"
        manifest = visit.answer(await self.api.get(visit.api_request("GET", path), [ns, name]))
        row = AppRow.of(manifest)
        head = (visit.request.param("head") or "").strip()
        result = await preview_branch(self.api.controller, row, head) if head else None
        page = render("preview.html", user=visit.user, app=row, head=head, result=result)
        return html(page)

    def _owner_chains(self, resources: list[Any]) -> dict[tuple[str, str, str], list[str]]:
        """(kind, namespace, name) -> the live object's owners, nearest first."""
        chains: dict[tuple[str, str, str], list[str]] = {}
        for res in resources:
            if not isinstance(res, Mapping):
                continue
            kind, ns, name = str(res.get("kind")), str(res.get("namespace")), str(res.get("name"))
            chain: list[str] = []
            current = self._live(kind, ns, name)
            while current is not None and len(chain) < _MAX_OWNERS:
                refs = (current.get("metadata") or {}).get("ownerReferences") or []
                owner = next((r for r in refs if isinstance(r, Mapping)), None)
                if owner is None:
                    break
                chain.append(f"{owner.get('kind')}/{owner.get('name')}")
                current = self._live(str(owner.get("kind")), ns, str(owner.get("name")))
            if chain:
                chains[(kind, ns, name)] = chain
        return chains

    def _live(self, kind: str, ns: str, name: str) -> Mapping[str, Any] | None:
        try:
            key = ConfigKey(Kind(kind), ns, name)
        except ValueError:
            return None  # a kind the store does not keep
        manifest: Mapping[str, Any] | None = self.api.store.manifest(key)
        return manifest
