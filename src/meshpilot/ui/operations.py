"""Sync and rollback from the pages, and their progress live: the operation runs through the
API's own handler in the background (its RBAC, locks and sync engine), the form's POST
returns at once to the app page, and that page's status panel follows the operation and the
app's recorded status over server-sent events until the page is closed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from meshpilot import http1
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.rbac import app_objects
from meshpilot.gitops.server.api import ApplicationApi
from meshpilot.http1 import BadRequest, HttpError
from meshpilot.ui.templates import render
from meshpilot.ui.views import AppRow
from meshpilot.ui.visit import ApiFailed, Visit
from meshpilot.ui.web import form, redirect

__all__ = ["Operations", "Progress"]

_API = "/api/v1/applications"
_POLL_S = 0.25  # how often the panel re-reads the app's status
_KEEPALIVE_S = 15.0  # a comment line: finds a closed page, keeps proxies from timing out
_STREAM_S = 600.0  # then the stream ends; the browser's EventSource reconnects by itself


@dataclass
class Progress:
    """An operation started from the pages: what the panel shows while and after it runs."""

    action: str  # "sync" or "rollback"
    user: str
    options: str  # e.g. "prune, dry run, 2 resources"
    phase: str = "Running"
    message: str = ""
    resources: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    @property
    def running(self) -> bool:
        return self.phase == "Running"


class Operations:
    def __init__(self, api: ApplicationApi) -> None:
        self.api = api
        self.progress: dict[tuple[str, str], Progress] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.streams = 0  # event streams open now
        self.closed = False  # the server stops: every stream ends

    # -- starting ------------------------------------------------------------------------

    async def sync(self, visit: Visit, ns: str, name: str) -> http1.Response:
        fields = form(visit.request)
        body: dict[str, Any] = {"prune": "prune" in fields, "dryRun": "dry_run" in fields}
        selected = [_resource(ref) for ref in fields.get("resource", [])]
        if selected:
            body["resources"] = selected
        options = [o for o, on in (("prune", body["prune"]), ("dry run", body["dryRun"])) if on]
        if selected:
            options.append(f"{len(selected)} selected resources")
        return await self._start(visit, ns, name, "sync", body, ", ".join(options))

    async def rollback(self, visit: Visit, ns: str, name: str) -> http1.Response:
        fields = form(visit.request)
        try:
            history_id = int((fields.get("id") or [""])[0])
        except ValueError:
            raise BadRequest("rollback: `id` must be a history id (a number)") from None
        body = {"id": history_id, "prune": "prune" in fields}
        return await self._start(visit, ns, name, "rollback", body, f"to history {history_id}")

    async def _start(
        self, visit: Visit, ns: str, name: str, action: str, body: dict[str, Any], options: str
    ) -> http1.Response:
        # Refused at once (no background task) when the caller may not: the API's 403.
        get = await self.api.get(visit.api_request("GET", f"{_API}/{ns}/{name}"), [ns, name])
        row = AppRow.of(visit.answer(get))
        denied = not visit.caller.allows("applications", "sync", app_objects(row.project, ns, name))
        if denied:
            raise ApiFailed(
                f"permission denied: applications, sync, {row.project}/{name}, sub: {visit.user}",
                403,
            )
        current = self.progress.get((ns, name))
        if current is not None and current.running:
            raise HttpError("another operation is already in progress", 409)
        progress = Progress(action, visit.user, options)
        self.progress[(ns, name)] = progress
        request = visit.api_request("POST", f"{_API}/{ns}/{name}/{action}", body)
        handler = self.api.sync if action == "sync" else self.api.rollback

        async def run() -> None:
            try:
                answer = Visit.answer(await handler(request, [ns, name]))
                progress.phase = str(answer.get("phase", "Succeeded"))
                progress.message = str(answer.get("message", ""))
                progress.resources = list(answer.get("resources") or [])
            except ApiFailed as exc:
                progress.phase, progress.message = "Error", str(exc)
            except Exception as exc:  # still shown: the panel must not stay "Running"
                progress.phase, progress.message = "Error", f"{type(exc).__name__}: {exc}"

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return redirect(f"/applications/{ns}/{name}")

    # -- following -----------------------------------------------------------------------

    def panel(self, ns: str, name: str, manifest: Mapping[str, Any] | None) -> str:
        """The status panel's HTML: the app's recorded status and the page's operation."""
        status = (manifest or {}).get("status") or {}
        return render(
            "live.html",
            sync=(status.get("sync") or {}).get("status") or "Unknown",
            revision=(status.get("sync") or {}).get("revision") or "",
            health=status.get("health") or {},
            operation=status.get("operationState") or {},
            progress=self.progress.get((ns, name)),
        )

    async def events(self, visit: Visit, ns: str, name: str) -> http1.Response:
        get = await self.api.get(visit.api_request("GET", f"{_API}/{ns}/{name}"), [ns, name])
        visit.answer(get)  # the API's 403/404 before the stream starts
        key = ConfigKey(Kind.APPLICATION, ns, name)
        return http1.Response(
            200, b"", "text/event-stream; charset=utf-8",
            (("Cache-Control", "no-store"), ("X-Accel-Buffering", "no")),
            stream=self._stream(key),
        )  # fmt: skip

    async def close(self) -> None:
        """End the event streams (they look every _POLL_S) before the server stops."""
        self.closed = True
        deadline = time.monotonic() + 2 * _POLL_S + 1
        while self.streams and time.monotonic() < deadline:
            await asyncio.sleep(_POLL_S / 5)

    async def _stream(self, key: ConfigKey) -> AsyncIterator[bytes]:
        self.streams += 1
        try:
            async for chunk in self._events(key):
                yield chunk
        finally:
            self.streams -= 1

    async def _events(self, key: ConfigKey) -> AsyncIterator[bytes]:
        last, quiet, start = "", 0.0, time.monotonic()
        yield b"retry: 2000\n\n"
        while time.monotonic() - start < _STREAM_S and not self.closed:
            manifest = await asyncio.to_thread(self.api.store.manifest, key)
            fragment = self.panel(key.namespace, key.name, manifest)
            if fragment != last:
                last, quiet = fragment, 0.0
                lines = "".join(f"data: {line}\n" for line in fragment.splitlines())
                yield f"event: status\n{lines}\n".encode()
            elif quiet >= _KEEPALIVE_S:
                quiet = 0.0
                yield b": keepalive\n\n"
            await asyncio.sleep(_POLL_S)
            quiet += _POLL_S


def _resource(ref: str) -> dict[str, str]:
    """`group/kind/namespace/name` (the tree's checkbox value) as the API's resource."""
    parts = ref.split("/")
    if len(parts) != 4 or not parts[1] or not parts[3]:
        raise BadRequest(f"resource {ref[:100]!r}: expected group/kind/namespace/name")
    return {"group": parts[0], "kind": parts[1], "namespace": parts[2], "name": parts[3]}
