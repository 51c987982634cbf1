"""Bootstrap tokens: how a workload proves its identity to the CA before it has a certificate.

In Kubernetes, istio-agent sends its projected service account token (a JWT, audience
`istio-ca`) as `authorization: Bearer <token>`. Without Kubernetes, the control plane's key
plays the API server's part: a token is a JWT signed with HMAC-SHA256 by the key in
`<ca_dir>/token-signing-key` (0600), with the claims of a Kubernetes token (namespace,
service account, pod, expiry). `meshpilot token issue` prints one, as
`kubectl create token` does.

A token value is a secret: errors and logs describe a token, never include it.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshpilot import bounded_json
from meshpilot.security.files import dir_lock, ensure_private_dir, write_private
from meshpilot.security.identity import IdentityError, SpiffeId

__all__ = [
    "AUDIENCE",
    "DEFAULT_TOKEN_TTL",
    "TOKEN_KEY_FILE",
    "TokenAuthority",
    "TokenClaims",
    "TokenError",
    "issue_token",
]

TOKEN_KEY_FILE = "token-signing-key"
AUDIENCE = "istio-ca"  # the audience istio-agent asks its token for
ISSUER = "meshpilot"
DEFAULT_TOKEN_TTL = dt.timedelta(hours=24)
_KEY_BYTES = 32
_HEADER = {"alg": "HS256", "typ": "JWT"}


class TokenError(ValueError):
    """A token is malformed, forged, expired or for another audience (says which, not the
    token)."""


@dataclass(frozen=True, slots=True)
class TokenClaims:
    namespace: str
    service_account: str
    pod: str
    expires: dt.datetime

    def identity(self, trust_domain: str) -> SpiffeId:
        return SpiffeId(trust_domain, self.namespace, self.service_account)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


class TokenAuthority:
    def __init__(self, key: bytes) -> None:
        if len(key) < _KEY_BYTES:
            raise ValueError(f"token signing key too short ({len(key)} bytes, want {_KEY_BYTES})")
        self._key = key
        # Keyed once: each check copies it instead of deriving the HMAC pads again.
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)

    def __repr__(self) -> str:  # never the key
        return "TokenAuthority(key=[redacted])"

    @classmethod
    def open(cls, ca_dir: Path) -> TokenAuthority:
        """The key in `<ca_dir>/token-signing-key`, created (0600) on first use."""
        ensure_private_dir(ca_dir)
        path = ca_dir / TOKEN_KEY_FILE
        with dir_lock(ca_dir):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                data = secrets.token_bytes(_KEY_BYTES)
                write_private(path, data)
            path.chmod(0o600)
        return cls(data)

    def issue(
        self,
        namespace: str,
        service_account: str,
        pod: str,
        ttl: dt.timedelta = DEFAULT_TOKEN_TTL,
        now: dt.datetime | None = None,
    ) -> str:
        SpiffeId("cluster.local", namespace, service_account)  # validates both names
        if ttl <= dt.timedelta(0):
            raise ValueError("token lifetime must be positive")
        issued = int((now or dt.datetime.now(dt.UTC)).timestamp())
        claims = {
            "iss": ISSUER,
            "aud": [AUDIENCE],
            "sub": f"system:serviceaccount:{namespace}:{service_account}",
            "iat": issued,
            "exp": issued + int(ttl.total_seconds()),
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": service_account},
                "pod": {"name": pod},
            },
        }
        signing_input = f"{_b64(_json(_HEADER))}.{_b64(_json(claims))}"
        return f"{signing_input}.{_b64(self._mac(signing_input))}"

    def verify(self, token: str, now: dt.datetime | None = None) -> TokenClaims:
        """The token's claims if this key signed it and it is current; TokenError otherwise."""
        parts = token.strip().split(".")
        if len(parts) != 3:
            raise TokenError("the token is not a JWT (three dot-separated parts)")
        try:
            # Our own tokens carry exactly _HEADER: parse only another header.
            header = _HEADER if parts[0] == _HEADER_B64 else bounded_json.loads(_unb64(parts[0]))
            signature = _unb64(parts[2])
        except (ValueError, binascii.Error):
            raise TokenError("the token is not a JWT (bad base64 or JSON)") from None
        if not isinstance(header, dict) or header.get("alg") != "HS256":
            raise TokenError("the token is not signed by this control plane (alg is not HS256)")
        if not hmac.compare_digest(signature, self._mac(f"{parts[0]}.{parts[1]}")):
            raise TokenError("the token's signature is invalid (not issued by this control plane)")
        try:
            claims = bounded_json.loads(_unb64(parts[1]))
            return _claims(claims, now or dt.datetime.now(dt.UTC))
        except (ValueError, binascii.Error, KeyError, TypeError, AttributeError) as exc:
            if isinstance(exc, TokenError):
                raise
            raise TokenError("the token's claims are malformed") from None

    def _mac(self, signing_input: str) -> bytes:
        mac = self._keyed.copy()
        mac.update(signing_input.encode())
        return mac.digest()


_HEADER_B64 = _b64(_json(_HEADER))


def _claims(claims: dict[str, Any], now: dt.datetime) -> TokenClaims:
    audiences = claims.get("aud")
    audiences = [audiences] if isinstance(audiences, str) else audiences or []
    if AUDIENCE not in audiences:
        raise TokenError(f"the token is not for the CA (audience {AUDIENCE!r} missing)")
    expires = dt.datetime.fromtimestamp(int(claims["exp"]), dt.UTC)
    if expires <= now:
        raise TokenError(f"the token expired at {expires:%Y-%m-%dT%H:%M:%SZ}")
    k8s = claims["kubernetes.io"]
    result = TokenClaims(
        namespace=str(k8s["namespace"]),
        service_account=str(k8s["serviceaccount"]["name"]),
        pod=str(k8s.get("pod", {}).get("name", "")),
        expires=expires,
    )
    try:
        result.identity("cluster.local")
    except IdentityError as exc:
        raise TokenError(f"the token names an invalid identity: {exc}") from None
    return result


def issue_token(
    ca_dir: Path,
    namespace: str,
    service_account: str,
    pod: str,
    ttl: dt.timedelta = DEFAULT_TOKEN_TTL,
) -> str:
    """A bootstrap token for one pod, signed by the control plane whose CA dir is `ca_dir`
    (what the runtime hands each pod's agent)."""
    return TokenAuthority.open(ca_dir).issue(namespace, service_account, pod, ttl)
