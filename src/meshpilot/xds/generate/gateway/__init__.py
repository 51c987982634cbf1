"""Gateway (`--type router`) listeners and routes, from the Gateways selecting the proxy.

Modules: `chain` (a filter chain before it is a proto), `servers` (the chains of one merged
port), `hcm` (the gateway HTTP connection manager), `tls` (DownstreamTlsContext per TLS mode),
`tcp` (tcp_proxy filters), `passthrough` (TCP, terminated TLS, PASSTHROUGH and
AUTO_PASSTHROUGH chains), `listeners` and `routes` (the LDS and RDS generators).
"""

from __future__ import annotations

from meshpilot.xds.generate.gateway.listeners import generate_gateway_listeners
from meshpilot.xds.generate.gateway.routes import generate_gateway_routes

__all__ = ["generate_gateway_listeners", "generate_gateway_routes"]
