"""The filter chains of one gateway port, from its merged servers (Istio's
buildGatewayTCPBasedFilterChains).

- An HTTP port gets one chain: an HCM on `http.<port>` shared by every plain-text server.
- Otherwise each server gets its own chain(s): terminated HTTPS an HCM on its `https...` route
  with the server's TLS context and SNI; TCP, terminated TLS and passthrough servers network
  filters (see passthrough.py).
"""

from __future__ import annotations

from meshpilot.model.merged_gateway import (
    GatewayServer,
    MergedServers,
    ServerPort,
    is_https_terminated,
)
from meshpilot.registry.model import parse_protocol
from meshpilot.xds.generate.gateway.chain import ChainSpec, GatewayBuild
from meshpilot.xds.generate.gateway.hcm import gateway_hcm_filter
from meshpilot.xds.generate.gateway.passthrough import tcp_server_chains
from meshpilot.xds.generate.gateway.tls import downstream_tls_context
from meshpilot.xds.names import delimited_stat_prefix

__all__ = ["chains_for_port", "default_stat_prefix"]


def default_stat_prefix(listener: str) -> str:
    """`outbound_<listener>;`: gateway listeners are OUTBOUND (Istio's default HCM prefix)."""
    return delimited_stat_prefix(f"outbound_{listener}")


def _https_chain(build: GatewayBuild, gs: GatewayServer, listener: str) -> ChainSpec:
    tls = gs.server.tls
    assert tls is not None  # terminated HTTPS servers have TLS settings
    stat_prefix = gs.server.name or default_stat_prefix(listener)
    return ChainSpec(
        filters=[gateway_hcm_filter(gs.route_name, stat_prefix, build.push.mesh)],
        sni_hosts=gs.sni_hosts,
        tls=downstream_tls_context(tls),
    )


def chains_for_port(
    build: GatewayBuild, sp: ServerPort, ms: MergedServers, listener: str
) -> list[ChainSpec]:
    if parse_protocol(sp.protocol).is_http:
        hcm = gateway_hcm_filter(ms.route_name, default_stat_prefix(listener), build.push.mesh)
        return [ChainSpec(filters=[hcm])]
    chains: list[ChainSpec] = []
    for gs in ms.servers:
        if is_https_terminated(gs.server):
            chains.append(_https_chain(build, gs, listener))
        else:
            chains.extend(tcp_server_chains(build, gs))
    return chains
