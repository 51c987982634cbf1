"""Per-port outbound listeners and how services sharing a port are resolved (Istio's
buildSidecarOutboundListeners / buildSidecarOutboundListener / buildListenerFromEntry).

Where each service port listens:
- HTTP ports share `0.0.0.0_<port>`; the virtual hosts of the RDS config `<port>` tell the
  services apart. The HTTP chain matches the HTTP inspector's ALPN, so other traffic to the
  port falls to the default chain (or to a TCP service sharing the port).
- TCP and sniffed (AUTO) ports listen on the service VIP, `<vip>_<port>`, one listener per
  service; without a VIP on `0.0.0.0_<port>`, and on a CIDR address on 0.0.0.0 with a
  prefix_ranges match. Headless services get one listener per endpoint IP.
- Two services on one listener merge their chains when the matches differ; an HTTP and a
  TCP service together make the listener sniffed (HTTP chain by ALPN, TCP chain by default).
  Identical matches keep the first service (services in hostname order). Mongo and MySQL
  never share a port with another protocol.
- interceptionMode NONE: everything binds 127.0.0.1:<port> for real (no virtual listeners).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.listener.v3 import listener_pb2

from meshpilot.registry.model import Protocol, Resolution, Service, ServicePort
from meshpilot.xds.generate.listeners.chain_opts import PLAINTEXT_HTTP_ALPNS, RAW_BUFFER, ChainOpts
from meshpilot.xds.generate.listeners.context import SidecarContext
from meshpilot.xds.generate.listeners.filters import http_inspector, socket_address, tls_inspector
from meshpilot.xds.generate.listeners.hcm import hcm_filter, outbound_hcm
from meshpilot.xds.generate.listeners.outbound_tcp import tcp_chain_opts
from meshpilot.xds.generate.listeners.virtual import catch_all_filters
from meshpilot.xds.names import (
    PASSTHROUGH_FILTER_CHAIN,
    delimited_stat_prefix,
    listener_name,
    sniffed_route_name,
)
from meshpilot.xds.protos import boolean, duration, seconds

__all__ = ["OutboundTarget", "build_outbound_listeners", "per_endpoint_addresses"]

# Istio bounds slow TLS handshakes on outbound chains (PILOT_GATEWAY_TRANSPORT_SOCKET_
# CONNECT_TIMEOUT, default 15s).
TRANSPORT_SOCKET_CONNECT_TIMEOUT_S = 15


class ListenerProtocol(Enum):
    HTTP = "HTTP"
    TCP = "TCP"
    AUTO = "AUTO"


def listener_protocol(protocol: Protocol) -> ListenerProtocol | None:
    if protocol.is_http:
        return ListenerProtocol.HTTP
    if protocol.is_tcp:
        return ListenerProtocol.TCP
    if protocol is Protocol.AUTO:
        return ListenerProtocol.AUTO
    return None  # UDP: not proxied


_KIND = {p: listener_protocol(p) for p in Protocol}  # read per service port
# The bootstrap's own listeners on 0.0.0.0 (readiness 15021, Prometheus 15090): a service
# port there on the wildcard (an HTTP port, or a gateway Service without a cluster IP)
# would be `0.0.0.0_<port>`, a duplicate address: Envoy would refuse the whole LDS update.
_BOOTSTRAP_PORTS = frozenset({15021, 15090})


@dataclass(slots=True)
class OutboundEntry:
    bind: str
    port: int
    bind_to_port: bool
    protocol: Protocol  # AUTO once HTTP and TCP share the listener
    chains: list[ChainOpts] = field(default_factory=list)


# Not frozen (never changed once made): a frozen dataclass's __init__ sets each field
# through object.__setattr__, 3-4x the cost, and thousands are made per push.
@dataclass(slots=True)
class OutboundTarget:
    """One service port to place: where it binds (empty: decide by protocol)."""

    service: Service
    port: ServicePort
    bind: str
    bind_to_port: bool


def build_outbound_listeners(
    ctx: SidecarContext, port_targets: Sequence[OutboundTarget] = ()
) -> list[listener_pb2.Listener]:
    """`port_targets` (a Sidecar's egress listeners with a port) are placed first; the
    listeners they make are then theirs alone: the catch-all egress adds nothing to them
    (Istio's precedence), though it may still listen on the port at another address."""
    entries: dict[tuple[str, int], OutboundEntry] = {}
    for target in port_targets:
        _add(ctx, entries, target)
    reserved = frozenset(entries)
    for target in _targets(ctx, entries, reserved):
        _add(ctx, entries, target, reserved)
    return [_listener(ctx, e) for e in entries.values()]


def _targets(
    ctx: SidecarContext,
    entries: Mapping[tuple[str, int], OutboundEntry],
    reserved: frozenset[tuple[str, int]],
) -> Iterator[OutboundTarget]:
    """The scope's service ports to place, read lazily while `entries` fills: an HTTP port
    whose wildcard listener already serves HTTP (most ports of a mesh) is left out here,
    as `_add` would leave it, without a target made for it."""
    bind_to_port = not ctx.proxy.intercept
    bind = ctx.localhost if bind_to_port else ""
    wildcard = ctx.wildcard
    for svc in ctx.scope.services:
        if _is_alias(svc):
            continue
        headless = svc.resolution is Resolution.PASSTHROUGH and not svc.addresses
        for port in svc.ports:
            if (
                not bind
                and port.port in _BOOTSTRAP_PORTS
                and (not svc.addresses or _KIND[port.protocol] is ListenerProtocol.HTTP)
            ):
                continue  # it would be 0.0.0.0_<port>
            if not bind and _KIND[port.protocol] is ListenerProtocol.HTTP:
                key = (wildcard, port.port)
                current = entries.get(key)
                if key in reserved or (current is not None and not current.protocol.is_tcp):
                    continue  # see _add and _already_served
            if bind or not (headless and _per_endpoint(svc, port)):
                yield OutboundTarget(svc, port, bind, bind_to_port)
                continue
            yield from _endpoint_targets(ctx, svc, port)


def per_endpoint_addresses(ctx: SidecarContext) -> frozenset[str]:
    """Every endpoint address a headless port could get a listener on (before leaving
    out the proxy's own IP): the part of the outbound side that depends on that IP."""
    if not ctx.proxy.intercept:
        return frozenset()  # bound listeners use localhost, never endpoint IPs
    return frozenset(
        ep.address
        for svc in ctx.scope.services
        # Headless services only (_per_endpoint), tested first: most services are not.
        if svc.resolution is Resolution.PASSTHROUGH and not svc.addresses and not _is_alias(svc)
        for port in svc.ports
        if _per_endpoint(svc, port)
        for ep in ctx.push.endpoints(svc, port.port)
    )


def _is_alias(svc: Service) -> bool:
    """ExternalName Services are aliases of their target (Istio ENABLE_EXTERNAL_NAME_ALIAS,
    on by default) and get no listener; the registry marks them as external Kubernetes
    Services."""
    return svc.is_kubernetes and svc.mesh_external


def _per_endpoint(svc: Service, port: ServicePort) -> bool:
    """Headless TCP/sniffed ports: no VIP to listen on, so one listener per endpoint."""
    return (
        svc.resolution is Resolution.PASSTHROUGH
        and not svc.addresses
        and listener_protocol(port.protocol) in (ListenerProtocol.TCP, ListenerProtocol.AUTO)
    )


def _endpoint_targets(
    ctx: SidecarContext, svc: Service, port: ServicePort
) -> Iterator[OutboundTarget]:
    endpoints = ctx.push.endpoints(svc, port.port)
    if not endpoints and not svc.is_kubernetes and svc.selector is None:
        # A plain ServiceEntry with resolution NONE: fall back to the wildcard listener.
        yield OutboundTarget(svc, port, "", False)
        return
    own = ctx.proxy.ip_addresses[0] if ctx.proxy.ip_addresses else None
    for ep in endpoints:
        # The app reaching its own pod IP never passes this listener; it would also clash
        # with the inbound side.
        if _is_ip(ep.address) and ep.address != own:
            yield OutboundTarget(svc, port, ep.address, False)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _add(
    ctx: SidecarContext,
    entries: dict[tuple[str, int], OutboundEntry],
    t: OutboundTarget,
    reserved: frozenset[tuple[str, int]] = frozenset(),
) -> None:
    kind = _KIND[t.port.protocol]
    if kind is None:
        return
    bind, cidrs = _bind(ctx, t, kind)
    key = (bind, t.port.port)
    if key in reserved:
        return  # a Sidecar egress listener with this port owns it
    current = entries.get(key)
    if current is not None and _already_served(kind, current):
        return
    opts, entry_protocol = _chain_opts(ctx, t, kind, bind, cidrs)
    if current is None or (kind is ListenerProtocol.AUTO and current.protocol.is_http):
        # A new listener, or a sniffed service taking over an HTTP one (Istio AutoOverHTTP).
        entries[key] = OutboundEntry(bind, t.port.port, t.bind_to_port, entry_protocol, opts)
        return
    if _well_known_clash(t.port.protocol, current.protocol):
        return
    _merge(current, opts)
    if kind is not ListenerProtocol.TCP or current.protocol.is_http:
        current.protocol = Protocol.AUTO  # HTTP (or sniffed) and TCP together: sniff


def _already_served(kind: ListenerProtocol, current: OutboundEntry) -> bool:
    """HTTP joins an HTTP or sniffed listener through RDS alone; a sniffed service adds
    nothing to a sniffed listener."""
    if kind is ListenerProtocol.HTTP:
        return not current.protocol.is_tcp
    return kind is ListenerProtocol.AUTO and current.protocol is Protocol.AUTO


def _chain_opts(
    ctx: SidecarContext,
    t: OutboundTarget,
    kind: ListenerProtocol,
    bind: str,
    cidrs: tuple[str, ...],
) -> tuple[list[ChainOpts], Protocol]:
    """The service port's chains, and the protocol its listener entry records."""
    if kind is ListenerProtocol.TCP:
        return tcp_chain_opts(ctx, t.service, t.port, cidrs, bind), t.port.protocol
    http = _http_opts(ctx, t, bind, kind)
    if kind is ListenerProtocol.AUTO:
        tcp = tcp_chain_opts(ctx, t.service, t.port, cidrs, bind)
        return [*tcp, _by_alpn(http)], t.port.protocol
    if bind == ctx.wildcard:
        # On the shared wildcard, match only what the HTTP inspector saw as HTTP, so that
        # other bytes to the port pass through: the listener is in effect sniffed.
        return [_by_alpn(http)], Protocol.AUTO
    return [http], t.port.protocol


def _by_alpn(opts: ChainOpts) -> ChainOpts:
    return replace(opts, application_protocols=PLAINTEXT_HTTP_ALPNS, transport_protocol=RAW_BUFFER)


def _bind(
    ctx: SidecarContext, t: OutboundTarget, kind: ListenerProtocol
) -> tuple[str, tuple[str, ...]]:
    """(listen address, destination CIDRs to match) for a target without an explicit bind."""
    if t.bind:
        return t.bind, ()
    if kind is ListenerProtocol.HTTP:
        return ctx.wildcard, ()
    address = t.service.vip or ctx.wildcard
    if "/" in address:
        return ctx.wildcard, (address,)
    return address, ()


def _http_opts(
    ctx: SidecarContext, t: OutboundTarget, bind: str, kind: ListenerProtocol
) -> ChainOpts:
    """A sniffed service alone on its VIP gets its own route config `<host>:<port>`;
    otherwise services share the port's `<port>`."""
    if kind is ListenerProtocol.AUTO and bind != ctx.wildcard:
        return ChainOpts(rds=sniffed_route_name(t.service.hostname, t.port.port))
    return ChainOpts(rds=str(t.port.port))


def _well_known_clash(incoming: Protocol, existing: Protocol) -> bool:
    """Mongo and MySQL are server-first: sniffing would break them, so they share nothing."""
    server_first = (Protocol.MONGO, Protocol.MYSQL)
    return (incoming in server_first or existing in server_first) and incoming != existing


def _merge(entry: OutboundEntry, incoming: list[ChainOpts]) -> None:
    """Add the chains whose match differs from every existing one; first come wins."""
    for opts in incoming:
        if not any(existing.conflicts_with(opts) for existing in entry.chains):
            entry.chains.append(opts)


def _listener(ctx: SidecarContext, entry: OutboundEntry) -> listener_pb2.Listener:
    name = listener_name(entry.bind, entry.port)
    listener = listener_pb2.Listener(
        name=name,
        address=socket_address(entry.bind, entry.port),
        traffic_direction=base_pb2.OUTBOUND,
        continue_on_listener_filters_timeout=True,
    )
    if not entry.bind_to_port:
        listener.bind_to_port.CopyFrom(boolean(False))
    if any(o.sni_hosts for o in entry.chains):
        listener.listener_filters.append(tls_inspector())
    if any(o.application_protocols for o in entry.chains):
        listener.listener_filters.append(http_inspector())
        listener.listener_filters_timeout.CopyFrom(
            duration(ctx.push.mesh.protocol_detection_timeout)
        )
    else:
        listener.listener_filters_timeout.CopyFrom(duration(0))
    _add_chains(ctx, listener, entry)
    return listener


def _add_chains(ctx: SidecarContext, listener: listener_pb2.Listener, entry: OutboundEntry) -> None:
    """A match-all chain becomes the default chain, so traffic that starts matching a chain
    and then fails a later criterion is not dropped (istio/istio#26079)."""
    stat_prefix = delimited_stat_prefix(f"outbound_{listener.name}")
    for opts in entry.chains:
        chain = lc_pb2.FilterChain(
            transport_socket_connect_timeout=seconds(TRANSPORT_SOCKET_CONNECT_TIMEOUT_S)
        )
        if opts.metadata is not None:
            chain.metadata.CopyFrom(opts.metadata)
        if opts.rds is not None:
            chain.filters.append(hcm_filter(outbound_hcm(stat_prefix, opts.rds)))
        else:
            chain.filters.extend(opts.network_filters)
        match = opts.to_match()
        if match is None:
            listener.default_filter_chain.CopyFrom(chain)
        else:
            chain.filter_chain_match.CopyFrom(match)
            listener.filter_chains.append(chain)
    if listener.HasField("default_filter_chain") and not listener.filter_chains:
        # A single chain needs no default (Istio keeps the older shape).
        listener.filter_chains.append(listener.default_filter_chain)
        listener.ClearField("default_filter_chain")
    elif not listener.HasField("default_filter_chain"):
        passthrough = lc_pb2.FilterChain(
            name=PASSTHROUGH_FILTER_CHAIN, filters=catch_all_filters(ctx)
        )
        passthrough.filter_chain_match.SetInParent()
        listener.default_filter_chain.CopyFrom(passthrough)
