"""The serialized virtual hosts a sidecar route config was assembled from, for the VHDS
split (routes/vhds.py).

A route config is one parse of its virtual hosts' bytes (routes/assembly.py); the split
needs those bytes again. Serializing the 1 MB config and walking it for them cost ~3-5 ms
per config and class in discovery (B3: a VirtualService change rebuilds its ports' configs
for 10 classes), while the route generator has them at hand, and as the very objects its
class keeps across pushes (routes/lasting.py): so the split finds its kept virtual hosts by
bytes whose hash is already known. Kept for the push that built the config only.
"""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.route.v3 import route_pb2

from meshpilot.model.push_context import PushContext

__all__ = ["remember_virtual_hosts", "remembered_virtual_hosts"]

_PARTS = "rds.vhds-parts"


def remember_virtual_hosts(
    push: PushContext, config: route_pb2.RouteConfiguration, virtual_hosts: Sequence[bytes]
) -> None:
    """`config` holds exactly `virtual_hosts` (serialized, in order) and no other ones.
    Port route configs (`<port>`) only: the split leaves sniffed services' ones whole."""
    if not config.name.isdigit():
        return
    memo = push.memo.setdefault(_PARTS, {})
    assert isinstance(memo, dict)
    memo[id(config)] = (config, virtual_hosts)  # pins `config`: its id stays its own


def remembered_virtual_hosts(
    push: PushContext, config: route_pb2.RouteConfiguration
) -> Sequence[bytes] | None:
    """The serialized virtual hosts of `config` if this push built it, else None."""
    memo = push.memo.get(_PARTS)
    found = memo.get(id(config)) if isinstance(memo, dict) else None
    if found is None or found[0] is not config:
        return None
    virtual_hosts: Sequence[bytes] = found[1]
    return virtual_hosts
