"""Diff two translations of one proxy class, per xDS type and resource name, with short
details: route summaries (routes.py), endpoint addresses, and which fields of a listener or
cluster changed. Secrets are named only: their content never appears in a preview."""

from __future__ import annotations

from typing import Any

from meshpilot.gitops.preview.model import Change, XdsChange
from meshpilot.gitops.preview.proxies import Translation
from meshpilot.gitops.preview.routes import describe_route_config

__all__ = ["SECTIONS", "diff_translations"]

SECTIONS = ("listeners", "routes", "clusters", "endpoints", "secrets", "extension_configs")


def diff_translations(base: Translation | None, head: Translation | None) -> tuple[XdsChange, ...]:
    """Every resource that differs; a side that is None (a proxy that appears or goes
    away) has no resources."""
    out: list[XdsChange] = []
    for section in SECTIONS:
        before = (base or {}).get(section, {})
        after = (head or {}).get(section, {})
        for name in sorted(before.keys() | after.keys()):
            old, new = before.get(name), after.get(name)
            if old == new:
                continue
            if old is None:
                out.append(XdsChange(section, name, Change.ADDED))
            elif new is None:
                out.append(XdsChange(section, name, Change.REMOVED))
            else:
                out.append(XdsChange(section, name, Change.CHANGED, _details(section, old, new)))
    return tuple(out)


def _details(section: str, old: dict[str, Any], new: dict[str, Any]) -> tuple[str, ...]:
    if section == "routes":
        return tuple(describe_route_config(old, new))
    if section == "endpoints":
        return _endpoints(old, new)
    if section == "secrets":
        return ()
    fields = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    return (f"fields changed: {', '.join(fields)}",)


def _addresses(assignment: dict[str, Any]) -> set[str]:
    out = set()
    for locality in assignment.get("endpoints", []):
        for lb in locality.get("lb_endpoints", []):
            socket = ((lb.get("endpoint") or {}).get("address") or {}).get("socket_address") or {}
            if socket:
                out.add(f"{socket.get('address', '')}:{socket.get('port_value', '')}")
    return out


def _endpoints(old: dict[str, Any], new: dict[str, Any]) -> tuple[str, ...]:
    before, after = _addresses(old), _addresses(new)
    lines = [f"+ {a}" for a in sorted(after - before)]
    lines += [f"- {a}" for a in sorted(before - after)]
    return tuple(lines) or ("endpoint metadata changed",)
