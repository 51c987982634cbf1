"""Put a workload's security filters into its inbound filter chains (sidecars) or into the
filter chains of its listeners (gateways).

Every inbound chain but the loop-protection blackhole gets them, passthrough chains
included (Istio enforces policies on ports no Service declares too): HCM chains get the
HTTP filters first in their HTTP filter list (Istio's order: authn, authz, then stats,
fault, cors, router), TCP chains get the network RBAC filters before tcp_proxy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.security import InboundSecurity, inbound_security
from meshpilot.xds.names import VIRTUAL_INBOUND_BLACKHOLE
from meshpilot.xds.protos import Filters, pack

if TYPE_CHECKING:  # a runtime import would cycle: sidecar listeners import this module
    from meshpilot.xds.generate.listeners.context import SidecarContext

__all__ = ["secure_chain", "secure_gateway_listeners", "secure_inbound_chains"]


def secure_chain(chain: lc_pb2.FilterChain, security: InboundSecurity) -> None:
    if not chain.filters or chain.name == VIRTUAL_INBOUND_BLACKHOLE:
        return
    first = chain.filters[0]
    if first.name == Filters.HCM and security.http:
        hcm = hcm_pb2.HttpConnectionManager()
        first.typed_config.Unpack(hcm)
        existing = list(hcm.http_filters)
        del hcm.http_filters[:]
        hcm.http_filters.extend([*security.http, *existing])
        first.typed_config.CopyFrom(pack(hcm))
    elif first.name == Filters.TCP_PROXY and security.network:
        existing_filters = list(chain.filters)
        del chain.filters[:]
        chain.filters.extend([*security.network, *existing_filters])


def secure_inbound_chains(
    ctx: SidecarContext, chains: list[lc_pb2.FilterChain]
) -> list[lc_pb2.FilterChain]:
    """The chains of virtualInbound with the workload's jwt_authn and RBAC filters."""
    security = inbound_security(ctx.push, ctx.proxy, ctx.scope)
    if not security.empty:
        for chain in chains:
            secure_chain(chain, security)
    return chains


def secure_gateway_listeners(
    push: PushContext, proxy: Proxy, listeners: list[listener_pb2.Listener]
) -> list[listener_pb2.Listener]:
    """A gateway enforces the policies selecting its own pod (`istio: ingressgateway`...) on
    every server: HTTP servers in their HCM, TCP and TLS-terminated TCP before tcp_proxy."""
    security = inbound_security(push, proxy, push.proxy_scope(proxy))
    if not security.empty:
        for listener in listeners:
            for chain in listener.filter_chains:
                secure_chain(chain, security)
    return listeners
