"""The unary gRPC services discovery offers agents beside ADS, on the same port or socket:
name tables for the DNS proxy (xds/name_tables.py) and EnvoyFilter BOOTSTRAP patches
(xds/bootstrap_patches.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from meshpilot.xds.bootstrap_patches import bootstrap_patch_handler
from meshpilot.xds.name_tables import name_table_handler

if TYPE_CHECKING:
    from meshpilot.xds.server import DiscoveryServer

__all__ = ["agent_handlers"]


def agent_handlers(server: DiscoveryServer) -> tuple[grpc.GenericRpcHandler, ...]:
    return (name_table_handler(server), bootstrap_patch_handler(server))
