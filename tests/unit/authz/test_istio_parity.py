"""RBAC output byte for byte as Istio's authz builder emits it: regex escaping of namespaces,
service accounts and suffix principals, trust-domain alias expansion, and the shadow rules
stat prefix on every filter (Istio's golden testdata, pilot/pkg/security/authz/builder)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.rbac.v3 import rbac_pb2 as network_rbac_pb2

from meshpilot.config.loader import load_paths, load_text
from meshpilot.model.proxy import ProxyType, proxy_from_pod
from meshpilot.model.push_context import build_push_context
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.generate.security.rules import rule_policy
from meshpilot.xds.generate.security.trust_domain import (
    expand_trust_domains,
    with_trust_domain_aliases,
)
from tests.unit.authz.helpers import as_dict, rule

MESH = Path(__file__).parents[1] / "golden" / "inputs" / "authz-mesh.yaml"
POD = "httpbin-v1-5f6b8d7c9-abcde"
TDS = ("td-new", "td-old")


def _source_regex(source: str) -> str:
    policy = rule_policy(rule(f"from: [{{source: {source}}}]"), "foo", tcp=False, allow=True)
    assert policy is not None
    ids = as_dict(policy)["principals"][0]["and_ids"]["ids"][0]["or_ids"]["ids"]
    regex: str = ids[0]["authenticated"]["principal_name"]["safe_regex"]["regex"]
    return regex


@pytest.mark.parametrize(
    ("namespace", "regex"),
    [
        ("ns", ".*/ns/ns/.*"),  # Istio's all-fields golden, unchanged
        ("ns-prefix-*", ".*/ns/ns-prefix-.*/.*"),
        ("*-ns-suffix", ".*/ns/.*-ns-suffix/.*"),
        ("*", ".*/ns/.*/.*"),
        ("a.b", r".*/ns/a\.b/.*"),
        ("x[y]*", r".*/ns/x\[y\].*/.*"),
    ],
)
def test_namespace_regex_escaped(namespace: str, regex: str) -> None:
    assert _source_regex(f'{{namespaces: ["{namespace}"]}}') == regex


def test_escaped_namespace_does_not_admit_a_lookalike() -> None:
    regex = _source_regex('{namespaces: ["a.b"]}')
    assert re.fullmatch(regex, "spiffe://cluster.local/ns/a.b/sa/x")
    assert not re.fullmatch(regex, "spiffe://cluster.local/ns/aXb/sa/x")


def test_service_account_regex_escaped() -> None:
    regex = _source_regex('{serviceAccounts: ["my.ns/my.sa"]}')
    assert regex == r"spiffe://.+/ns/my\.ns/(.+/|)sa/my\.sa(/.+)?"
    assert not re.fullmatch(regex, "spiffe://cluster.local/ns/myXns/sa/myXsa")


def test_suffix_principal_escaped() -> None:
    regex = _source_regex('{principals: ["*.example/ns/a/sa/[b]"]}')
    assert regex == r"spiffe://.*\.example/ns/a/sa/\[b\]"


ALIASES = [
    # exact: the same identity in the trust domain and each alias
    ("cluster.local/ns/a/sa/b", ("td-new/ns/a/sa/b", "td-old/ns/a/sa/b")),
    ("td-old/ns/a/sa/b", ("td-new/ns/a/sa/b", "td-old/ns/a/sa/b")),
    # prefix in the service account: each alias with the same prefix
    ("cluster.local/ns/a/sa/b*", ("td-new/ns/a/sa/b*", "td-old/ns/a/sa/b*")),
    # suffix trust domain: kept for the alias it matches, exact for the others
    ("*-old/ns/a/sa/b", ("td-new/ns/a/sa/b", "*-old/ns/a/sa/b")),
    ("*-new/ns/a/sa/b", ("*-new/ns/a/sa/b", "td-old/ns/a/sa/b")),
    ("*d-*/ns/a/sa/b", ("*d-*/ns/a/sa/b",)),  # matches both: kept once
    # prefix trust domain: the exact principal of each alias
    ("td-*/ns/a/sa/b", ("td-new/ns/a/sa/b", "td-old/ns/a/sa/b")),
    # not enforced or foreign: as written
    ("*/ns/a/sa/b", ("*/ns/a/sa/b",)),
    ("*", ("*",)),
    ("other.org/ns/a/sa/b", ("other.org/ns/a/sa/b",)),
]


@pytest.mark.parametrize(("principal", "expanded"), ALIASES)
def test_trust_domain_alias_expansion(principal: str, expanded: tuple[str, ...]) -> None:
    assert with_trust_domain_aliases([principal], TDS) == expanded


def test_suffix_trust_domain_principal_in_rbac() -> None:
    text = "from: [{source: {principals: ['*-old/ns/a/sa/b']}}]"
    policy = rule_policy(rule(text), "foo", tcp=False, allow=True, trust_domains=TDS)
    assert policy is not None
    ids = as_dict(policy)["principals"][0]["and_ids"]["ids"][0]["or_ids"]["ids"]
    assert [i["authenticated"]["principal_name"] for i in ids] == [
        {"exact": "spiffe://td-new/ns/a/sa/b"},
        {"safe_regex": {"regex": "spiffe://.*-old/ns/a/sa/b"}},
    ]


def test_trust_domains_field_expanded_over_aliases() -> None:
    assert expand_trust_domains(["td-old", "x.org", "td-new"], TDS) == ("td-new", "td-old", "x.org")


def _inbound_rbac(policies: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(HTTP RBAC configs, TCP RBAC configs) of the sidecar's inbound chains."""
    base = load_paths([MESH])
    extra = load_text(policies, "policies.yaml")
    assert not base.errors and not extra.errors, [str(d) for d in extra.errors]
    push = build_push_context([*base.objects, *extra.objects], base.mesh)
    pod = push.pod("foo", POD)
    assert pod is not None
    config = generate_proxy_config(push, proxy_from_pod(pod, ProxyType.SIDECAR))
    (listener,) = [lst for lst in config.listeners if lst.name == "virtualInbound"]
    http: list[dict[str, Any]] = []
    tcp: list[dict[str, Any]] = []
    for chain in listener.filter_chains:
        for f in chain.filters:
            if f.name == "envoy.filters.network.rbac":
                net = network_rbac_pb2.RBAC()
                f.typed_config.Unpack(net)
                tcp.append(as_dict(net))
            elif f.name == "envoy.filters.network.http_connection_manager":
                hcm = hcm_pb2.HttpConnectionManager()
                f.typed_config.Unpack(hcm)
                http += [
                    as_dict(h.typed_config)
                    for h in hcm.http_filters
                    if h.name == "envoy.filters.http.rbac"
                ]
    assert http and tcp
    return http, tcp


def _policy(name: str, action: str, dry_run: bool = False) -> str:
    notes = '{"istio.io/dry-run": "true"}' if dry_run else "{}"
    return (
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n"
        f"metadata: {{name: {name}, namespace: foo, annotations: {notes}}}\n"
        f"spec: {{action: {action}, rules: [{{}}]}}\n---\n"
    )


@pytest.mark.parametrize(
    ("action", "dry_run", "prefix"),
    [
        ("ALLOW", True, "istio_dry_run_allow_"),
        ("DENY", True, "istio_dry_run_deny_"),
        # no shadow rules: Istio reads their action as ALLOW (deny-and-allow-out1.yaml)
        ("ALLOW", False, "istio_dry_run_allow_"),
        ("DENY", False, "istio_dry_run_allow_"),
        ("AUDIT", False, "istio_dry_run_allow_"),
        ("AUDIT", True, None),  # LOG shadow rules: no prefix
    ],
)
def test_shadow_rules_stat_prefix(action: str, dry_run: bool, prefix: str | None) -> None:
    http, tcp = _inbound_rbac(_policy("p", action, dry_run))
    for config in (*http, *tcp):
        assert config.get("shadow_rules_stat_prefix") == prefix, config


def test_bad_custom_deny_filter_has_no_shadow_prefix() -> None:
    http, tcp = _inbound_rbac(
        _policy("c", "CUSTOM").replace("action: CUSTOM", "action: CUSTOM, provider: {name: x}")
    )
    for config in (*http, *tcp):
        assert "shadow_rules_stat_prefix" not in config, config


def _metadata_rules(when: str) -> list[dict[str, Any]]:
    policy = rule_policy(rule(f"when: [{when}]"), "foo", tcp=False, allow=True)
    assert policy is not None
    rules: list[dict[str, Any]] = as_dict(policy)["permissions"][0]["and_rules"]["rules"]
    return rules


def test_envoy_metadata_values_share_one_matcher() -> None:
    """Istio's extended-allow-full-rule-out.yaml: one metadata permission, an or_match of
    the values; notValues as not_rule of one metadata permission."""
    rules = _metadata_rules(
        "{key: 'experimental.envoy.filters.a.b[c]', values: [exact, 'prefix-*', '[v]'],"
        " notValues: [not-exact]}"
    )
    path = [{"key": "c"}]
    assert rules == [
        {
            "metadata": {
                "filter": "envoy.filters.a.b",
                "path": path,
                "value": {
                    "or_match": {
                        "value_matchers": [
                            {"string_match": {"exact": "exact"}},
                            {"string_match": {"prefix": "prefix-"}},
                            {"list_match": {"one_of": {"string_match": {"exact": "v"}}}},
                        ]
                    }
                },
            }
        },
        {
            "not_rule": {
                "metadata": {
                    "filter": "envoy.filters.a.b",
                    "path": path,
                    "value": {"string_match": {"exact": "not-exact"}},
                }
            }
        },
    ]
