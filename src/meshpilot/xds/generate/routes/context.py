"""What translating one VirtualService for one proxy and one port needs to know."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from envoy.config.route.v3 import route_components_pb2 as rc

from meshpilot.config.istio.virtual_service import Destination, HTTPRoute
from meshpilot.model.indexes.virtual_services import BoundVirtualService
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.model.visibility import visible_to
from meshpilot.registry.model import Service
from meshpilot.xds import names

__all__ = ["RouteContext", "gateway_service_ports", "mesh_service_ports"]


@dataclass(frozen=True, slots=True)
class RouteContext:
    push: PushContext
    proxy: Proxy
    scope: SidecarScope
    vs: BoundVirtualService
    port: int  # the listener (or gateway server) port
    gateway_names: frozenset[str]
    is_tls: bool
    # Ports of the service behind each destination host, as Istio's route builder sees it:
    # sidecars see services trimmed to the listener port, gateways see whole services.
    service_ports: Mapping[str, tuple[int, ...]]
    # Routes already translated for this proxy (see http_route.translate_virtual_service);
    # None where nothing is shared.
    memo: dict[tuple[object, ...], rc.Route | None] | None = None

    def cluster(self, dest: Destination) -> str:
        """Istio's GetDestinationCluster: explicit port, else the service's only port, else
        the listener port."""
        if not dest.host:
            return names.UNKNOWN_SERVICE_CLUSTER
        port = self.port
        ports = self.service_ports.get(dest.host, ())
        if dest.port is not None:
            port = dest.port.number
        elif len(ports) == 1:
            port = ports[0]
        return names.outbound_cluster(port, dest.subset, dest.host)

    def service(self, host: str) -> Service | None:
        """The service a destination host names in this proxy's scope (for DestinationRules)."""
        return self.scope.service(host)


def mesh_service_ports(scope: SidecarScope, port: int) -> dict[str, tuple[int, ...]]:
    """Sidecars: only services that expose the listener port, trimmed to that port."""
    return {s.hostname: (port,) for s in scope.services if s.port(port) is not None}


def _destination_hosts(routes: Iterable[HTTPRoute]) -> list[str]:
    hosts: list[str] = []
    for r in routes:
        hosts.extend(d.destination.host for d in r.route)
        if r.mirror is not None:
            hosts.append(r.mirror.host)
        hosts.extend(m.destination.host for m in r.mirrors)
    return hosts


def gateway_service_ports(
    push: PushContext,
    proxy: Proxy,
    scope: SidecarScope,
    vs: BoundVirtualService,
    routes: Iterable[HTTPRoute],
) -> dict[str, tuple[int, ...]]:
    """Gateways: the destination's service in the VirtualService's namespace if the proxy can
    see it, else the one the proxy's scope holds (Istio's buildNameToServiceMapForHTTPRoutes)."""
    default_export = push.mesh.default_service_export_to
    out: dict[str, tuple[int, ...]] = {}
    for host in _destination_hosts(routes):
        if host in out:
            continue
        svc = next(
            (
                s
                for s in push.registry.services_for_host(host)
                if s.namespace == vs.namespace
                and visible_to(s.export_to, s.namespace, proxy.namespace, default_export)
            ),
            None,
        ) or scope.service(host)
        if svc is not None:
            out[host] = tuple(p.port for p in svc.ports)
    return out
