"""Validation of AuthorizationPolicy and RequestAuthentication: each bad field is reported
with file, line, object and field, and an invalid object is not loaded."""

from __future__ import annotations

import pytest

from meshpilot.config.diagnostics import Severity
from meshpilot.config.kinds import Kind
from tests.unit.authz.helpers import load

HEAD = """apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: p, namespace: foo}
spec:
"""

AUTHZ_ERRORS = [
    ("  action: PERMIT\n", 5, "spec.action", "invalid value"),
    ("  action: CUSTOM\n  rules: [{}]\n", 4, "spec.provider.name", "must not be empty"),
    ("  action: CUSTOM\n", 4, "spec.rules", "CUSTOM action without `rules`"),
    ("  provider: {name: opa}\n  rules: [{}]\n", 5, "spec.provider", "non-CUSTOM"),
    ("  rules:\n  - from: []\n", 6, "spec.rules[0].from", "must not be empty"),
    ("  rules:\n  - to: [{}]\n", 6, "spec.rules[0].to[0].operation", "must not be null"),
    (
        "  rules:\n  - from:\n    - source: {}\n",
        7,
        "spec.rules[0].from[0].source",
        "must not be empty",
    ),
    (
        "  rules:\n  - from:\n    - source:\n        ipBlocks: [10.0.0.300]\n",
        8,
        "spec.rules[0].from[0].source.ipBlocks[0]",
        "not a valid IP",
    ),
    (
        "  rules:\n  - to:\n    - operation:\n        ports: ['80', http]\n",
        8,
        "spec.rules[0].to[0].operation.ports[1]",
        "invalid port",
    ),
    (
        "  rules:\n  - to:\n    - operation:\n        methods: ['']\n",
        8,
        "spec.rules[0].to[0].operation.methods[0]",
        "empty value",
    ),
    (
        "  rules:\n  - when:\n    - key: source.user\n      values: [a]\n",
        7,
        "spec.rules[0].when[0].key",
        "unknown attribute",
    ),
    (
        "  rules:\n  - when:\n    - key: request.headers[x]\n",
        7,
        "spec.rules[0].when[0]",
        "at least one of `values` or `notValues`",
    ),
    (
        "  rules:\n  - when:\n    - key: destination.port\n      values: ['99999']\n",
        8,
        "spec.rules[0].when[0].values[0]",
        "invalid port",
    ),
    (
        "  selector: {matchLabels: {app: a}}\n  targetRefs: [{kind: Gateway, name: g}]\n",
        5,
        "spec.selector",
        "only one of targetRefs or selector",
    ),
    (
        "  rules:\n  - from:\n    - source:\n"
        "        serviceAccounts: [a]\n        namespaces: [b]\n",
        8,
        "spec.rules[0].from[0].source.serviceAccounts",
        "serviceAccounts together with namespaces",
    ),
]


@pytest.mark.parametrize(("body", "line", "field", "text"), AUTHZ_ERRORS)
def test_authorization_policy_errors(body: str, line: int, field: str, text: str) -> None:
    loaded = load(HEAD + body, "authz.yaml")
    errors = [d for d in loaded.errors if d.field == field]
    assert errors, [str(d) for d in loaded.diagnostics]
    found = errors[0]
    assert (found.file, found.line, found.kind, found.name) == (
        "authz.yaml",
        line,
        "AuthorizationPolicy",
        "p",
    )
    assert text in found.message
    assert not [o for o in loaded.objects if o.key.kind is Kind.AUTHORIZATION_POLICY]


def test_custom_with_a_provider_loads_clean() -> None:
    """The provider is looked up in meshConfig.extensionProviders when the filters are built
    (and by `meshpilot analyze`), not by the policy's own validation."""
    loaded = load(HEAD + "  action: CUSTOM\n  provider: {name: opa}\n  rules: [{}]\n")
    assert not loaded.errors and not loaded.diagnostics
    assert len(loaded.objects) == 1


def test_deny_without_rules_warns() -> None:
    loaded = load(HEAD + "  action: DENY\n")
    assert not loaded.errors
    assert "never be triggered" in loaded.diagnostics[0].message


def test_valid_policy_with_every_field_loads_cleanly() -> None:
    body = """  selector: {matchLabels: {app: httpbin}}
  action: ALLOW
  rules:
  - from:
    - source:
        principals: [cluster.local/ns/a/sa/b]
        notRequestPrincipals: ['*']
        namespaces: [a]
        ipBlocks: [10.0.0.0/8]
        remoteIpBlocks: [1.2.3.4]
    to:
    - operation: {hosts: [a.com], methods: [GET], paths: ['/x*'], ports: [80], notPorts: ['81']}
    when:
    - {key: 'request.auth.claims[groups]', values: [g]}
    - {key: 'experimental.envoy.filters.a.b[c]', values: ['[v]']}
    - {key: remote.ip, notValues: [10.1.1.1]}
"""
    loaded = load(HEAD + body)
    assert not loaded.diagnostics, [str(d) for d in loaded.diagnostics]


RA_HEAD = """apiVersion: security.istio.io/v1beta1
kind: RequestAuthentication
metadata: {name: ra, namespace: foo}
spec:
  jwtRules:
"""

RA_ERRORS = [
    (
        "  - jwksUri: https://k.example.com/keys\n",
        6,
        "spec.jwtRules[0].issuer",
        "issuer must be set",
    ),
    (
        "  - issuer: i\n    jwksUri: ftp://k.example.com/keys\n",
        7,
        "spec.jwtRules[0].jwksUri",
        "scheme must be http or https",
    ),
    (
        "  - issuer: i\n    jwksUri: https:///keys\n",
        7,
        "spec.jwtRules[0].jwksUri",
        "a host is required",
    ),
    ("  - issuer: i\n    jwks: '{not json'\n", 7, "spec.jwtRules[0].jwks", "not valid JSON"),
    ("  - issuer: i\n    jwks: '{\"keys\": []}'\n", 7, "spec.jwtRules[0].jwks", 'non-empty "keys"'),
    (
        "  - issuer: i\n    jwks: '{\"keys\":[{}]}'\n    fromHeaders: [{prefix: 'Bearer '}]\n",
        8,
        "spec.jwtRules[0].fromHeaders[0].name",
        "header name must be non-empty",
    ),
    (
        "  - issuer: i\n    jwks: '{\"keys\":[{}]}'\n    fromParams: ['']\n",
        8,
        "spec.jwtRules[0].fromParams[0]",
        "must be non-empty",
    ),
    ("  - issuer: i\n    audiences: ['']\n", 7, "spec.jwtRules[0].audiences[0]", "non-empty"),
]


@pytest.mark.parametrize(("body", "line", "field", "text"), RA_ERRORS)
def test_request_authentication_errors(body: str, line: int, field: str, text: str) -> None:
    loaded = load(RA_HEAD + body, "ra.yaml")
    errors = [d for d in loaded.errors if d.field == field]
    assert errors, [str(d) for d in loaded.diagnostics]
    assert (errors[0].file, errors[0].line, errors[0].kind) == (
        "ra.yaml",
        line,
        "RequestAuthentication",
    )
    assert text in errors[0].message
    assert not loaded.objects


def test_unknown_field_is_named() -> None:
    loaded = load(RA_HEAD + "  - issuer: i\n    jwksUrl: https://k/keys\n", "ra.yaml")
    (error,) = loaded.errors
    assert error.field == "spec.jwtRules[0].jwksUrl"
    assert "unknown field" in error.message
    assert error.line == 7


def test_a_secret_looking_jwks_is_not_echoed_in_errors() -> None:
    """A broken inline key set is reported by position, never by content."""
    loaded = load(RA_HEAD + '  - issuer: i\n    jwks: \'{"keys": "PRIVATE-MATERIAL"\'\n')
    assert loaded.errors
    assert all("PRIVATE-MATERIAL" not in str(d) for d in loaded.diagnostics)


def test_dry_run_annotation_must_be_a_boolean() -> None:
    text = HEAD.replace(
        "metadata: {name: p, namespace: foo}",
        "metadata:\n  name: p\n  namespace: foo\n  annotations: {istio.io/dry-run: 'yes'}",
    )
    loaded = load(text + "  rules: [{}]\n")
    (warning,) = loaded.diagnostics
    assert (warning.line, warning.severity) == (6, Severity.WARNING)
    assert "not a boolean; the policy is enforced" in warning.message
