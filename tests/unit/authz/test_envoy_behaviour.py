"""What a client sees through a real Envoy carrying the generated jwt_authn and RBAC filters:
Istio's semantics end to end for HTTP attributes (method, path, header, request principal,
claims). A valid token gives 200, an invalid one 401, a missing one 403 where a principal
is required, and DENY wins over ALLOW."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from meshpilot.config.loader import load_paths, load_text
from meshpilot.model.proxy import ProxyType, proxy_from_pod
from meshpilot.model.push_context import build_push_context
from meshpilot.xds.generate.security import inbound_security
from tests.unit.authz.envoy_harness import EnvoyHttp, running_envoy

MESH = Path(__file__).parents[1] / "golden" / "inputs" / "authz-mesh.yaml"
ISSUER = "https://issuer.test"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Signer:
    def __init__(self, kid: str) -> None:
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self) -> str:
        n = self.key.public_key().public_numbers().n
        jwk = {"kty": "RSA", "kid": self.kid, "alg": "RS256", "e": "AQAB"}
        jwk["n"] = _b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))
        return json.dumps({"keys": [jwk]})

    def token(self, **claims: Any) -> str:
        header = _b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": self.kid}).encode())
        body = {"iss": ISSUER, "exp": int(time.time()) + 3600, **claims}
        payload = _b64(json.dumps(body).encode())
        signed = f"{header}.{payload}".encode()
        signature = self.key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
        return f"{header}.{payload}.{_b64(signature)}"


TRUSTED = Signer("trusted")
FORGER = Signer("trusted")  # same kid, different key: a forged signature

POLICIES = f"""apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {{name: jwt, namespace: foo}}
spec:
  jwtRules:
  - issuer: {ISSUER}
    jwks: '{TRUSTED.jwks()}'
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: deny-blocked, namespace: foo}}
spec:
  action: DENY
  rules:
  - when:
    - {{key: 'request.headers[x-block]', values: ['*']}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: allow, namespace: foo}}
spec:
  rules:
  - to:
    - operation: {{methods: [GET], paths: ['/public*']}}
  - from:
    - source: {{requestPrincipals: ['{ISSUER}/alice']}}
    to:
    - operation: {{paths: ['/secure*']}}
  - to:
    - operation: {{paths: ['/admin*']}}
    when:
    - {{key: 'request.auth.claims[groups]', values: [admins]}}
"""


@pytest.fixture(scope="module")
def envoy() -> Iterator[EnvoyHttp]:
    base = load_paths([MESH])
    extra = load_text(POLICIES, "policies.yaml")
    assert not extra.errors, [str(d) for d in extra.errors]
    push = build_push_context([*base.objects, *extra.objects], base.mesh)
    pod = push.pod("foo", "httpbin-v1-5f6b8d7c9-abcde")
    assert pod is not None
    proxy = proxy_from_pod(pod, ProxyType.SIDECAR)
    security = inbound_security(push, proxy, push.sidecar_scope(proxy))
    with running_envoy(security.http) as running:
        yield running


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


CASES = [
    ("GET", "/public/index.html", {}, 200),
    ("POST", "/public/index.html", {}, 403),  # method not allowed
    ("GET", "/public", {"x-block": "1"}, 403),  # DENY wins over ALLOW
    ("GET", "/other", {}, 403),  # an ALLOW policy exists: nothing else is allowed
    ("GET", "/secure", {}, 403),  # no token: passes authn, but a principal is required
    ("GET", "/secure", _bearer("not-a-jwt"), 401),  # malformed token
    ("GET", "/secure", _bearer(FORGER.token(sub="alice")), 401),  # bad signature
    ("GET", "/secure", _bearer(TRUSTED.token(sub="alice", exp=int(time.time()) - 600)), 401),
    ("GET", "/secure", _bearer(TRUSTED.token(sub="alice")), 200),
    ("GET", "/secure", _bearer(TRUSTED.token(sub="bob")), 403),  # wrong principal
    ("GET", "/admin", _bearer(TRUSTED.token(sub="bob", groups=["dev", "admins"])), 200),
    ("GET", "/admin", _bearer(TRUSTED.token(sub="bob", groups="admins")), 200),  # string claim
    ("GET", "/admin", _bearer(TRUSTED.token(sub="bob", groups=["dev"])), 403),
    ("GET", "/public", _bearer("garbage"), 401),  # an invalid token is refused everywhere
]


@pytest.mark.envoy
@pytest.mark.parametrize(("method", "path", "headers", "status"), CASES)
def test_status_seen_by_the_client(
    envoy: EnvoyHttp, method: str, path: str, headers: dict[str, str], status: int
) -> None:
    assert envoy.status(path, method, headers) == status
