"""The GitOps API's login and token calls (Argo CD's SessionService, AccountService and the
project role token calls):

    POST   /api/v1/session                          {username, password} -> {token}  (no auth)
    DELETE /api/v1/session                          log out: the session token is revoked
    GET    /api/v1/session/userinfo                 {loggedIn, username}
    GET    /api/v1/account                          {items: [{name, enabled, capabilities}]}
    GET    /api/v1/account/{name}                   ... and {tokens: [{id, iat, exp}]}
    PUT    /api/v1/account/password                 {name, currentPassword, newPassword}
    POST   /api/v1/account/{name}/token             {expiresIn, id} -> {token, id, iat, exp}
    DELETE /api/v1/account/{name}/token/{id}
    POST   /api/v1/projects/{p}/roles/{r}/token     {expiresIn, id} -> {token, id, iat, exp}
    DELETE /api/v1/projects/{p}/roles/{r}/token/{id}

RBAC as Argo CD: an account may read and update itself; another account needs
`accounts, get|update, <name>`; project role tokens need `projects, update, <project>`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from meshpilot.gitops.admission import Caller
from meshpilot.gitops.auth import Authenticator, Subject, TokenRecord, Unauthenticated
from meshpilot.gitops.errors import GitopsError, PermissionDenied
from meshpilot.gitops.server.http import Request, Response, Router

__all__ = ["LOGIN_PATH", "AuthApi"]

LOGIN_PATH = "/api/v1/session"
_ACCOUNT = "/api/v1/account"


def _record(record: TokenRecord, token: str | None = None) -> dict[str, Any]:
    out = record.to_json()
    if token is not None:
        out["token"] = token
    return out


def _body(request: Request) -> dict[str, Any]:
    try:
        body = request.json()
    except ValueError:
        raise GitopsError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise GitopsError("the request body must be a JSON object")
    return body


def _text(body: dict[str, Any], name: str, default: str | None = None) -> str:
    value = body.get(name, default)
    if not isinstance(value, str) or (default is None and not value):
        raise GitopsError(f"{name}: expected a string")
    return value


def _seconds(body: dict[str, Any]) -> int:
    value = body.get("expiresIn", 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise GitopsError("expiresIn: expected a number of seconds")
    return value


class AuthApi:
    def __init__(self, auth: Authenticator) -> None:
        self.auth = auth

    def register(self, router: Router) -> None:
        router.add("POST", LOGIN_PATH, self.login)
        router.add("DELETE", LOGIN_PATH, self.logout)
        router.add("GET", LOGIN_PATH + "/userinfo", self.userinfo)
        router.add("GET", _ACCOUNT, self.list_accounts)
        router.add("PUT", _ACCOUNT + "/password", self.update_password)
        router.add("GET", _ACCOUNT + "/{}", self.get_account)
        router.add("POST", _ACCOUNT + "/{}/token", self.create_account_token)
        router.add("DELETE", _ACCOUNT + "/{}/token/{}", self.delete_account_token)
        router.add("POST", "/api/v1/projects/{}/roles/{}/token", self.create_project_token)
        router.add("DELETE", "/api/v1/projects/{}/roles/{}/token/{}", self.delete_project_token)

    async def _guard(self, request: Request, work: Any) -> Response:
        """Authenticate, then `work(subject, caller)`, off the event loop (store writes)."""

        def run() -> Response:
            subject = self.auth.authenticate(request.headers)
            result: Response = work(subject, self.auth.caller(subject))
            return result

        try:
            return await asyncio.to_thread(run)
        except Unauthenticated as exc:
            return Response.error(str(exc), 401)
        except PermissionDenied as exc:
            return Response.error(str(exc), 403)
        except GitopsError as exc:
            return Response.error(str(exc), 400)

    def _account_check(self, subject: Subject, caller: Caller, action: str, name: str) -> None:
        is_self = subject.claims is not None and subject.name == name
        if not (is_self and not subject.name.startswith("proj:")):
            caller.check("accounts", action, name)

    # -- handlers ------------------------------------------------------------------------

    async def login(self, request: Request, args: list[str]) -> Response:
        try:
            body = _body(request)
            username, password = _text(body, "username"), _text(body, "password", "")
            token = await asyncio.to_thread(self.auth.login, username, password)  # bcrypt
        except Unauthenticated as exc:
            return Response.error(str(exc), 401)
        except GitopsError as exc:
            return Response.error(str(exc), 400)
        return Response.json({"token": token})

    async def logout(self, request: Request, args: list[str]) -> Response:
        def work(subject: Subject, caller: Caller) -> Response:
            self.auth.logout(subject)
            return Response.json({})

        return await self._guard(request, work)

    async def userinfo(self, request: Request, args: list[str]) -> Response:
        def work(subject: Subject, caller: Caller) -> Response:
            return Response.json({"loggedIn": subject.claims is not None, "username": subject.name})

        return await self._guard(request, work)

    async def list_accounts(self, request: Request, args: list[str]) -> Response:
        def work(subject: Subject, caller: Caller) -> Response:
            accounts = self.auth.accounts()
            items = [
                {"name": a.name, "enabled": a.enabled, "capabilities": sorted(a.capabilities)}
                for a in accounts
                if a.name == subject.name or caller.allows("accounts", "get", a.name)
            ]
            return Response.json({"items": items})

        return await self._guard(request, work)

    async def get_account(self, request: Request, args: list[str]) -> Response:
        def work(subject: Subject, caller: Caller) -> Response:
            self._account_check(subject, caller, "get", args[0])
            found = next((a for a in self.auth.accounts() if a.name == args[0]), None)
            if found is None:
                raise GitopsError(f"account {args[0]!r} does not exist")
            return Response.json(
                {"name": found.name, "enabled": found.enabled,
                 "capabilities": sorted(found.capabilities),
                 "tokens": [_record(t) for t in found.tokens]}
            )  # fmt: skip

        return await self._guard(request, work)

    async def update_password(self, request: Request, args: list[str]) -> Response:
        def work(subject: Subject, caller: Caller) -> Response:
            body = _body(request)
            name = _text(body, "name", "") or subject.name
            self._account_check(subject, caller, "update", name)
            current, new = _text(body, "currentPassword", ""), _text(body, "newPassword", "")
            self.auth.update_password(subject.name, current, name, new)
            return Response.json({})

        return await self._guard(request, work)

    async def create_account_token(self, request: Request, args: list[str]) -> Response:
        def work(subject: Subject, caller: Caller) -> Response:
            self._account_check(subject, caller, "update", args[0])
            body = _body(request)
            token, record = self.auth.generate_account_token(
                args[0], _seconds(body), _text(body, "id", "")
            )
            return Response.json(_record(record, token))

        return await self._guard(request, work)

    async def delete_account_token(self, request: Request, args: list[str]) -> Response:
        def work(subject: Subject, caller: Caller) -> Response:
            self._account_check(subject, caller, "update", args[0])
            self.auth.delete_account_token(args[0], args[1])
            return Response.json({})

        return await self._guard(request, work)

    async def create_project_token(self, request: Request, args: list[str]) -> Response:
        def work(subject: Subject, caller: Caller) -> Response:
            caller.check("projects", "update", args[0])
            body = _body(request)
            token, record = self.auth.create_project_token(
                args[0], args[1], _seconds(body), _text(body, "id", "")
            )
            return Response.json(_record(record, token))

        return await self._guard(request, work)

    async def delete_project_token(self, request: Request, args: list[str]) -> Response:
        def work(subject: Subject, caller: Caller) -> Response:
            caller.check("projects", "update", args[0])
            self.auth.delete_project_token(args[0], args[1], args[2])
            return Response.json({})

        return await self._guard(request, work)
