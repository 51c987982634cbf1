"""HS256 JSON Web Tokens of the GitOps API (Argo CD's session and API tokens): signed with
the server key (`server.secretkey`, 0600 in the server's state directory).

A token value is a secret: errors say what is wrong with a token, never include it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any

from meshpilot.gitops.errors import GitopsError

__all__ = ["ISSUER", "Claims", "Unauthenticated", "sign", "verify"]

ISSUER = "meshpilot-gitops"
_HEADER = {"alg": "HS256", "typ": "JWT"}


class Unauthenticated(GitopsError):
    """HTTP 401: no credentials, or a token that is malformed, forged, expired or revoked
    (the message says which, never the token)."""


@dataclass(frozen=True, slots=True)
class Claims:
    sub: str  # `<account>:login`, `<account>:apiKey` or `proj:<project>:<role>`
    jti: str
    iat: int
    exp: int | None = None  # None: never expires (API tokens made with --expires-in 0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"iss": ISSUER, "sub": self.sub, "jti": self.jti}
        out.update({"iat": self.iat, "nbf": self.iat})
        if self.exp is not None:
            out["exp"] = self.exp
        return out


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


def sign(claims: Claims, key: bytes) -> str:
    signing_input = f"{_b64(_json(_HEADER))}.{_b64(_json(claims.to_json()))}"
    mac = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"


def verify(token: str, key: bytes, now: float | None = None) -> Claims:
    """The claims of a token this server signed and that has not expired."""
    parts = token.split(".")
    if len(parts) != 3:
        raise Unauthenticated("invalid session: token is malformed")
    try:
        header, payload = json.loads(_unb64(parts[0])), json.loads(_unb64(parts[1]))
        given = _unb64(parts[2])
    except (binascii.Error, ValueError):
        raise Unauthenticated("invalid session: token is malformed") from None
    wanted = hmac.new(key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
    # The signature first, and against HS256 only: an `alg: none` token is a forgery.
    if not hmac.compare_digest(given, wanted) or not isinstance(header, dict):
        raise Unauthenticated("invalid session: token signature is invalid")
    if header.get("alg") != "HS256" or not isinstance(payload, dict):
        raise Unauthenticated("invalid session: token signature is invalid")
    if payload.get("iss") != ISSUER:
        raise Unauthenticated("invalid session: token has an unknown issuer")
    sub, jti, iat, exp = (payload.get(k) for k in ("sub", "jti", "iat", "exp"))
    if not isinstance(sub, str) or not isinstance(jti, str) or not isinstance(iat, int):
        raise Unauthenticated("invalid session: token lacks sub, jti or iat")
    if exp is not None and not isinstance(exp, int):
        raise Unauthenticated("invalid session: token has a bad exp")
    if exp is not None and (time.time() if now is None else now) >= exp:
        raise Unauthenticated("invalid session: token is expired")
    return Claims(sub=sub, jti=jti, iat=iat, exp=exp)
