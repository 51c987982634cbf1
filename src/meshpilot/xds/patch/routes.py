"""Route patches: ROUTE_CONFIGURATION (MERGE), VIRTUAL_HOST (ADD, REMOVE, MERGE) and
HTTP_ROUTE (ADD, MERGE, REMOVE, INSERT_*) on one route configuration, in place."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2, route_pb2

from meshpilot.xds.patch.lists import apply_list_operation
from meshpilot.xds.patch.matching import (
    context_matches,
    field,
    route_config_matches,
    route_matches,
    vhost_matches,
)
from meshpilot.xds.patch.merge import merge_message
from meshpilot.xds.patch.selection import ConfigPatch

__all__ = ["ROUTE_LEVELS", "patch_route_config"]

ROUTE_LEVELS = ("ROUTE_CONFIGURATION", "VIRTUAL_HOST", "HTTP_ROUTE")


def patch_route_config(
    config: route_pb2.RouteConfiguration, patch: ConfigPatch, context: str, gateway: bool
) -> bool:
    if patch.apply_to not in ROUTE_LEVELS or not context_matches(patch, context):
        return False
    match = patch.route_configuration
    if not route_config_matches(config.name, gateway, match):
        return False
    if patch.apply_to == "ROUTE_CONFIGURATION":
        if patch.operation != "MERGE" or patch.value is None:
            return False
        merge_message(config, patch.value)
        return True
    if patch.apply_to == "VIRTUAL_HOST":
        if patch.operation == "ADD":
            assert patch.value is not None
            config.virtual_hosts.add().CopyFrom(patch.value)
            return True
        if patch.operation not in ("MERGE", "REMOVE"):
            return False
        return apply_list_operation(
            config.virtual_hosts,
            patch.operation,
            patch.value,
            lambda v: vhost_matches(v, match),
            True,
        )
    changed = False
    has_route = bool(field(field(match, "vhost"), "route"))
    for vhost in config.virtual_hosts:
        if vhost_matches(vhost, match):
            changed |= _routes(vhost, patch, has_route)
    return changed


def _routes(vhost: route_components_pb2.VirtualHost, patch: ConfigPatch, has_route: bool) -> bool:
    match = patch.route_configuration
    return apply_list_operation(
        vhost.routes, patch.operation, patch.value, lambda r: route_matches(r, match), has_route
    )
