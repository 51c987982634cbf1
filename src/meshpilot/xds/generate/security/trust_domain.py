"""Trust domain migration of source principals (Istio's trustdomain.Bundle).

A principal `<td>/ns/<ns>/sa/<sa>` whose trust domain is `cluster.local` (which always means
"the local trust domain") or matches the mesh's trust domain or one of its aliases is
expanded to the same identity in the trust domain and in every alias, so that workloads keep
their access while certificates move from an old trust domain to a new one.

Matching is Istio's: either side may carry a `*` prefix or suffix (`*-old` matches alias
`td-old`, `td-*` matches both `td-new` and `td-old`). A wildcard trust domain is kept as
written for each alias it matches by suffix and becomes that alias's exact principal for the
others; `*/ns/...` and principals not of that five-part form are kept as written.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEFAULT_TRUST_DOMAIN", "expand_trust_domains", "with_trust_domain_aliases"]

DEFAULT_TRUST_DOMAIN = "cluster.local"


def _prefix_match(value: str, pattern: str) -> bool:
    return pattern.endswith("*") and value.startswith(pattern[:-1])


def _suffix_match(value: str, pattern: str) -> bool:
    return pattern.startswith("*") and value.endswith(pattern[1:])


def _matches_any(td: str, trust_domains: Sequence[str]) -> bool:
    """Istio's trustdomain.stringMatch: the pattern may be on either side."""
    return any(
        td == s
        or s == "*"
        or _prefix_match(td, s)
        or _prefix_match(s, td)
        or _suffix_match(td, s)
        or _suffix_match(s, td)
        for s in trust_domains
    )


def _expand(principal: str, trust_domains: Sequence[str]) -> list[str]:
    parts = principal.split("/")
    if len(parts) != 5 or parts[0] == "*":  # the trust domain is not enforced
        return [principal]
    own = parts[0]
    if own != DEFAULT_TRUST_DOMAIN and not _matches_any(own, trust_domains):
        return [principal]
    out: list[str] = []
    for td in trust_domains:
        new = principal if _suffix_match(td, own) else "/".join([td, *parts[1:]])
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


def expand_trust_domains(values: Sequence[str], trust_domains: Sequence[str]) -> tuple[str, ...]:
    """`trustDomains` values: one naming a known trust domain stands for all of them
    (Istio's ExpandTrustDomainAliases), duplicates dropped."""
    out: list[str] = []
    for value in values:
        for td in trust_domains if value in trust_domains else (value,):
            if td not in out:
                out.append(td)
    return tuple(out)
