"""`meshpilot analyze` on PeerAuthentication: ignored policies and plaintext to STRICT."""

from __future__ import annotations

from meshpilot.analysis import analyze
from tests.conftest import push_from_text
from tests.unit.mtls.meshes import BASE, peer_authn

DISABLE_RULE = """\
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: api, namespace: shop}
spec:
  host: api
  trafficPolicy: {tls: {mode: DISABLE}}
"""


def _findings(extra: str) -> list[str]:
    loaded, push = push_from_text(BASE + extra)
    assert not loaded.errors
    return [str(d) for d in analyze(push) if "PeerAuthentication" in str(d) or "IST0113" in str(d)]


def test_younger_policies_of_the_same_scope_are_flagged() -> None:
    text = peer_authn("a", "shop", "STRICT", created="2024-01-01T00:00:00Z")
    text += peer_authn("b", "shop", "DISABLE", created="2025-01-01T00:00:00Z")
    text += peer_authn("w1", "shop", "STRICT", "{app: api}", created="2024-01-01T00:00:00Z")
    text += peer_authn("w2", "shop", "DISABLE", "{app: api}", created="2025-01-01T00:00:00Z")
    found = _findings(text)
    assert len(found) == 2, found
    assert "PeerAuthentication shop/b" in found[0] and "shop/a is older" in found[0]
    assert "PeerAuthentication shop/w2" in found[1] and "shop/w1 is older" in found[1]


def test_selector_in_the_root_namespace_is_flagged() -> None:
    found = _findings(peer_authn("x", "istio-system", "STRICT", "{app: api}"))
    assert len(found) == 1 and "applies to no workload" in found[0]


def test_plaintext_destination_rule_towards_strict_namespace() -> None:
    found = _findings(peer_authn("default", "istio-system", "STRICT") + DISABLE_RULE)
    assert len(found) == 1, found
    assert "IST0113" in found[0] and "spec.trafficPolicy.tls.mode" in found[0]
    assert _findings(peer_authn("default", "istio-system", "PERMISSIVE") + DISABLE_RULE) == []
