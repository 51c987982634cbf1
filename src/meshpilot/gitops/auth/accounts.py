"""Local accounts as Argo CD keeps them, read from the live store on every request (a change
of argocd-cm or argocd-secret counts at once, as in Argo CD):

    ConfigMap argocd/argocd-cm
      accounts.<name>: "apiKey, login"     capabilities (apiKey: API tokens; login: sessions);
                                           names: 1-32 characters without `:`, `,` or spaces
      accounts.<name>.enabled: "false"     disables the account (default enabled)
      admin.enabled: "false"               disables the built-in admin (capability login;
                                           `accounts.admin: apiKey, login` changes them)
      users.anonymous.enabled: "true"      requests without a token act as `anonymous`
      users.session.duration: "24h"        lifetime of a login session (default 24h)
    Secret argocd/argocd-secret
      admin.password, admin.passwordMtime  bcrypt hash, RFC 3339 time of the last change
      accounts.<name>.password, accounts.<name>.passwordMtime
      admin.tokens, accounts.<name>.tokens JSON [{"id", "iat", "exp"}]: the API tokens that
                                           are valid (a deleted entry is a revoked token)
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from meshpilot.config.duration import parse_duration
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.projects import CONTROL_NAMESPACE
from meshpilot.store.base import StoreSnapshot

__all__ = [
    "ADMIN",
    "ANONYMOUS",
    "CONFIG_MAP",
    "SECRET",
    "Account",
    "AuthConfig",
    "TokenRecord",
    "auth_config",
    "secret_key",
]

ADMIN = "admin"
ANONYMOUS = "anonymous"
CONFIG_MAP = "argocd-cm"
SECRET = "argocd-secret"
LOGIN, API_KEY = "login", "apiKey"
SESSION_SECONDS = 24 * 3600  # Argo CD's default users.session.duration


@dataclass(frozen=True, slots=True)
class TokenRecord:
    id: str
    iat: int
    exp: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "iat": self.iat}
        if self.exp is not None:
            out["exp"] = self.exp
        return out


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    capabilities: frozenset[str]
    enabled: bool = True
    password_hash: str = field(default="", repr=False)  # bcrypt; "" none set yet
    password_mtime: int = 0  # epoch seconds; sessions issued before it are void
    tokens: tuple[TokenRecord, ...] = ()

    @property
    def can_login(self) -> bool:
        return self.enabled and LOGIN in self.capabilities

    @property
    def can_api_key(self) -> bool:
        return self.enabled and API_KEY in self.capabilities


@dataclass(frozen=True, slots=True)
class AuthConfig:
    accounts: Mapping[str, Account]
    anonymous_enabled: bool = False
    session_seconds: int = SESSION_SECONDS


def secret_key(account: str, item: str) -> str:
    """The argocd-secret key of an account's `password`, `passwordMtime` or `tokens`."""
    return f"{ADMIN}.{item}" if account == ADMIN else f"accounts.{account}.{item}"


def _data(snapshot: StoreSnapshot, kind: Kind, name: str) -> dict[str, str]:
    obj = snapshot.objects.get(ConfigKey(kind, CONTROL_NAMESPACE, name))
    if obj is None:
        return {}
    out = dict(getattr(obj.model, "data", {}) or {})
    if kind is Kind.SECRET:
        decoded = {}
        for key, value in out.items():
            try:
                decoded[key] = base64.b64decode(value, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                continue  # unreadable: as if absent (never a login with a garbled hash)
        out = decoded
        out.update(getattr(obj.model, "string_data", {}) or {})
    return out


def _capabilities(text: str) -> frozenset[str]:
    return frozenset(c.strip() for c in text.split(",") if c.strip())


def _mtime(text: str) -> int:
    try:
        return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


def _tokens(text: str) -> tuple[TokenRecord, ...]:
    try:
        items = json.loads(text) if text else []
    except ValueError:
        return ()
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            exp = item.get("exp")
            iat = item.get("iat")
            out.append(TokenRecord(item["id"], iat if isinstance(iat, int) else 0,
                                   exp if isinstance(exp, int) and exp > 0 else None))  # fmt: skip
    return tuple(out)


def auth_config(snapshot: StoreSnapshot) -> AuthConfig:
    cm = _data(snapshot, Kind.CONFIG_MAP, CONFIG_MAP)
    secret = _data(snapshot, Kind.SECRET, SECRET)
    names = {ADMIN} | {
        k.removeprefix("accounts.")
        for k in cm
        if k.startswith("accounts.") and not k.endswith(".enabled")
    }
    # A name with `:` or `,` could pose as an RBAC role or a project role subject
    # (`role:admin`, `proj:p:r`); Argo CD's names are at most 32 characters.
    names = {n for n in names if n and len(n) <= 32 and not set(n) & set(":, ")}
    accounts = {}
    for name in sorted(names):
        if name == ADMIN:
            capabilities = _capabilities(cm.get("accounts.admin", LOGIN))
            enabled = cm.get("admin.enabled", "true").strip().lower() != "false"
        else:
            capabilities = _capabilities(cm.get(f"accounts.{name}", ""))
            enabled = cm.get(f"accounts.{name}.enabled", "true").strip().lower() != "false"
        accounts[name] = Account(
            name=name,
            capabilities=capabilities,
            enabled=enabled,
            password_hash=secret.get(secret_key(name, "password"), ""),
            password_mtime=_mtime(secret.get(secret_key(name, "passwordMtime"), "")),
            tokens=_tokens(secret.get(secret_key(name, "tokens"), "")),
        )
    anonymous = cm.get("users.anonymous.enabled", "").strip().lower() == "true"
    return AuthConfig(accounts, anonymous, _session_seconds(cm.get("users.session.duration", "")))


def _session_seconds(text: str) -> int:
    try:
        seconds = int(parse_duration(text.strip()) / 1e9) if text.strip() else SESSION_SECONDS
    except ValueError:
        return SESSION_SECONDS  # unreadable: the default, never an endless session
    return seconds if seconds > 0 else SESSION_SECONDS
