"""meshConfig.extensionProviders → ext_authz: a provider that cannot be used says why, and the
CUSTOM policies naming it deny what they match (fail closed) instead of calling nothing."""

from __future__ import annotations

import pytest

from meshpilot.xds.generate.security.ext_authz import resolve_provider
from tests.conftest import push_from_text

MESH = """\
apiVersion: meshpilot.io/v1alpha1
kind: MeshConfig
spec:
  extensionProviders:
  - name: p
    envoyExtAuthzHttp: {PROVIDER}
---
apiVersion: v1
kind: Service
metadata: {name: authz, namespace: shop}
spec:
  clusterIP: 10.96.7.7
  ports: [{name: http, port: 8000}]
"""
GOOD = "service: authz.shop.svc.cluster.local, port: 8000"


@pytest.mark.parametrize(
    ("provider", "error"),
    [
        (GOOD.replace("8000", "0"), "port must be in the range [1, 65535], found: 0"),
        ("port: 8000", "service must not be empty"),
        (GOOD.replace("authz.shop", "other/authz.shop"), "could not find service other/authz"),
        (GOOD + ", statusOnError: '999'", "unsupported statusOnError 999"),
        (GOOD + ", statusOnError: abc", "invalid statusOnError 'abc'"),
        (GOOD + ", pathPrefix: check", "pathPrefix must begin with '/'"),
    ],
)
def test_unusable_provider_says_why(provider: str, error: str) -> None:
    loaded, push = push_from_text(MESH.replace("PROVIDER", provider))
    assert not [d for d in loaded.diagnostics if d.severity.value == "error"]
    resolved = resolve_provider(push, "p")
    assert resolved.http is None and error in resolved.error
    assert resolved.error.startswith("extension provider 'p': ")


def test_unknown_provider_lists_the_known_ones() -> None:
    _, push = push_from_text(MESH.replace("PROVIDER", GOOD))
    assert resolve_provider(push, "opa").error == (
        "extension provider 'opa' not found in meshConfig.extensionProviders (available: p)"
    )
    good = resolve_provider(push, "p")
    assert good.error == "" and good.http is not None
    assert (
        good.http.http_service.server_uri.cluster == "outbound|8000||authz.shop.svc.cluster.local"
    )
    assert good.http.http_service.server_uri.timeout.seconds == 600  # Istio's default
