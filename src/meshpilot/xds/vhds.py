"""VHDS on the Delta stream (opt-in `--vhds`; the split itself: generate/routes/vhds.py).

What Envoy does, and what follows for the server:
- Envoy starts a VHDS subscription when it gets a route config with `vhds`, one per route
  config, all on the ADS stream's VirtualHost type. Its resources are matched to the route
  config by namespace (the name before the last `/`). Envoy 1.40 sends that subscription
  with no names: so a VHDS subscription without names stands for the route configs the
  proxy subscribed to by RDS, and named ones (route configs, `<config>/<host>` on demand)
  for theirs.
- The server may push VirtualHost resources unasked (Delta xDS). A route config newly
  answered by RDS is followed by its virtual hosts at once: Envoy's new VHDS subscription
  sends no request that would ask for them, and the route config waits for them.
- What was sent and is no longer generated is removed (`<config>/<host>` names, which are
  also the virtual hosts' names in Envoy's table: it removes them by that name).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from meshpilot.xds.connection import Connection, WatchedResource
from meshpilot.xds.protos import TypeUrl

__all__ = ["follows_route_answer", "vhds_scope"]


# The subscription a VHDS answer is diffed against: everything sent (its names and wildcard
# only are read there; the stream's nonce is its own watch's).
_EVERY_SENT = WatchedResource(TypeUrl.VIRTUAL_HOST, wildcard=True)


def vhds_scope(
    conn: Connection, watched: WatchedResource, only: Collection[str] | None
) -> tuple[Collection[str] | None, WatchedResource]:
    """The names whose route configs' virtual hosts to generate (None: every route config),
    and the subscription to diff the client's virtual hosts against: what was sent and is
    no longer generated is removed, as for a wildcard. Names subscribed (route configs, or
    virtual hosts a reconnecting Envoy says it has) add to those subscribed by RDS."""
    wanted: Collection[str] | None = only
    if wanted is None and not watched.wildcard:
        routes = conn.watched.get(TypeUrl.ROUTE)
        if routes is None:
            wanted = watched.names
        elif not routes.wildcard:
            wanted = routes.names | watched.names if watched.names else routes.names
    if not watched.names:  # (as Envoy subscribes) one shared value, not one per stream
        return wanted, _EVERY_SENT
    return wanted, replace(watched, wildcard=True)


def follows_route_answer(conn: Connection) -> bool:
    """Does an RDS answer to this proxy need a VHDS answer after it?"""
    return conn.proxy.vhds and TypeUrl.VIRTUAL_HOST in conn.watched
