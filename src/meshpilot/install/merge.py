"""istioctl's overlay of one IstioOperator spec tree on another.

Mappings merge key by key, a later scalar or list replaces an earlier one (JSON merge patch,
as istioctl's OverlayYAML), except the gateway lists `components.ingressGateways` and
`components.egressGateways`, whose entries merge by `name` (a user's gateway with the name of
a profile's gateway changes that gateway; a new name adds one). A null deletes the key.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["GATEWAY_LISTS", "merge_spec", "merge_tree"]

GATEWAY_LISTS = ("ingressGateways", "egressGateways")


def _merge_gateways(base: list[Any], overlay: list[Any]) -> list[Any]:
    out = [copy.deepcopy(g) for g in base]
    index = {g.get("name"): i for i, g in enumerate(out) if isinstance(g, dict)}
    for gateway in overlay:
        name = gateway.get("name") if isinstance(gateway, dict) else None
        if name is not None and name in index:
            out[index[name]] = merge_tree(out[index[name]], gateway)
        else:
            out.append(copy.deepcopy(gateway))
    return out


def merge_tree(base: Any, overlay: Any, path: tuple[str, ...] = ()) -> Any:
    """`overlay` laid over `base` (neither is changed)."""
    if not (isinstance(base, dict) and isinstance(overlay, dict)):
        if (
            path[-2:-1] == ("components",)
            and path[-1] in GATEWAY_LISTS
            and isinstance(base, list)
            and isinstance(overlay, list)
        ):
            return _merge_gateways(base, overlay)
        return copy.deepcopy(overlay)
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if value is None:
            out.pop(key, None)
        elif key in out:
            out[key] = merge_tree(out[key], value, (*path, str(key)))
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge_spec(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """A spec tree (the `spec` of an IstioOperator) merged over another."""
    merged = merge_tree(base, overlay)
    assert isinstance(merged, dict)
    return merged
