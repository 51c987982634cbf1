"""Who is calling the GitOps API, as argocd-server decides it: a bearer token this server
signed (a session from `POST /api/v1/session`, an account's API token, a project role's
token) that is neither expired nor revoked, else `anonymous` when argocd-cm allows it, else
401. Headers that merely name a user are not credentials and are ignored.

RBAC subjects: the account name for sessions and account tokens (Argo CD's `sub` is
`<name>:login` / `<name>:apiKey`), `proj:<project>:<role>` for project role tokens, and
`anonymous` (only `policy.default` grants it anything unless the policy names it).
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.admission import Caller, policy_from_store, projects_in
from meshpilot.gitops.auth.accounts import (
    ADMIN,
    ANONYMOUS,
    API_KEY,
    LOGIN,
    Account,
    TokenRecord,
    auth_config,
    secret_key,
)
from meshpilot.gitops.auth.jwt import Claims, Unauthenticated, sign, verify
from meshpilot.gitops.auth.passwords import check_password, generate_password, hash_password
from meshpilot.gitops.auth.records import set_role_tokens, set_secret_values
from meshpilot.gitops.auth.state import ServerState
from meshpilot.gitops.auth.throttle import LoginThrottle
from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.model import AppProject, ProjectRole
from meshpilot.gitops.projects import CONTROL_NAMESPACE
from meshpilot.gitops.rbac import Enforcer, policy_from_config_map
from meshpilot.store.base import LiveStore

__all__ = ["Authenticator", "Subject"]


@dataclass(frozen=True, slots=True)
class Subject:
    name: str  # the RBAC subject
    claims: Claims | None = None  # None: anonymous


class Authenticator:
    def __init__(
        self, store: LiveStore, state: ServerState, throttle: LoginThrottle | None = None
    ) -> None:
        self.store = store
        self.state = state
        self.throttle = throttle or LoginThrottle()

    # -- first start ---------------------------------------------------------------------

    def ensure_admin_password(self) -> str | None:
        """A generated admin password when the admin has none yet (Argo CD's first start):
        its bcrypt hash goes into argocd-secret, the password itself to a 0600 file only.
        Returns the file's path, or None when nothing was generated."""
        admin = auth_config(self.store.snapshot()).accounts[ADMIN]
        if admin.password_hash or not admin.enabled:
            return None
        password = generate_password()
        self._set_password(ADMIN, password)
        return str(self.state.write_initial_password(password))

    def _set_password(self, account: str, password: str) -> None:
        now = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        set_secret_values(
            self.store,
            {secret_key(account, "password"): hash_password(password),
             secret_key(account, "passwordMtime"): now},
        )  # fmt: skip

    def update_password(self, caller: str, current: str, account: str, new: str) -> None:
        """Argo CD's `account update-password`: `current` is the caller's own password
        (a stolen session alone cannot change passwords); RBAC is the API's business."""
        accounts = auth_config(self.store.snapshot()).accounts
        me = accounts.get(caller)
        if not check_password(current, me.password_hash if me else ""):
            raise GitopsError("current password does not match")
        if account not in accounts:
            raise GitopsError(f"account {account!r} does not exist")
        _check_new_password(new)
        self._set_password(account, new)

    # -- sessions ------------------------------------------------------------------------

    def login(self, username: str, password: str) -> str:
        if self.throttle.blocked(username):
            raise Unauthenticated("too many failed logins for this account: try again later")
        config = auth_config(self.store.snapshot())
        account = config.accounts.get(username)
        ok = check_password(password, account.password_hash if account else "")
        if not ok or account is None or not account.can_login:
            self.throttle.failed(username)
            # One message for every case: no hint whether the account exists.
            raise Unauthenticated("invalid username or password")
        self.throttle.succeeded(username)
        now = int(time.time())
        expires = now + config.session_seconds
        claims = Claims(f"{username}:{LOGIN}", str(uuid.uuid4()), now, expires)
        return sign(claims, self.state.key)

    def logout(self, subject: Subject) -> None:
        claims = subject.claims
        if claims is None or not claims.sub.endswith(f":{LOGIN}"):
            raise GitopsError("only a session (from `meshpilot gitops login`) can log out")
        self.state.revoke(claims.jti, claims.exp)

    # -- every request -------------------------------------------------------------------

    def authenticate(self, headers: Mapping[str, str]) -> Subject:
        """Headers with lower-case names. Raises Unauthenticated."""
        scheme, _, token = headers.get("authorization", "").strip().partition(" ")
        if not scheme:
            if auth_config(self.store.snapshot()).anonymous_enabled:
                return Subject(ANONYMOUS)
            raise Unauthenticated(
                "no session information: log in (`meshpilot gitops login`) or send "
                "`Authorization: Bearer <token>`"
            )
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("invalid session: expected `Authorization: Bearer <token>`")
        claims = verify(token.strip(), self.state.key)
        if claims.sub.startswith("proj:"):
            return Subject(self._project_subject(claims), claims)
        name, _, capability = claims.sub.rpartition(":")
        account = auth_config(self.store.snapshot()).accounts.get(name)
        if account is None or not account.enabled:
            raise Unauthenticated(
                f"invalid session: account {name!r} does not exist or is disabled"
            )
        if capability == LOGIN:
            self._check_session(account, claims)
        elif capability == API_KEY:
            if not account.can_api_key or not _recorded(account.tokens, claims):
                raise Unauthenticated("invalid session: the token has been revoked")
        else:
            raise Unauthenticated("invalid session: unknown token subject")
        return Subject(name, claims)

    def _check_session(self, account: Account, claims: Claims) -> None:
        if not account.can_login:
            raise Unauthenticated(f"invalid session: account {account.name!r} cannot log in")
        if self.state.is_revoked(claims.jti):
            raise Unauthenticated("invalid session: the session has been logged out")
        if claims.iat < account.password_mtime:  # Argo CD: a password change ends sessions
            raise Unauthenticated("invalid session: the password has changed since login")

    def _project_subject(self, claims: Claims) -> str:
        _, project, role = [*claims.sub.split(":", 2), "", ""][:3]
        found = self._role(project, role)
        if found is None or not _recorded(
            tuple(TokenRecord(t.id, t.iat, t.exp) for t in found.jwt_tokens), claims
        ):
            raise Unauthenticated("invalid session: the token has been revoked")
        return claims.sub

    def _role(self, project: str, role: str) -> ProjectRole | None:
        obj = self.store.get(ConfigKey(Kind.APP_PROJECT, CONTROL_NAMESPACE, project))
        if obj is None or not isinstance(obj.model, AppProject):
            return None
        return next((r for r in obj.model.spec.roles if r.name == role), None)

    def caller(self, subject: Subject) -> Caller:
        """The subject under the store's RBAC policy (argocd-rbac-cm + project roles)."""
        snapshot = self.store.snapshot()
        policy = policy_from_store(snapshot)
        if policy is None:
            policy = policy_from_config_map({})  # the built-in policy alone
        enforcer = Enforcer(policy, projects_in(snapshot))
        return Caller(user=subject.name, enforcer=enforcer)

    # -- API tokens ----------------------------------------------------------------------

    def generate_account_token(
        self, account: str, expires_in: int = 0, token_id: str = ""
    ) -> tuple[str, TokenRecord]:
        """An API token of `account` (apiKey capability), recorded in argocd-secret."""
        found = auth_config(self.store.snapshot()).accounts.get(account)
        if found is None:
            raise GitopsError(f"account {account!r} does not exist")
        if not found.can_api_key:
            raise GitopsError(f"account {account!r} does not have apiKey capability")
        record = _new_record(found.tokens, expires_in, token_id)
        token = sign(Claims(f"{account}:{API_KEY}", record.id, record.iat, record.exp),
                     self.state.key)  # fmt: skip
        tokens = [*(t.to_json() for t in found.tokens), record.to_json()]
        set_secret_values(self.store, {secret_key(account, "tokens"): json.dumps(tokens)})
        return token, record

    def delete_account_token(self, account: str, token_id: str) -> None:
        found = auth_config(self.store.snapshot()).accounts.get(account)
        if found is None or not any(t.id == token_id for t in found.tokens):
            raise GitopsError(f"account {account!r} has no token with id {token_id!r}")
        kept = [t.to_json() for t in found.tokens if t.id != token_id]
        set_secret_values(self.store, {secret_key(account, "tokens"): json.dumps(kept)})

    def accounts(self) -> list[Account]:
        return list(auth_config(self.store.snapshot()).accounts.values())

    def account_tokens(self, account: str) -> tuple[TokenRecord, ...]:
        found = auth_config(self.store.snapshot()).accounts.get(account)
        if found is None:
            raise GitopsError(f"account {account!r} does not exist")
        return found.tokens

    def create_project_token(
        self, project: str, role: str, expires_in: int = 0, token_id: str = ""
    ) -> tuple[str, TokenRecord]:
        found = self._role(project, role)
        if found is None:
            raise GitopsError(f"project {project!r} has no role {role!r}")
        existing = tuple(TokenRecord(t.id, t.iat, t.exp) for t in found.jwt_tokens)
        record = _new_record(existing, expires_in, token_id)
        set_role_tokens(self.store, project, role, lambda tokens: [*tokens, record])
        subject = f"proj:{project}:{role}"
        return sign(Claims(subject, record.id, record.iat, record.exp), self.state.key), record

    def delete_project_token(self, project: str, role: str, token_id: str) -> None:
        found = self._role(project, role)
        if found is None or not any(t.id == token_id for t in found.jwt_tokens):
            raise GitopsError(f"role {project}/{role} has no token with id {token_id!r}")
        set_role_tokens(
            self.store, project, role, lambda tokens: [t for t in tokens if t.id != token_id]
        )


def _recorded(tokens: tuple[TokenRecord, ...], claims: Claims) -> bool:
    return any(secrets.compare_digest(t.id, claims.jti) for t in tokens)


def _new_record(existing: tuple[TokenRecord, ...], expires_in: int, token_id: str) -> TokenRecord:
    if expires_in < 0:
        raise GitopsError("--expires-in must not be negative")
    token_id = token_id or str(uuid.uuid4())
    if any(t.id == token_id for t in existing):
        raise GitopsError(f"a token with id {token_id!r} already exists")
    now = int(time.time())
    return TokenRecord(token_id, now, now + expires_in if expires_in else None)


def _check_new_password(password: str) -> None:
    # Argo CD's default passwordPattern is ^.{8,32}$; bcrypt reads at most 72 bytes.
    if not 8 <= len(password) <= 32:
        raise GitopsError("the new password must be 8 to 32 characters long")
