"""The Istio-shaped RBAC output runs in a real Envoy: escaped namespace, service-account and
principal regexes compile (RE2) and match nothing a plaintext client can present, a grouped
Envoy metadata matcher is accepted and matches no request without that metadata, and a
dry-run DENY counts under Istio's shadow stat prefix without refusing the request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from meshpilot.config.loader import load_paths, load_text
from meshpilot.model.proxy import ProxyType, proxy_from_pod
from meshpilot.model.push_context import build_push_context
from meshpilot.xds.generate.security import inbound_security
from tests.unit.authz.envoy_harness import EnvoyHttp, running_envoy

MESH = Path(__file__).parents[1] / "golden" / "inputs" / "authz-mesh.yaml"

POLICIES = """apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow, namespace: foo}
spec:
  rules:
  - from:
    - source: {namespaces: [a.b, 'x[y]*']}
    - source: {serviceAccounts: [my.ns/my.sa]}
    - source: {principals: ['*.example/ns/a/sa/[b]']}
  - to:
    - operation: {paths: ['/open*']}
  - when:
    - {key: 'experimental.envoy.filters.a.b[c]', values: [x, '[y]'], notValues: [z]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: try-deny
  namespace: foo
  annotations: {istio.io/dry-run: "true"}
spec:
  action: DENY
  rules:
  - to:
    - operation: {paths: [/open/shadow]}
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


@pytest.mark.envoy
def test_escaped_identities_compile_and_match_no_plaintext_peer(envoy: EnvoyHttp) -> None:
    assert envoy.status("/closed") == 403
    assert envoy.status("/open/page") == 200


@pytest.mark.envoy
def test_dry_run_deny_counts_under_istio_prefix(envoy: EnvoyHttp) -> None:
    assert envoy.status("/open/shadow") == 200
    counters = envoy.stats("rbac")
    assert counters["http.authz_test.rbac.istio_dry_run_deny_.shadow_denied"] >= 1, counters
    # the enforced ALLOW filter carries Istio's prefix too, with no shadow rules behind it
    assert counters["http.authz_test.rbac.istio_dry_run_allow_.shadow_denied"] == 0, counters
