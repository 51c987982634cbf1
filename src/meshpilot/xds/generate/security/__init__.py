"""Workload security filters: RequestAuthentication → jwt_authn, AuthorizationPolicy → RBAC.

`inbound_security(push, proxy, scope)` answers which filters a sidecar's inbound chains
get: HTTP filters for every inbound HCM (jwt_authn first, then the RBAC filters, all before
Istio's other HTTP filters) and network RBAC filters for TCP chains (before tcp_proxy).
`secure_inbound_chains` (apply.py) puts them into the chains of `virtualInbound`.
"""

from __future__ import annotations

from dataclasses import dataclass

from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from meshpilot.model.indexes.authz import workload_security
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.xds.cache import cache_for
from meshpilot.xds.generate.security.custom import (
    custom_http_filters,
    custom_network_filters,
    resolve_custom,
)
from meshpilot.xds.generate.security.jwt_authn import jwt_authn_filter
from meshpilot.xds.generate.security.rbac import http_rbac_filters, network_rbac_filters

__all__ = ["InboundSecurity", "inbound_security"]


@dataclass(frozen=True, slots=True)
class InboundSecurity:
    http: tuple[hcm_pb2.HttpFilter, ...] = ()
    network: tuple[lc_pb2.Filter, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.http and not self.network


def inbound_security(
    push: PushContext, proxy: Proxy, scope: SidecarScope | None
) -> InboundSecurity:
    """The filters for one workload; shared (cached) by workloads with the same policies."""
    security = workload_security(push, proxy.namespace, proxy.labels)
    if security.empty:
        return InboundSecurity()
    # The jwks clusters depend on the scope (Sidecar resource), the rest on the policies.
    scope_key = (
        (scope.namespace, scope.sidecar.key if scope and scope.sidecar else None) if scope else None
    )
    key = (
        "inbound-security",
        security.dependencies(),
        scope_key if security.request_authn else None,
    )
    cache = cache_for(push)

    tds = (push.mesh.trust_domain, *push.mesh.trust_domain_aliases)
    # CUSTOM's providers come from mesh config and the registry: resolved here, keyed below
    providers = resolve_custom(push, security.custom)
    full_key = (*key, tds, tuple(p.cache_key() for p in providers))

    def build_http() -> list[hcm_pb2.HttpFilter]:
        jwt = jwt_authn_filter(security.request_authn, scope)
        custom = custom_http_filters(security.custom, providers, tds)
        return [*([jwt] if jwt is not None else []), *http_rbac_filters(security, tds, custom)]

    def build_network() -> list[lc_pb2.Filter]:
        custom = custom_network_filters(security.custom, providers, tds)
        return network_rbac_filters(security, tds, custom)

    http = cache.get_or_build((*full_key, "http"), build_http).messages
    network = cache.get_or_build((*full_key, "tcp"), build_network)
    network_filters = network.messages
    return InboundSecurity(
        tuple(f for f in http if isinstance(f, hcm_pb2.HttpFilter)),
        tuple(f for f in network_filters if isinstance(f, lc_pb2.Filter)),
    )
