"""Trust domain migration: local identities in policies match the trust domain and every
alias (Istio's MigrateTrustDomain); other principals are kept as written."""

from __future__ import annotations

import pytest

from meshpilot.xds.generate.security.rules import rule_policy
from meshpilot.xds.generate.security.trust_domain import with_trust_domain_aliases
from tests.unit.authz.helpers import as_dict, rule

TDS = ("td-new", "td-old")

TABLE = [
    ("cluster.local/ns/a/sa/b", ("td-new/ns/a/sa/b", "td-old/ns/a/sa/b")),
    ("td-old/ns/a/sa/b", ("td-new/ns/a/sa/b", "td-old/ns/a/sa/b")),
    ("td-new/ns/a/sa/b", ("td-new/ns/a/sa/b", "td-old/ns/a/sa/b")),
    ("other.org/ns/a/sa/b", ("other.org/ns/a/sa/b",)),  # a foreign trust domain
    ("*/ns/a/sa/b", ("*/ns/a/sa/b",)),  # does not name a trust domain
    ("cluster.local/ns/a/*", ("cluster.local/ns/a/*",)),  # not <td>/ns/<ns>/sa/<sa>
    ("*", ("*",)),
]


@pytest.mark.parametrize(("principal", "expanded"), TABLE)
def test_expansion(principal: str, expanded: tuple[str, ...]) -> None:
    assert with_trust_domain_aliases([principal], TDS) == expanded


def test_default_trust_domain_changes_nothing() -> None:
    assert with_trust_domain_aliases(["a/ns/b/sa/c"], ("cluster.local",)) == ("a/ns/b/sa/c",)


def test_policy_principals_and_conditions_are_expanded() -> None:
    text = (
        "from: [{source: {principals: [cluster.local/ns/a/sa/b]}}]\n"
        "when: [{key: source.principal, notValues: [cluster.local/ns/x/sa/y]}]"
    )
    policy = rule_policy(rule(text), "foo", tcp=False, allow=True, trust_domains=TDS)
    assert policy is not None
    names = [
        m["authenticated"]["principal_name"]["exact"]
        for m in as_dict(policy)["principals"][0]["and_ids"]["ids"][0]["or_ids"]["ids"]
    ]
    assert names == ["spiffe://td-new/ns/a/sa/b", "spiffe://td-old/ns/a/sa/b"]
    assert "spiffe://td-old/ns/x/sa/y" in str(as_dict(policy))
