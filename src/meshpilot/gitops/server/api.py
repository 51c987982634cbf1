"""The JSON API of `gitops serve` (Argo CD's REST paths, trimmed): what the CLI verbs call
when given `--server URL`.

    GET  /api/v1/applications                              {"items": [Application...]}
    GET  /api/v1/applications/{ns}/{name}[?refresh=normal] the Application with status
    GET  /api/v1/applications/{ns}/{name}/diff             {"outOfSync": bool, "diff": text}
    POST /api/v1/applications/{ns}/{name}/sync             {prune, dryRun, revision, resources}
    GET  /api/v1/applications/{ns}/{name}/history          {"history": [...]}
    POST /api/v1/applications/{ns}/{name}/rollback         {id, prune}

The caller is who the bearer token says (gitops/auth: a session from `gitops login`, an
account or project role API token; `anonymous` when argocd-cm allows it), checked against the
store's RBAC policy and project roles. Headers that merely name a user are ignored.
"""

from __future__ import annotations

import asyncio
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.admission import Caller
from meshpilot.gitops.auth import Authenticator, Unauthenticated
from meshpilot.gitops.controller.leadership import NotLeading
from meshpilot.gitops.controller.loop import Controller
from meshpilot.gitops.controller.queue import Level
from meshpilot.gitops.errors import ApplicationNotFound, PermissionDenied
from meshpilot.gitops.history import rollback
from meshpilot.gitops.model import Application
from meshpilot.gitops.rbac import app_objects
from meshpilot.gitops.server.bodies import RollbackBody, SyncBody
from meshpilot.gitops.server.http import Request, Response, Router
from meshpilot.gitops.sync.execute import execute_sync
from meshpilot.gitops.sync.operation import OperationInProgress, SyncOutcome, SyncParams
from meshpilot.gitops.windows import SyncWindowBlocked
from meshpilot.http1 import HttpError

__all__ = ["ApplicationApi", "outcome_json"]

_PREFIX = "/api/v1/applications"


def outcome_json(outcome: SyncOutcome) -> dict[str, Any]:
    return {
        "phase": str(outcome.phase),
        "message": outcome.message,
        "revision": outcome.revision,
        "revisions": list(outcome.revisions),
        "resources": list(outcome.resources),
        "dryRun": outcome.dry_run,
    }


class ApplicationApi:
    def __init__(self, controller: Controller, auth: Authenticator) -> None:
        self.controller = controller
        self.auth = auth
        self.store = controller.store

    def register(self, router: Router) -> None:
        router.add("GET", _PREFIX, self.list_apps)
        router.add("GET", _PREFIX + "/{}/{}", self.get)
        router.add("GET", _PREFIX + "/{}/{}/diff", self.diff)
        router.add("POST", _PREFIX + "/{}/{}/sync", self.sync)
        router.add("GET", _PREFIX + "/{}/{}/history", self.history)
        router.add("POST", _PREFIX + "/{}/{}/rollback", self.rollback)

    # -- helpers -------------------------------------------------------------------------

    def _caller(self, request: Request) -> Caller:
        """The authenticated subject under RBAC (never the unchecked local operator)."""
        return self.auth.caller(self.auth.authenticate(request.headers))

    def _app(
        self, request: Request, args: list[str], action: str
    ) -> tuple[ConfigKey, Application, str]:
        """The app, after RBAC; with the caller's name (sync history's initiatedBy)."""
        key = ConfigKey(Kind.APPLICATION, args[0], args[1])
        obj = self.store.get(key)
        if obj is None or not isinstance(obj.model, Application):
            raise ApplicationNotFound(args[1])
        app: Application = obj.model
        objects = app_objects(app.spec.project_name, key.namespace, key.name)
        caller = self._caller(request)
        caller.check("applications", "get", objects)
        if action != "get":
            caller.check("applications", action, objects)
        return key, app, caller.user or ""

    async def _guard(self, work: Any) -> Response:
        try:
            result: Response = await work
            return result
        except Unauthenticated as exc:
            return Response.error(str(exc), 401)
        except PermissionDenied as exc:
            return Response.error(str(exc), 403)
        except ApplicationNotFound as exc:
            return Response.error(str(exc), 404)
        except (OperationInProgress, SyncWindowBlocked) as exc:
            return Response.error(str(exc), 409)
        except NotLeading as exc:
            return Response.error(str(exc), 503)
        except HttpError as exc:  # (a body of the wrong shape: 400 naming the field)
            return Response.error(str(exc), exc.status)
        except (MeshpilotError, ValueError, KeyError, TypeError) as exc:
            return Response.error(str(exc), 400)

    # -- handlers ------------------------------------------------------------------------

    async def list_apps(self, request: Request, args: list[str]) -> Response:
        try:
            caller = self._caller(request)
        except Unauthenticated as exc:
            return Response.error(str(exc), 401)
        items = [self.store.manifest(key) for key, _ in self.visible_apps(caller)]
        return Response.json({"items": items})

    def visible_apps(self, caller: Caller) -> list[tuple[ConfigKey, Application]]:
        """The Applications `caller` may get (RBAC), as the list call returns them."""
        out = []
        for obj in self.store.snapshot().of_kind(Kind.APPLICATION):
            if not isinstance(obj.model, Application):
                continue
            objects = app_objects(obj.model.spec.project_name, obj.namespace, obj.name)
            if caller.allows("applications", "get", objects):
                out.append((obj.key, obj.model))
        return out

    async def get(self, request: Request, args: list[str]) -> Response:
        async def work() -> Response:
            key, _, _ = self._app(request, args, "get")
            if request.param("refresh"):
                self.controller.leadership.check()
                await self.controller.refresh(key, Level.LATEST)
            return Response.json(self.store.manifest(key))

        return await self._guard(work())

    async def diff(self, request: Request, args: list[str]) -> Response:
        async def work() -> Response:
            key, app, _ = self._app(request, args, "get")
            self.controller.leadership.check()
            await self.controller.refresh(key, Level.LATEST)
            state = await asyncio.to_thread(self.controller.reconciler.refresh, app)
            if state.comparison is None:
                return Response.error("; ".join(state.errors) or "comparison failed", 400)
            return Response.json(
                {
                    "outOfSync": state.sync_status == "OutOfSync",
                    "revision": state.revision,
                    "diff": state.comparison.diff_text(),
                }
            )

        return await self._guard(work())

    async def sync(self, request: Request, args: list[str]) -> Response:
        async def work() -> Response:
            key, app, user = self._app(request, args, "sync")
            self.controller.leadership.check()
            body = request.model(SyncBody)
            params = SyncParams(
                prune=body.prune,
                dry_run=body.dry_run,
                revisions=(body.revision,) if body.revision else None,
                resources=frozenset(r.key() for r in body.resources) if body.resources else None,
                username=user,
            )
            self.controller.expire(key)
            deps, lock_dir = self.controller.deps, self.controller.reconciler.lock_dir
            outcome = await asyncio.to_thread(
                lambda: execute_sync(app, deps, params, lock_dir=lock_dir)
            )
            self.controller.request(key, Level.RECENT, "synced")
            return Response.json(outcome_json(outcome))

        return await self._guard(work())

    async def history(self, request: Request, args: list[str]) -> Response:
        async def work() -> Response:
            _, app, _ = self._app(request, args, "get")
            items = [h.model_dump(by_alias=True, exclude_none=True) for h in app.status.history]
            return Response.json({"history": items})

        return await self._guard(work())

    async def rollback(self, request: Request, args: list[str]) -> Response:
        async def work() -> Response:
            key, app, user = self._app(request, args, "sync")
            self.controller.leadership.check()
            body = request.model(RollbackBody)
            history_id = body.id
            params = SyncParams(
                prune=body.prune,
                username=user,
            )
            deps = self.controller.deps
            outcome = await asyncio.to_thread(rollback, app, history_id, deps, params)
            self.controller.request(key, Level.RECENT, "rolled back")
            return Response.json(outcome_json(outcome))

        return await self._guard(work())
