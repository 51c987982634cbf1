"""How istioctl writes routes in its tables: a route's match (`/api*`, `/exact`,
`regex ^/a`), a virtual host's domains (shortest spellings, `+ N more...`), and a listener's
inline route configuration (`Inline Route: ...`, or just the cluster of a catch-all)."""

from __future__ import annotations

from meshpilot.proxyinfo.fields import JsonObject, obj, objs, strings, text

__all__ = ["describe_domains", "describe_inline_routes", "describe_match", "route_cluster"]

_MAX_DOMAINS = 2
_FULL_SUFFIX = ".svc.cluster.local"
_PARTIAL_SUFFIX = ".svc"


def describe_match(match: JsonObject) -> str:
    conditions = []
    if prefix := text(match, "prefix"):
        conditions.append(f"{prefix}*")
    if separated := text(match, "path_separated_prefix"):
        conditions.append(f"PathPrefix:{separated}")
    if path := text(match, "path"):
        conditions.append(path)
    if "safe_regex" in match:
        conditions.append(f"regex {text(match, 'safe_regex', 'regex')}")
    return " ".join(conditions)  # headers are not shown


def describe_domains(domains: list[str]) -> str:
    """One domain as is; several: those without a port, short forms only (`reviews` rather
    than `reviews.default.svc.cluster.local` when both are there), at most two."""
    if len(domains) <= 1:
        return domains[0] if domains else ""
    without_port = [d for d in domains if ":" not in d or (d.count(":") > 2 and d.endswith("]"))]
    shown = _unexpand(without_port)
    if len(shown) > _MAX_DOMAINS:
        rest = len(shown) - _MAX_DOMAINS
        return f"{', '.join(shown[:_MAX_DOMAINS])} + {rest} more..."
    return ", ".join(shown)


def _unexpand(domains: list[str]) -> list[str]:
    present = set(domains)
    longer = set()
    for host in domains:
        for suffix in (_FULL_SUFFIX, _PARTIAL_SUFFIX):
            short = host.removesuffix(suffix)
            if short != host and short in present:
                longer.add(host)
    return [h for h in domains if h not in longer]


def route_cluster(route: JsonObject) -> str:
    """The single cluster a route forwards to, or ""."""
    return text(route, "route", "cluster")


def describe_inline_routes(config: JsonObject) -> str:
    """A listener's inline RouteConfiguration: the cluster when it is one catch-all route,
    else `Inline Route: <domains> <matches>; ...`."""
    if cluster := _match_all_cluster(config):
        return cluster
    described = []
    for vhost in objs(config, "virtual_hosts"):
        domains = strings(vhost, "domains")
        matches = ", ".join(describe_match(obj(r, "match")) for r in objs(vhost, "routes"))
        described.append(matches if domains == ["*"] else f"{'/'.join(domains)} {matches}")
    return f"Inline Route: {'; '.join(described)}"


def _match_all_cluster(config: JsonObject) -> str:
    vhosts = objs(config, "virtual_hosts")
    if len(vhosts) != 1 or strings(vhosts[0], "domains") != ["*"]:
        return ""
    routes = objs(vhosts[0], "routes")
    if len(routes) != 1 or text(routes[0], "match", "prefix") != "/":
        return ""
    cluster = route_cluster(routes[0])
    if not cluster:
        return ""
    return cluster if "Cluster" in cluster else f"Cluster: {cluster}"
