"""Short human lines for a changed RouteConfiguration: virtual hosts and route entries
added or removed, weight shifts ("reviews.default.svc.cluster.local:9080 weights v1 80→50,
v3 20→50"), a new destination, and which other route fields changed."""

from __future__ import annotations

from typing import Any

__all__ = ["describe_route_config"]

Route = dict[str, Any]


def describe_route_config(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    before = {str(v.get("name", "")): v for v in old.get("virtual_hosts", [])}
    after = {str(v.get("name", "")): v for v in new.get("virtual_hosts", [])}
    lines = [f"virtual host {n} added" for n in sorted(after.keys() - before.keys())]
    lines += [f"virtual host {n} removed" for n in sorted(before.keys() - after.keys())]
    for name in sorted(before.keys() & after.keys()):
        if before[name] != after[name]:
            lines += _virtual_host(name, before[name], after[name])
    return lines


def _label(route: Route, index: int) -> str:
    return str(route.get("name") or f"#{index}")


def _paired(routes: list[Route]) -> dict[str, Route]:
    """Routes by name when every route is named uniquely, else by position."""
    names = [r.get("name") for r in routes]
    if all(names) and len(set(names)) == len(names):
        return {str(r["name"]): r for r in routes}
    return {f"#{i}": r for i, r in enumerate(routes)}


def _virtual_host(vhost: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    before, after = _paired(old.get("routes", [])), _paired(new.get("routes", []))
    lines = []
    for label in after.keys() - before.keys():
        lines.append(f"{vhost} route {label} added → {_targets(after[label])}")
    for label in before.keys() - after.keys():
        lines.append(f"{vhost} route {label} removed")
    for label in sorted(before.keys() & after.keys()):
        if before[label] != after[label]:
            lines += _route(vhost, label, before[label], after[label])
    keys = sorted(k for k in old.keys() | new.keys() if k != "routes" and old.get(k) != new.get(k))
    if keys:
        lines.append(f"{vhost} {', '.join(keys)} changed")
    return sorted(lines)


def _weights(route: Route) -> dict[str, int]:
    action = route.get("route") or {}
    if "weighted_clusters" in action:
        return {
            str(c.get("name", "")): int(c.get("weight", 0))
            for c in action["weighted_clusters"].get("clusters", [])
        }
    if "cluster" in action:
        return {str(action["cluster"]): 100}
    return {}


def _targets(route: Route) -> str:
    weights = _weights(route)
    if weights:
        return ", ".join(f"{c} {w}" for c, w in weights.items())
    kind = next((k for k in ("redirect", "direct_response") if k in route), "other action")
    return kind


def _short(clusters: list[str]) -> dict[str, str]:
    """`outbound|9080|v1|reviews...` → `v1` when every cluster is one host and port."""
    parts = [c.split("|") for c in clusters]
    if parts and all(len(p) == 4 for p in parts) and len({(p[1], p[3]) for p in parts}) == 1:
        return {c: (p[2] or "(no subset)") for c, p in zip(clusters, parts, strict=True)}
    return {c: c for c in clusters}


def _route(vhost: str, label: str, old: Route, new: Route) -> list[str]:
    lines = []
    w_old, w_new = _weights(old), _weights(new)
    if w_old != w_new:
        names = _short(sorted(w_old.keys() | w_new.keys()))
        shifts = [
            f"{names[c]} {w_old.get(c, 0)}→{w_new.get(c, 0)}"
            for c in sorted(names, key=lambda c: names[c])
            if w_old.get(c, 0) != w_new.get(c, 0)
        ]
        lines.append(f"{vhost} weights {', '.join(shifts)} (route {label})")
    action_old, action_new = old.get("route") or {}, new.get("route") or {}
    fields = sorted(
        k
        for k in action_old.keys() | action_new.keys()
        if k not in ("cluster", "weighted_clusters") and action_old.get(k) != action_new.get(k)
    )
    fields += sorted(
        k
        for k in old.keys() | new.keys()
        if k not in ("route", "name") and old.get(k) != new.get(k)
    )
    if fields:
        lines.append(f"{vhost} route {label}: {', '.join(_field(f, old, new) for f in fields)}")
    return lines


def _field(name: str, old: Route, new: Route) -> str:
    a = (old.get("route") or {}).get(name, old.get(name))
    b = (new.get("route") or {}).get(name, new.get(name))
    if isinstance(a, str | int | float) and isinstance(b, str | int | float):
        return f"{name} {a}→{b}"
    return f"{name} changed"
