"""Sidecar listeners (LDS), as istiod builds them.

- `virtualOutbound` (15001) and `virtualInbound` (15006): the capture listeners
  (virtual.py), present when traffic is captured by iptables.
- per-port outbound listeners `0.0.0.0_<port>` / `<vip>_<port>` (outbound.py, with the TCP
  and TLS chains in outbound_tcp.py and the HCM in hcm.py).
- inbound chains per served port inside virtualInbound (inbound.py), whose variants per mTLS
  mode come from the PeerAuthentication seam (inbound_tls.py).

Listeners are returned sorted by name; chain order inside a listener is Istio's.
"""

from __future__ import annotations

from collections.abc import Collection

from envoy.config.listener.v3 import listener_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.extensions import apply_wasm_plugins
from meshpilot.xds.generate.listeners.context import build_context
from meshpilot.xds.generate.listeners.inbound import inbound_filter_chains
from meshpilot.xds.generate.listeners.outbound_cache import shared_outbound_listeners
from meshpilot.xds.generate.listeners.sidecar_ingress import (
    ingress_chain_configs,
    ingress_listeners,
)
from meshpilot.xds.generate.listeners.virtual import virtual_inbound
from meshpilot.xds.generate.telemetry import apply_telemetry

__all__ = ["generate_sidecar_listeners"]


def generate_sidecar_listeners(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[listener_pb2.Listener]:
    """All listeners of one sidecar; `names` (LDS is normally a wildcard subscription)
    narrows the answer when given."""
    ctx = build_context(push, proxy)
    listeners = shared_outbound_listeners(ctx)
    ingress = ingress_chain_configs(ctx) if ctx.scope.ingress is not None else None
    if proxy.intercept:
        listeners.append(virtual_inbound(ctx, inbound_filter_chains(ctx, ingress)))
    # interceptionMode NONE has no inbound listeners but those a Sidecar's `ingress` binds:
    # binding the app's service ports would clash with the app.
    listeners.extend(ingress_listeners(ctx))
    if names:
        listeners = [lst for lst in listeners if lst.name in names]
    # Access logs, tracing and WasmPlugins depend on the workload, not its class: added
    # after the cache.
    decorated = apply_telemetry(push, proxy, sorted(listeners, key=lambda lst: lst.name))
    return apply_wasm_plugins(push, proxy, decorated)
