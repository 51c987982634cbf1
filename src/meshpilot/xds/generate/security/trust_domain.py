"""Trust domain migration of source principals (Istio's trustdomain.Bundle).

A principal `<td>/ns/<ns>/sa/<sa>` written for the mesh's trust domain, one of its aliases,
or `cluster.local` (which always means "the local trust domain") is expanded to the same
identity in the trust domain and in every alias, so that workloads keep their access while
certificates move from an old trust domain to a new one. Principals starting with `*`, and
those not of that five-part form, are kept as written.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEFAULT_TRUST_DOMAIN", "with_trust_domain_aliases"]

DEFAULT_TRUST_DOMAIN = "cluster.local"


def _suffix_match(pattern: str, value: str) -> bool:
    return pattern.startswith("*") and value.endswith(pattern[1:])


def _expand(principal: str, trust_domains: Sequence[str]) -> list[str]:
    parts = principal.split("/")
    if principal.startswith("*") or len(parts) != 5:
        return [principal]
    own = parts[0]
    if own not in trust_domains and own != DEFAULT_TRUST_DOMAIN:
        return [principal]
    out: list[str] = []
    for td in trust_domains:
        new = principal if _suffix_match(own, td) else "/".join([td, *parts[1:]])
        if new not in out:
            out.append(new)
    return out


def with_trust_domain_aliases(
    principals: Sequence[str], trust_domains: Sequence[str]
) -> tuple[str, ...]:
    """`principals` with each local identity expanded over `trust_domains` (the mesh trust
    domain first, then its aliases)."""
    if tuple(trust_domains) == (DEFAULT_TRUST_DOMAIN,):
        return tuple(principals)
    return tuple(p for principal in principals for p in _expand(principal, trust_domains))
