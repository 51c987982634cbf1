"""The hops gathered so far during one walk, and the Envoy network filters it reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from envoy.config.listener.v3 import listener_components_pb2 as lc
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2

from meshpilot.explain.result import Hop, ObjectRef

__all__ = ["HCM", "TCP_PROXY", "Trail", "network_filter"]

HCM = "envoy.filters.network.http_connection_manager"
TCP_PROXY = "envoy.filters.network.tcp_proxy"


@dataclass(slots=True)
class Trail:
    side: str = "outbound"
    hops: list[Hop] = field(default_factory=list)

    def add(
        self,
        stage: str,
        envoy: str,
        summary: str,
        details: tuple[str, ...] | list[str] = (),
        objects: tuple[ObjectRef | None, ...] | list[ObjectRef | None] = (),
    ) -> None:
        refs = tuple(o for o in objects if o is not None)
        self.hops.append(Hop(self.side, stage, envoy, summary, tuple(details), refs))


def network_filter(
    chain: lc.FilterChain,
) -> hcm_pb2.HttpConnectionManager | tcp_proxy_pb2.TcpProxy | None:
    """The chain's terminal filter: an HTTP connection manager or a tcp_proxy."""
    for f in chain.filters:
        if f.name == HCM:
            hcm = hcm_pb2.HttpConnectionManager()
            f.typed_config.Unpack(hcm)
            return hcm
        if f.name == TCP_PROXY:
            tcp = tcp_proxy_pb2.TcpProxy()
            f.typed_config.Unpack(tcp)
            return tcp
    return None
