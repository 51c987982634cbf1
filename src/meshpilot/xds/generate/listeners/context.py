"""What every sidecar listener builder reads, computed once per generation."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from meshpilot.model.indexes.virtual_services import BoundVirtualService
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.registry.model import Service
from meshpilot.xds.generate.mesh_virtual_services import mesh_virtual_services
from meshpilot.xds.names import BLACKHOLE_CLUSTER, PASSTHROUGH_CLUSTER

__all__ = ["ALLOW_ANY", "SidecarContext", "build_context"]

ALLOW_ANY = "ALLOW_ANY"


@dataclass(frozen=True, slots=True)
class SidecarContext:
    push: PushContext
    proxy: Proxy
    scope: SidecarScope
    wildcard: str  # 0.0.0.0 or :: (Istio's getWildcardsAndLocalHost)
    localhost: str  # 127.0.0.1 or ::1: binds of interceptionMode NONE listeners
    mesh_virtual_services: tuple[BoundVirtualService, ...]

    @property
    def catch_all_cluster(self) -> str:
        """Where traffic to unknown destinations goes: the scope's outboundTrafficPolicy."""
        return PASSTHROUGH_CLUSTER if self.scope.outbound_policy == ALLOW_ANY else BLACKHOLE_CLUSTER

    def service(self, hostname: str) -> Service | None:
        return self.scope.service(hostname)

    def virtual_services_for(self, hostname: str) -> list[BoundVirtualService]:
        """Mesh VirtualServices whose hosts overlap `hostname` (Istio's getConfigsForHost)."""
        return [vs for vs in self.mesh_virtual_services if vs.matches_host(hostname)]


_MESH_VS = "lds.mesh_virtual_services"


def _is_ipv6(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).version == 6
    except ValueError:
        return False


def build_context(push: PushContext, proxy: Proxy) -> SidecarContext:
    scope = push.sidecar_scope(proxy)
    # The scope's egress hosts also restrict which VirtualServices apply to this sidecar:
    # the same for every proxy of the namespace and scope, so found once per push.
    memo = push.memo.setdefault(_MESH_VS, {})
    assert isinstance(memo, dict)
    key = (proxy.namespace, scope.namespace, scope.sidecar.key if scope.sidecar else None)
    mesh_vs: tuple[BoundVirtualService, ...] | None = memo.get(key)
    if mesh_vs is None:
        mesh_vs = memo[key] = tuple(
            vs
            for vs in mesh_virtual_services(push, proxy.namespace)
            if any(scope.allows_host(h, vs.namespace) for h in vs.hosts)
        )
    ipv6 = bool(proxy.ip_addresses) and all(_is_ipv6(ip) for ip in proxy.ip_addresses)
    return SidecarContext(
        push=push,
        proxy=proxy,
        scope=scope,
        wildcard="::" if ipv6 else "0.0.0.0",
        localhost="::1" if ipv6 else "127.0.0.1",
        mesh_virtual_services=mesh_vs,
    )
