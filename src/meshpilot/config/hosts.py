"""Istio host names: short-name resolution and wildcard matching."""

from __future__ import annotations

__all__ = ["host_matches", "host_specificity", "hosts_intersect", "resolve_host"]


def resolve_host(host: str, namespace: str, domain_suffix: str = "cluster.local") -> str:
    """`reviews` in namespace `default` -> `reviews.default.svc.cluster.local` (Istio's rule:
    only names without a dot are short names)."""
    if host == "*" or "." in host:
        return host
    return f"{host}.{namespace}.svc.{domain_suffix}"


def host_matches(pattern: str, host: str) -> bool:
    """Does `pattern` (exact, `*`, or `*.suffix`) cover `host`? A wildcard host is covered only
    by an equal or wider wildcard."""
    if pattern == "*" or pattern == host:
        return True
    if pattern.startswith("*"):
        suffix = pattern[1:]
        if host.startswith("*"):
            return host[1:].endswith(suffix)
        return host.endswith(suffix)
    return False


def hosts_intersect(a: str, b: str) -> bool:
    return host_matches(a, b) or host_matches(b, a)


def host_specificity(pattern: str) -> tuple[int, int]:
    """Sort key: exact names before wildcards, longer wildcards before shorter ones."""
    return (1 if pattern.startswith("*") else 0, -len(pattern))
