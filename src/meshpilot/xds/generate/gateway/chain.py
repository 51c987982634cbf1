"""A gateway filter chain before it becomes a proto, and the state of one LDS build."""

from __future__ import annotations

from dataclasses import dataclass, field

from envoy.config.listener.v3 import listener_components_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from meshpilot.model.merged_gateway import MergedGateway
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.gateway.tcp import TcpTarget

__all__ = ["ChainSpec", "GatewayBuild"]


@dataclass(slots=True)
class ChainSpec:
    """One filter chain: what it matches (SNI, ALPN) and what it runs."""

    filters: list[listener_components_pb2.Filter]
    sni_hosts: tuple[str, ...] = ()
    application_protocols: tuple[str, ...] = ()
    tls: tls_pb2.DownstreamTlsContext | None = None


@dataclass(slots=True)
class GatewayBuild:
    """State of one LDS build for one gateway proxy."""

    push: PushContext
    proxy: Proxy
    merged: MergedGateway
    # listener port -> SNI host -> bind, to skip passthrough routes that would repeat a match.
    tls_hosts_by_port: dict[int, dict[str, str]] = field(default_factory=dict)

    @property
    def target(self) -> TcpTarget:
        return TcpTarget(self.push, self.proxy)
