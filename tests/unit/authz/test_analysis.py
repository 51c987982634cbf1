"""`meshpilot analyze` findings for security policies."""

from __future__ import annotations

from pathlib import Path

from meshpilot.analysis import analyze
from meshpilot.config.loader import load_paths, load_text
from meshpilot.model.push_context import build_push_context

MESH = Path(__file__).parents[1] / "golden" / "inputs" / "authz-mesh.yaml"


def _findings(text: str) -> list[str]:
    base = load_paths([MESH])
    extra = load_text(text, "security.yaml")
    assert not extra.errors
    push = build_push_context([*base.objects, *extra.objects], base.mesh)
    return [str(d) for d in analyze(push) if d.file == "security.yaml"]


def test_selector_matching_no_workload() -> None:
    text = """apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: typo, namespace: foo}
spec:
  selector:
    matchLabels: {app: httbin}
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh-selector, namespace: istio-system}
spec:
  selector:
    matchLabels: {app: httpbin}
  rules: [{}]
"""
    assert _findings(text) == [
        "security.yaml:6: warning IST0127: AuthorizationPolicy foo/typo: "
        "spec.selector.matchLabels: No matching workloads for this resource with the "
        "following labels: app=httbin"
    ]


def test_jwks_uri_without_a_cluster() -> None:
    text = """apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: foo}
spec:
  jwtRules:
  - issuer: known
    jwksUri: https://jwks.example.com:8443/keys
  - issuer: unknown
    jwksUri: https://keys.nowhere.example/jwks
"""
    (found,) = _findings(text)
    assert found.startswith("security.yaml:9: warning MP0008: RequestAuthentication foo/jwt: ")
    assert 'host "keys.nowhere.example" port 443' in found
    assert "rejects its tokens (401)" in found
