"""Network-filter chains of gateway servers that are not served through an HCM (Istio's
createGatewayTCPFilterChainOpts):

- TCP (no TLS): the first VirtualService `tcp` route bound to the gateway whose hosts meet the
  server's hosts and whose match (port, gateways) fits; one chain without SNI.
- TLS terminated on a TCP/TLS server: the same, with the server's SNI and TLS context.
- PASSTHROUGH: one chain per VirtualService `tls` match, on the match's `sniHosts`; a match
  whose SNI hosts another route already took on this port is skipped.
- AUTO_PASSTHROUGH: one chain per service port (and DestinationRule subset) the server's hosts
  cover, matching the Istio mTLS SNI `outbound_.<port>_.<subset>_.<host>` and Istio's mTLS
  ALPNs, forwarded by tcp_proxy to the cluster of that name. Current Istio builds these chains
  instead of the old `sni_cluster` filter.
"""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.listener.v3 import listener_components_pb2

from meshpilot.config.hosts import host_matches, hosts_intersect
from meshpilot.config.istio.virtual_service import L4MatchAttributes, TLSMatchAttributes
from meshpilot.model.indexes.virtual_services import BoundVirtualService, resolve_gateway_name
from meshpilot.model.merged_gateway import GatewayServer
from meshpilot.registry.model import Protocol
from meshpilot.xds.generate.gateway.chain import ChainSpec, GatewayBuild
from meshpilot.xds.generate.gateway.tcp import single_destination_filters, tcp_route_filters
from meshpilot.xds.generate.gateway.tls import downstream_tls_context
from meshpilot.xds.names import sni_name

__all__ = ["ALL_ISTIO_MTLS_ALPNS", "matching_gateway_hosts", "tcp_server_chains"]

ALL_ISTIO_MTLS_ALPNS = (
    "istio",
    "istio-peer-exchange",
    "istio-http/1.0",
    "istio-http/1.1",
    "istio-h2",
)


def matching_gateway_hosts(server_hosts: Sequence[str], vs: BoundVirtualService) -> list[str]:
    """VirtualService hosts a server's hosts cover; `ns/host` server hosts only count for
    VirtualServices in `ns` (Istio's pickMatchingGatewayHosts)."""
    out = []
    for vs_host in vs.hosts:
        for gw_host in server_hosts:
            ns, sep, name = gw_host.partition("/")
            if sep and ns != vs.namespace:
                continue
            if hosts_intersect(name if sep else gw_host, vs_host):
                out.append(vs_host)
                break
    return out


def _l4_match(
    match: L4MatchAttributes | TLSMatchAttributes, gs: GatewayServer, vs: BoundVirtualService
) -> bool:
    if match.port and match.port != gs.server.port.number:
        return False
    gateways = {resolve_gateway_name(g, vs.namespace) for g in match.gateways}
    return not gateways or gs.gateway_name in gateways


def _bound_services(build: GatewayBuild, gs: GatewayServer) -> list[BoundVirtualService]:
    vss = build.push.virtual_services.for_gateway(gs.gateway_name, build.proxy.namespace)
    return [vs for vs in vss if matching_gateway_hosts(gs.hosts, vs)]


def _tcp_route_filters(
    build: GatewayBuild, gs: GatewayServer
) -> list[listener_components_pb2.Filter]:
    for vs in _bound_services(build, gs):
        for tcp in vs.obj.model.spec.tcp:
            if tcp.match and not any(_l4_match(m, gs, vs) for m in tcp.match):
                continue
            if not tcp.route:
                continue
            return tcp_route_filters(build.target, tcp.route, gs.server.port.number, vs)
    return []


def _duplicate_sni(build: GatewayBuild, gs: GatewayServer, hosts: Sequence[str]) -> bool:
    known = build.tls_hosts_by_port.setdefault(gs.port, {})
    if any(known.get(h) == gs.server.bind for h in hosts if h in known):
        return True
    known.update((h, gs.server.bind) for h in hosts)
    return False


def _tls_route_chains(build: GatewayBuild, gs: GatewayServer) -> list[ChainSpec]:
    chains = []
    for vs in _bound_services(build, gs):
        for tls in vs.obj.model.spec.tls:
            if not tls.route:
                continue
            for match in tls.match:
                if not _l4_match(match, gs, vs) or _duplicate_sni(build, gs, match.sni_hosts):
                    continue
                filters = tcp_route_filters(build.target, tls.route, gs.server.port.number, vs)
                chains.append(ChainSpec(filters=filters, sni_hosts=tuple(match.sni_hosts)))
    return chains


def _auto_passthrough_chains(build: GatewayBuild, gs: GatewayServer) -> list[ChainSpec]:
    chains = []
    target = build.target
    for svc in build.push.proxy_scope(build.proxy).services:
        if svc.mesh_external or not any(host_matches(h, svc.hostname) for h in gs.sni_hosts):
            continue
        rule = target.rule(svc)
        subsets = [s.name for s in rule.spec.subsets] if rule is not None else []
        for port in svc.ports:
            if port.protocol is Protocol.UDP:
                continue
            for subset in ("", *subsets):
                cluster = sni_name(port.port, subset, svc.hostname)
                chains.append(
                    ChainSpec(
                        filters=single_destination_filters(cluster, cluster, rule, subset),
                        sni_hosts=(cluster,),
                        application_protocols=ALL_ISTIO_MTLS_ALPNS,
                    )
                )
    return chains


def tcp_server_chains(build: GatewayBuild, gs: GatewayServer) -> list[ChainSpec]:
    tls = gs.server.tls
    if tls is None:
        filters = _tcp_route_filters(build, gs)
        return [ChainSpec(filters=filters)] if filters else []
    if tls.mode == "AUTO_PASSTHROUGH":
        return _auto_passthrough_chains(build, gs)
    if tls.mode == "PASSTHROUGH":
        return _tls_route_chains(build, gs)
    filters = _tcp_route_filters(build, gs)
    if not filters:
        return []
    context = downstream_tls_context(tls, tcp_termination=True)
    return [ChainSpec(filters=filters, sni_hosts=gs.sni_hosts, tls=context)]
