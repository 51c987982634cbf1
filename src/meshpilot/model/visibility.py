"""exportTo: which namespaces see an object."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["visible_to"]


def visible_to(
    export_to: Iterable[str],
    owner_namespace: str,
    proxy_namespace: str,
    default: Iterable[str] = ("*",),
) -> bool:
    """Istio's exportTo: `*` all, `.` the owner's namespace, `~` none, or namespace names."""
    values = set(export_to) or set(default)
    if "~" in values:
        return False
    if "*" in values:
        return True
    if "." in values and owner_namespace == proxy_namespace:
        return True
    return proxy_namespace in values
