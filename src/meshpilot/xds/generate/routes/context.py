"""What translating one VirtualService for one proxy and one port needs to know."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from meshpilot.config.hosts import resolve_host
from meshpilot.config.istio.destination_rule import ConsistentHashLB, DestinationRule
from meshpilot.config.istio.virtual_service import Destination, HTTPRoute
from meshpilot.model.indexes.virtual_services import BoundVirtualService
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.model.visibility import visible_to
from meshpilot.registry.model import Service
from meshpilot.xds import names
from meshpilot.xds.generate.routes.hash_policy import destination_hash, hashes_anywhere

__all__ = ["DestinationMemo", "RouteContext", "gateway_service_ports", "mesh_service_ports"]


@dataclass(slots=True)
class DestinationMemo:
    """DestinationRules by destination host, consistent hashes by (host, subset, port)."""

    by_host: dict[str, DestinationRule | None] = field(default_factory=dict)
    hashes: dict[tuple[str, str, int | None], ConsistentHashLB | None] = field(default_factory=dict)
    hashing: dict[str, bool] = field(default_factory=dict)  # by host: any consistent hash?


# Not frozen (never changed once made): a frozen dataclass's __init__ sets each field
# through object.__setattr__, 3-4x the cost, and thousands are made per push.
@dataclass(slots=True)
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
    # What a proxy's DestinationRules say about each destination, shared by the contexts of
    # one proxy's route configs (most destinations of a VirtualService name one host).
    rules: DestinationMemo = field(default_factory=DestinationMemo)

    def host(self, dest: Destination) -> str:
        """The destination's host as an FQDN: a short name is the VirtualService's namespace's
        (a delegate's routes come with their hosts resolved in its own namespace). An
        ExternalName alias stands for the host it names, as in Istio's GetDestinationCluster."""
        host = resolve_host(dest.host, self.vs.namespace, self.push.domain_suffix)
        svc = self.scope.service(host)
        return svc.alias_for if svc is not None and svc.is_alias else host

    def cluster(self, dest: Destination) -> str:
        """Istio's GetDestinationCluster: explicit port, else the service's only port, else
        the listener port."""
        return self.cluster_of(dest, self.host(dest))

    def cluster_of(self, dest: Destination, host: str) -> str:
        """`cluster` with the destination's host already resolved (`host`)."""
        if not host:
            return names.UNKNOWN_SERVICE_CLUSTER
        port = self.port
        ports = self.service_ports.get(host, ())
        if dest.port is not None:
            port = dest.port.number
        elif len(ports) == 1:
            port = ports[0]
        return names.outbound_cluster(port, dest.subset, host)

    def service(self, host: str) -> Service | None:
        """The service a destination host names in this proxy's scope (for DestinationRules)."""
        return self.scope.service(host)

    def destination_rule(self, dest: Destination) -> DestinationRule | None:
        """The rule that applies to this proxy's traffic to the destination's service."""
        return self._rule_of(self.host(dest))

    def _rule_of(self, host: str) -> DestinationRule | None:
        if host not in self.rules.by_host:
            svc = self.service(host)
            bound = self.push.destination_rule(self.proxy, svc) if svc is not None else None
            self.rules.by_host[host] = bound.obj.model if bound is not None else None
        return self.rules.by_host[host]

    def consistent_hash(self, dest: Destination) -> ConsistentHashLB | None:
        """The destination's consistent-hash settings (hash_policy.destination_hash)."""
        return self.consistent_hash_of(dest, self.host(dest))

    def consistent_hash_of(self, dest: Destination, host: str) -> ConsistentHashLB | None:
        """`consistent_hash` with the destination's host already resolved (`host`)."""
        hashing = self.rules.hashing.get(host)
        if hashing is None:
            rule = self._rule_of(host)
            hashing = self.rules.hashing[host] = rule is not None and hashes_anywhere(rule)
        if not hashing:
            return None  # the usual case, decided without a key per destination
        key = (host, dest.subset, dest.port.number if dest.port else None)
        if key not in self.rules.hashes:
            self.rules.hashes[key] = destination_hash(self._rule_of(host), dest)
        return self.rules.hashes[key]


def mesh_service_ports(scope: SidecarScope, port: int) -> dict[str, tuple[int, ...]]:
    """Sidecars: only services that expose the listener port, trimmed to that port."""
    return {s.hostname: (port,) for s in scope.services if s.port(port) is not None}


def _destination_hosts(routes: Iterable[HTTPRoute], namespace: str, suffix: str) -> list[str]:
    """FQDNs, as RouteContext.host resolves them."""
    hosts: list[str] = []
    for r in routes:
        hosts.extend(d.destination.host for d in r.route)
        if r.mirror is not None:
            hosts.append(r.mirror.host)
        hosts.extend(m.destination.host for m in r.mirrors)
    return [resolve_host(h, namespace, suffix) for h in hosts]


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
    for host in _destination_hosts(routes, vs.namespace, push.domain_suffix):
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
