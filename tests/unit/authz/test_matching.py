"""Istio's translation tables, as data: a policy value → the Envoy RBAC matcher it becomes.

Each row is (field or when-key, Istio value, the principal/permission Envoy gets), in the
snake_case form of Envoy's config_dump. The rows follow Istio's authz generator.
"""

from __future__ import annotations

from typing import Any

import pytest

from meshpilot.xds.generate.security.rules import rule_policy
from tests.unit.authz.helpers import as_dict, rule

JWT = "envoy.filters.http.jwt_authn"


def _claim(claim: str, match: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "filter": JWT,
            "path": [{"key": "payload"}, {"key": claim}],
            "value": {"string_match": match},
        }
    }


def _principal(field: str, value: str) -> dict[str, Any]:
    policy = rule_policy(
        rule(f"from: [{{source: {{{field}: ['{value}']}}}}]"), "foo", tcp=False, allow=True
    )
    assert policy is not None
    ids = as_dict(policy)["principals"][0]["and_ids"]["ids"]
    assert len(ids) == 1
    found: dict[str, Any] = ids[0]
    return found["or_ids"]["ids"][0] if "or_ids" in found else found


def _permission(field: str, value: str) -> dict[str, Any]:
    policy = rule_policy(
        rule(f"to: [{{operation: {{{field}: ['{value}']}}}}]"), "foo", tcp=False, allow=True
    )
    assert policy is not None
    rules = as_dict(policy)["permissions"][0]["and_rules"]["rules"]
    first: dict[str, Any] = rules[0]["or_rules"]["rules"][0]
    return first


PRINCIPALS = [
    ("principals", "cluster.local/ns/a/sa/b", {"exact": "spiffe://cluster.local/ns/a/sa/b"}),
    ("principals", "cluster.local/ns/a/*", {"prefix": "spiffe://cluster.local/ns/a/"}),
    ("principals", "*/sa/b", {"safe_regex": {"regex": "spiffe://.*/sa/b"}}),
    ("principals", "*.local/sa/b", {"safe_regex": {"regex": "spiffe://.*\\.local/sa/b"}}),
    ("principals", "*", {"safe_regex": {"regex": ".+"}}),
    ("namespaces", "bar", {"safe_regex": {"regex": ".*/ns/bar/.*"}}),
    ("namespaces", "team-*", {"safe_regex": {"regex": ".*/ns/team-.*/.*"}}),
    ("namespaces", "*", {"safe_regex": {"regex": ".*/ns/.*/.*"}}),
    (
        "serviceAccounts",
        "ops/deployer",
        {"safe_regex": {"regex": "spiffe://.+/ns/ops/(.+/|)sa/deployer(/.+)?"}},
    ),
    (
        "serviceAccounts",
        "sleep",
        {"safe_regex": {"regex": "spiffe://.+/ns/foo/(.+/|)sa/sleep(/.+)?"}},
    ),
]


@pytest.mark.parametrize(("field", "value", "matcher"), PRINCIPALS)
def test_peer_identity_matches_the_uri_san(field: str, value: str, matcher: dict[str, Any]) -> None:
    assert _principal(field, value) == {"authenticated": {"principal_name": matcher}}


ADDRESSES = [
    (
        "ipBlocks",
        "10.1.2.3",
        {"direct_remote_ip": {"address_prefix": "10.1.2.3", "prefix_len": 32}},
    ),
    (
        "ipBlocks",
        "10.1.0.0/16",
        {"direct_remote_ip": {"address_prefix": "10.1.0.0", "prefix_len": 16}},
    ),
    (
        "ipBlocks",
        "2001:db8::/32",
        {"direct_remote_ip": {"address_prefix": "2001:db8::", "prefix_len": 32}},
    ),
    (
        "remoteIpBlocks",
        "203.0.113.7",
        {"remote_ip": {"address_prefix": "203.0.113.7", "prefix_len": 32}},
    ),
]


@pytest.mark.parametrize(("field", "value", "expected"), ADDRESSES)
def test_ip_blocks(field: str, value: str, expected: dict[str, Any]) -> None:
    assert _principal(field, value) == expected


REQUEST_PRINCIPALS = [
    ("iss/sub", {"exact": "iss"}, {"exact": "sub"}),
    (
        "https://issuer.example.com/alice",
        {"exact": "https://issuer.example.com"},
        {"exact": "alice"},
    ),
    ("*", {"safe_regex": {"regex": ".+"}}, {"safe_regex": {"regex": ".+"}}),
    ("iss/*", {"exact": "iss"}, {"safe_regex": {"regex": ".+"}}),
    ("iss/pre*", {"exact": "iss"}, {"prefix": "pre"}),
    ("*/sub", {"safe_regex": {"regex": ".+"}}, {"exact": "sub"}),
    ("*.example.com/sub", {"suffix": ".example.com"}, {"exact": "sub"}),
    ("no-slash", {"exact": "no-slash"}, {"exact": ""}),
]


@pytest.mark.parametrize(("value", "iss", "sub"), REQUEST_PRINCIPALS)
def test_request_principal_is_issuer_and_subject(
    value: str, iss: dict[str, Any], sub: dict[str, Any]
) -> None:
    assert _principal("requestPrincipals", value) == {
        "and_ids": {"ids": [_claim("iss", iss), _claim("sub", sub)]}
    }


OPERATIONS = [
    ("methods", "GET", {"header": {"name": ":method", "string_match": {"exact": "GET"}}}),
    ("methods", "*", {"header": {"name": ":method", "present_match": True}}),
    (
        "hosts",
        "*.example.com",
        {
            "header": {
                "name": ":authority",
                "string_match": {"suffix": ".example.com", "ignore_case": True},
            }
        },
    ),
    (
        "hosts",
        "api.*",
        {"header": {"name": ":authority", "string_match": {"prefix": "api.", "ignore_case": True}}},
    ),
    ("paths", "/exact", {"url_path": {"path": {"exact": "/exact"}}}),
    ("paths", "/admin*", {"url_path": {"path": {"prefix": "/admin"}}}),
    ("paths", "*/secret", {"url_path": {"path": {"suffix": "/secret"}}}),
    ("paths", "*", {"url_path": {"path": {"safe_regex": {"regex": ".+"}}}}),
    ("ports", "8080", {"destination_port": 8080}),
]


@pytest.mark.parametrize(("field", "value", "expected"), OPERATIONS)
def test_operations(field: str, value: str, expected: dict[str, Any]) -> None:
    assert _permission(field, value) == expected


def test_path_template_uses_envoy_uri_template() -> None:
    found = _permission("paths", "/api/{*}/keys/{**}")
    assert found["uri_template"]["name"] == "uri-template"
    assert found["uri_template"]["typed_config"]["path_template"] == "/api/*/keys/**"


def test_claims_match_a_string_or_a_list_element() -> None:
    policy = rule_policy(
        rule("when: [{key: 'request.auth.claims[realm][roles]', values: [admin, 'ops-*']}]"),
        "foo",
        tcp=False,
        allow=True,
    )
    assert policy is not None
    metadata = as_dict(policy)["principals"][0]["and_ids"]["ids"][0]["metadata"]
    any_of = {
        "or_match": {
            "value_matchers": [
                {"string_match": {"exact": "admin"}},
                {"string_match": {"prefix": "ops-"}},
            ]
        }
    }
    assert metadata == {
        "filter": JWT,
        "path": [{"key": "payload"}, {"key": "realm"}, {"key": "roles"}],
        "value": {"or_match": {"value_matchers": [{"list_match": {"one_of": any_of}}, any_of]}},
    }


def test_not_values_become_not_of_or() -> None:
    policy = rule_policy(
        rule("to: [{operation: {notMethods: [DELETE, PATCH]}}]"), "foo", tcp=False, allow=True
    )
    assert policy is not None
    rules = as_dict(policy)["permissions"][0]["and_rules"]["rules"]
    assert rules == [
        {
            "not_rule": {
                "or_rules": {
                    "rules": [
                        {"header": {"name": ":method", "string_match": {"exact": "DELETE"}}},
                        {"header": {"name": ":method", "string_match": {"exact": "PATCH"}}},
                    ]
                }
            }
        }
    ]


def test_empty_rule_matches_everything() -> None:
    policy = rule_policy(rule("{}"), "foo", tcp=False, allow=True)
    assert policy is not None
    assert as_dict(policy) == {
        "permissions": [{"and_rules": {"rules": [{"any": True}]}}],
        "principals": [{"and_ids": {"ids": [{"any": True}]}}],
    }


def test_one_permission_per_to_and_one_principal_per_from() -> None:
    policy = rule_policy(
        rule(
            "from: [{source: {namespaces: [a]}}, {source: {namespaces: [b]}}]\n"
            "to: [{operation: {ports: ['1']}}, {operation: {ports: ['2']}},"
            " {operation: {ports: ['3']}}]"
        ),
        "foo",
        tcp=False,
        allow=True,
    )
    assert policy is not None
    assert (len(policy.principals), len(policy.permissions)) == (2, 3)


HTTP_ONLY_RULES = [
    "to: [{operation: {methods: [GET]}}]",
    "to: [{operation: {hosts: [a.com]}}]",
    "to: [{operation: {paths: [/x]}}]",
    "from: [{source: {requestPrincipals: ['*']}}]",
    "when: [{key: 'request.headers[x]', values: [y]}]",
    "when: [{key: 'request.auth.claims[groups]', values: [y]}]",
]


@pytest.mark.parametrize("text", HTTP_ONLY_RULES)
def test_tcp_allow_drops_a_rule_with_http_only_fields(text: str) -> None:
    assert rule_policy(rule(text), "foo", tcp=True, allow=True) is None
    assert rule_policy(rule(text), "foo", tcp=False, allow=True) is not None


@pytest.mark.parametrize("text", HTTP_ONLY_RULES)
def test_tcp_deny_ignores_http_only_fields_and_widens(text: str) -> None:
    policy = rule_policy(rule(text), "foo", tcp=True, allow=False)
    assert policy is not None
    assert as_dict(policy) == {
        "permissions": [{"and_rules": {"rules": [{"any": True}]}}],
        "principals": [{"and_ids": {"ids": [{"any": True}]}}],
    }


def test_tcp_keeps_fields_it_can_evaluate() -> None:
    text = (
        "from: [{source: {namespaces: [bar]}}]\n"
        "to: [{operation: {ports: ['9000'], methods: [GET]}}]"
    )
    policy = rule_policy(rule(text), "foo", tcp=True, allow=False)
    assert policy is not None
    found = as_dict(policy)
    assert found["permissions"][0]["and_rules"]["rules"] == [
        {"or_rules": {"rules": [{"destination_port": 9000}]}}
    ]
    assert "authenticated" in str(found["principals"])
