"""The filters a sidecar's inbound chains get: which chains, in which order, per action."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.http.jwt_authn.v3 import config_pb2 as jwt_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.rbac.v3 import rbac_pb2 as network_rbac_pb2

from meshpilot.config.loader import load_paths, load_text
from meshpilot.model.proxy import ProxyType, proxy_from_pod
from meshpilot.model.push_context import build_push_context
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.generate.security.jwt_authn import UNUSABLE_JWKS
from tests.unit.authz.helpers import as_dict

MESH = Path(__file__).parents[1] / "golden" / "inputs" / "authz-mesh.yaml"
POD = "httpbin-v1-5f6b8d7c9-abcde"
HTTP_DEFAULTS = [
    "envoy.filters.http.grpc_stats",
    "envoy.filters.http.fault",
    "envoy.filters.http.cors",
    "envoy.filters.http.router",
]


def _inbound(policies: str) -> listener_pb2.Listener:
    base = load_paths([MESH])
    extra = load_text(policies, "policies.yaml")
    assert not base.errors and not extra.errors, [str(d) for d in extra.errors]
    push = build_push_context([*base.objects, *extra.objects], base.mesh)
    pod = push.pod("foo", POD)
    assert pod is not None
    config = generate_proxy_config(push, proxy_from_pod(pod, ProxyType.SIDECAR))
    (listener,) = [lst for lst in config.listeners if lst.name == "virtualInbound"]
    return listener


def _hcm(chain: Any) -> hcm_pb2.HttpConnectionManager | None:
    first = chain.filters[0]
    if first.name != "envoy.filters.network.http_connection_manager":
        return None
    hcm = hcm_pb2.HttpConnectionManager()
    first.typed_config.Unpack(hcm)
    return hcm


def _policy(name: str, spec: str, annotations: str = "{}") -> str:
    return (
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n"
        f"metadata: {{name: {name}, namespace: foo, annotations: {annotations}}}\n"
        f"spec: {spec}\n---\n"
    )


JWT = """apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: foo}
spec:
  jwtRules:
  - {issuer: a, jwksUri: 'https://jwks.example.com:8443/keys'}
---
"""

ALL_ACTIONS = (
    _policy("allow", "{rules: [{}]}")
    + _policy("deny", "{action: DENY, rules: [{to: [{operation: {paths: [/x]}}]}]}")
    + _policy("audit", "{action: AUDIT, rules: [{}]}")
    + _policy("custom", "{action: CUSTOM, provider: {name: opa}, rules: [{}]}")
)


def test_every_chain_but_the_blackhole_is_secured_in_istio_order() -> None:
    listener = _inbound(JWT + ALL_ACTIONS)
    http_chains = tcp_chains = 0
    for chain in listener.filter_chains:
        names = [f.name for f in chain.filters]
        if chain.name == "virtualInbound-blackhole":
            assert names == ["envoy.filters.network.tcp_proxy"]
            continue
        hcm = _hcm(chain)
        if hcm is None:
            tcp_chains += 1
            assert names == ["envoy.filters.network.rbac"] * 4 + ["envoy.filters.network.tcp_proxy"]
            continue
        http_chains += 1
        filters = [f.name for f in hcm.http_filters]
        assert (
            filters
            == ["envoy.filters.http.jwt_authn"] + ["envoy.filters.http.rbac"] * 4 + HTTP_DEFAULTS
        )
        actions = [
            as_dict(f.typed_config)["rules"].get("action", "ALLOW") for f in hcm.http_filters[1:5]
        ]
        assert actions == ["DENY", "LOG", "DENY", "ALLOW"]  # CUSTOM (as deny), AUDIT, DENY, ALLOW
    assert http_chains >= 2 and tcp_chains >= 2  # passthrough and served ports, both protocols


def test_tcp_chains_carry_the_tcp_stat_prefix() -> None:
    listener = _inbound(_policy("allow", "{rules: [{}]}"))
    tcp = [c for c in listener.filter_chains if c.filters[0].name == "envoy.filters.network.rbac"]
    config = network_rbac_pb2.RBAC()
    tcp[0].filters[0].typed_config.Unpack(config)
    assert config.stat_prefix == "tcp."


def test_dry_run_deny_goes_to_shadow_rules() -> None:
    listener = _inbound(
        _policy("try", "{action: DENY, rules: [{}]}", '{"istio.io/dry-run": "true"}')
    )
    hcm = next(h for c in listener.filter_chains if (h := _hcm(c)) is not None)
    found = as_dict(hcm.http_filters[0].typed_config)
    assert "rules" not in found
    assert found["shadow_rules"]["action"] == "DENY"
    assert found["shadow_rules_stat_prefix"] == "istio_dry_run_deny_"


def test_no_policy_no_security_filters() -> None:
    listener = _inbound(
        _policy("elsewhere", "{selector: {matchLabels: {app: other}}, rules: [{}]}")
    )
    text = str(listener)
    assert "rbac" not in text and "jwt_authn" not in text


def _jwt_config(jwt_rules: str) -> jwt_pb2.JwtAuthentication:
    text = (
        "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\n"
        f"metadata: {{name: jwt, namespace: foo}}\nspec:\n  jwtRules:\n{jwt_rules}"
    )
    listener = _inbound(text)
    hcm = next(h for c in listener.filter_chains if (h := _hcm(c)) is not None)
    config = jwt_pb2.JwtAuthentication()
    hcm.http_filters[0].typed_config.Unpack(config)
    return config


def test_jwks_uri_uses_the_outbound_cluster_of_the_host() -> None:
    config = _jwt_config(
        "  - {issuer: a, jwksUri: 'https://jwks.example.com:8443/keys', timeout: 2s}\n"
    )
    http_uri = config.providers["origins-0"].remote_jwks.http_uri
    assert http_uri.cluster == "outbound|8443||jwks.example.com"
    assert http_uri.timeout.seconds == 2
    assert config.providers["origins-0"].remote_jwks.cache_duration.seconds == 300


def test_jwks_uri_of_an_unknown_host_keeps_istio_cluster_name() -> None:
    config = _jwt_config("  - {issuer: a, jwksUri: 'http://keys.unknown.example/jwks'}\n")
    assert config.providers["origins-0"].remote_jwks.http_uri.cluster == (
        "outbound|80||keys.unknown.example"
    )


def test_issuer_without_keys_gets_a_key_set_nothing_verifies_against() -> None:
    config = _jwt_config("  - {issuer: a}\n")
    assert config.providers["origins-0"].local_jwks.inline_string == UNUSABLE_JWKS


def test_one_provider_token_optional_but_must_be_valid() -> None:
    config = _jwt_config("  - {issuer: a, jwksUri: 'https://jwks.example.com:8443/k'}\n")
    assert as_dict(config.rules[0])["requires"] == {
        "requires_any": {"requirements": [{"provider_name": "origins-0"}, {"allow_missing": {}}]}
    }
    assert config.bypass_cors_preflight
    assert config.providers["origins-0"].payload_in_metadata == "payload"
