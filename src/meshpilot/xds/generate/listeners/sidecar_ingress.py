"""Sidecar `ingress` listeners (Istio's buildInboundChainConfigs for a Sidecar with ingress).

A Sidecar with `ingress` replaces the service-derived inbound ports: each entry serves its
`port.number` with its declared protocol, into the inbound cluster `inbound|<port>||`
(which delivers to the entry's defaultEndpoint, clusters/sidecar_ingress.py).

- captured (captureMode DEFAULT on a capturing proxy, or IPTABLES): a chain set inside
  virtualInbound, matched by destination_port, with the PeerAuthentication variants;
- bound (captureMode NONE, or DEFAULT on an interceptionMode NONE proxy): a listener of its
  own, `<bind>_<port>` bound on the port (bind defaults to the wildcard).
An entry's `tls` terminates that TLS on the chain instead of the mesh's mTLS (HTTPS then
carries HTTP, as on a gateway). Istio gates this behind ENABLE_TLS_ON_SIDECAR_INGRESS (off
by default); meshpilot always honours a `tls` that is written.
"""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2

from meshpilot.config.istio.sidecar import IstioIngressListener
from meshpilot.registry.model import Protocol, parse_protocol
from meshpilot.xds.generate.gateway.tls import downstream_tls_context
from meshpilot.xds.generate.listeners.chain_opts import PLAINTEXT_HTTP_ALPNS, TLS
from meshpilot.xds.generate.listeners.context import SidecarContext
from meshpilot.xds.generate.listeners.filters import http_inspector, socket_address, tls_inspector
from meshpilot.xds.generate.listeners.inbound import (
    InboundChainConfig,
    chain_protocol,
    port_chains,
)
from meshpilot.xds.generate.security.apply import secure_inbound_chains
from meshpilot.xds.generate.service_targets import service_targets
from meshpilot.xds.names import inbound_cluster, listener_name
from meshpilot.xds.protos import duration

__all__ = ["binds_to_port", "ingress_chain_configs", "ingress_listeners"]

CAPTURE_NONE = "NONE"
CAPTURE_DEFAULT = ("", "DEFAULT")


def binds_to_port(ctx: SidecarContext, capture_mode: str) -> bool:
    """Istio's getBindToPort: NONE binds; DEFAULT binds only when the proxy does not capture."""
    if capture_mode in CAPTURE_DEFAULT:
        return not ctx.proxy.intercept
    return capture_mode == CAPTURE_NONE


def _config(ctx: SidecarContext, ingress: IstioIngressListener, bind: str) -> InboundChainConfig:
    # The entry's port is both what is matched and the cluster's name; where it is
    # delivered is the defaultEndpoint's business.
    port = target = ingress.port.number
    protocol = parse_protocol(ingress.port.protocol)
    tls = None
    if ingress.tls is not None and ingress.tls.mode not in ("", "PASSTHROUGH"):
        if protocol is Protocol.HTTPS:
            protocol = Protocol.HTTP  # terminated here: HTTP inside, as on a gateway
        tls = downstream_tls_context(ingress.tls, tcp_termination=not protocol.is_http)
    return InboundChainConfig(
        cluster=inbound_cluster(target),
        target_port=target,
        service_port=port,
        hostname=_hostname(ctx, target),
        protocol=chain_protocol(protocol),
        http2=protocol.is_http2,
        grpc=protocol in (Protocol.GRPC, Protocol.GRPC_WEB),
        bind=bind,
        tls_context=tls,
    )


def _hostname(ctx: SidecarContext, target_port: int) -> str:
    """The service the workload serves on that port, for the trace operation; else Istio's
    stand-in named after the Sidecar (`<sidecar>.<namespace>`)."""
    for svc, ep in service_targets(ctx.push, ctx.proxy):
        if ep.port == target_port:
            return svc.hostname
    sidecar = ctx.scope.sidecar
    return f"{sidecar.name}.{sidecar.namespace}" if sidecar else ""


def ingress_chain_configs(ctx: SidecarContext) -> list[InboundChainConfig]:
    """The chains virtualInbound carries for the captured ingress entries, by port; the
    first entry of a port wins."""
    by_port: dict[int, InboundChainConfig] = {}
    for ingress in ctx.scope.ingress or ():
        if binds_to_port(ctx, ingress.capture_mode):
            continue
        cc = _config(ctx, ingress, ctx.wildcard)
        by_port.setdefault(cc.target_port, cc)
    return [by_port[p] for p in sorted(by_port)]


def ingress_listeners(ctx: SidecarContext) -> list[listener_pb2.Listener]:
    """Listeners of their own for the ingress entries bound on their port."""
    out: dict[str, listener_pb2.Listener] = {}
    for ingress in ctx.scope.ingress or ():
        if not binds_to_port(ctx, ingress.capture_mode):
            continue
        bind = ingress.bind or ctx.wildcard
        cc = _config(ctx, ingress, bind)
        name = listener_name(bind, ingress.port.number)
        if name in out:
            continue
        chains = secure_inbound_chains(ctx, port_chains(ctx, cc))
        for chain in chains:
            chain.filter_chain_match.ClearField("destination_port")  # the listener's own
        listener = listener_pb2.Listener(
            name=name,
            address=socket_address(bind, ingress.port.number),
            filter_chains=chains,
            traffic_direction=base_pb2.INBOUND,
            continue_on_listener_filters_timeout=True,
        )
        matches = [c.filter_chain_match for c in chains]
        if any(m.transport_protocol == TLS for m in matches):
            listener.listener_filters.append(tls_inspector())
        if any(set(m.application_protocols) & set(PLAINTEXT_HTTP_ALPNS) for m in matches):
            listener.listener_filters.append(http_inspector())
            listener.listener_filters_timeout.CopyFrom(
                duration(ctx.push.mesh.protocol_detection_timeout)
            )
        out[name] = listener
    return list(out.values())
