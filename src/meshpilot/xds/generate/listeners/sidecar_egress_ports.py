"""Sidecar egress listeners with a `port` (Istio's buildSidecarOutboundListeners for an
egress listener that is not the catch-all).

Each such entry gets a listener on its port carrying only the services of its own `hosts`
that have that port, with the entry's declared protocol. Where it listens:
- `bind` set: on that address (`<bind>_<port>`);
- bound to the port (captureMode NONE, or DEFAULT on an interceptionMode NONE proxy):
  on 127.0.0.1, `bind_to_port` left true;
- otherwise as the catch-all would (HTTP on the wildcard, TCP on the service VIP), reached
  through virtualOutbound (`bind_to_port: false`).
The catch-all egress (no port) then adds nothing on these ports: the port listener takes
precedence, as in Istio, where the listener built first for a port wins.
"""

from __future__ import annotations

from dataclasses import replace

from meshpilot.config.istio.sidecar import IstioEgressListener
from meshpilot.model.sidecar_scope import EgressHost
from meshpilot.registry.model import Protocol, parse_protocol
from meshpilot.xds.generate.listeners.context import SidecarContext
from meshpilot.xds.generate.listeners.outbound import OutboundTarget
from meshpilot.xds.generate.listeners.sidecar_ingress import binds_to_port

__all__ = ["port_egress_targets"]


def port_egress_targets(ctx: SidecarContext) -> list[OutboundTarget]:
    """The service ports every port-carrying egress entry places, in the Sidecar's order."""
    out: list[OutboundTarget] = []
    for egress in ctx.scope.port_egress:
        out.extend(_entry_targets(ctx, egress))
    return out


def _entry_targets(ctx: SidecarContext, egress: IstioEgressListener) -> list[OutboundTarget]:
    assert egress.port is not None
    number = egress.port.number
    declared = parse_protocol(egress.port.protocol) if egress.port.protocol else None
    bind_to_port = binds_to_port(ctx, egress.capture_mode)
    bind = egress.bind or (ctx.localhost if bind_to_port else "")
    sidecar_ns = ctx.scope.sidecar.namespace if ctx.scope.sidecar else ctx.scope.namespace
    hosts = [EgressHost.parse(h, sidecar_ns) for h in egress.hosts]
    out = []
    for svc in ctx.scope.services:
        if svc.is_alias or not any(h.matches(svc) for h in hosts):
            continue  # ExternalName aliases get no listener (Istio Alias resolution)
        port = svc.port(number)
        if port is None or port.protocol is Protocol.UDP:
            continue
        if declared is not None and declared is not Protocol.AUTO:
            port = replace(port, protocol=declared)
        out.append(OutboundTarget(svc, port, bind, bind_to_port))
    return out
