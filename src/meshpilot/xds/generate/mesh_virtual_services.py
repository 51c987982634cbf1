"""The VirtualServices bound to the mesh gateway that a namespace sees, once per push.

Sidecar listeners and sidecar routes both start from this list; the index filters and
sorts every VirtualService on each call, so the generators share one answer per namespace.
"""

from __future__ import annotations

from collections.abc import Sequence

from meshpilot.model.indexes.virtual_services import MESH_GATEWAY, BoundVirtualService
from meshpilot.model.push_context import PushContext

__all__ = ["mesh_virtual_services"]

_MEMO = "generate.mesh_virtual_services"


def mesh_virtual_services(push: PushContext, namespace: str) -> Sequence[BoundVirtualService]:
    """`push.virtual_services.for_gateway(MESH_GATEWAY, namespace)`, memoised (read only)."""
    memo = push.memo.get(_MEMO)
    if memo is None:
        memo = push.memo[_MEMO] = {}
    assert isinstance(memo, dict)
    found = memo.get(namespace)
    if found is None:
        found = memo[namespace] = tuple(push.virtual_services.for_gateway(MESH_GATEWAY, namespace))
    assert isinstance(found, tuple)
    return found
