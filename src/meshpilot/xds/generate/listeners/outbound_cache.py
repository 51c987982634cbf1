"""Outbound listeners shared by the sidecars of a class, built once per push.

The outbound side (per-port listeners and virtualOutbound) is decided by the proxy's class
(scope, capture, DestinationRules), its IP family, TPROXY or not, and two workload details
that rarely matter: the labels a mesh VirtualService's tcp/tls `sourceLabels` ask about, and the
proxy's own IP when it is an endpoint of a headless service (it gets no listener for
itself). The cache key holds exactly those, so a second sidecar of the class is a hit.
"""

from __future__ import annotations

from envoy.config.listener.v3 import listener_pb2

from meshpilot.xds.cache import cache_for
from meshpilot.xds.generate.listeners.context import SidecarContext
from meshpilot.xds.generate.listeners.outbound import (
    build_outbound_listeners,
    per_endpoint_addresses,
)
from meshpilot.xds.generate.listeners.sidecar_egress_ports import port_egress_targets
from meshpilot.xds.generate.listeners.virtual import virtual_outbound

__all__ = ["shared_outbound_listeners"]

_FACTS = "lds.outbound.facts"


def shared_outbound_listeners(ctx: SidecarContext) -> list[listener_pb2.Listener]:
    """The per-port outbound listeners, plus virtualOutbound when traffic is captured."""

    def build() -> list[listener_pb2.Listener]:
        out = build_outbound_listeners(ctx, port_egress_targets(ctx))
        if ctx.proxy.intercept:
            out.append(virtual_outbound(ctx))
        return out

    return list(cache_for(ctx.push).get_or_build(_key(ctx), build).messages)


def _key(ctx: SidecarContext) -> tuple[object, ...]:
    proxy = ctx.proxy
    proxy_class = ctx.push.proxy_class(proxy)
    label_keys, headless = _class_facts(ctx, proxy_class)
    own = proxy.ip_addresses[0] if proxy.ip_addresses else None
    return (
        "lds-outbound",
        proxy_class,
        proxy.namespace,
        ctx.wildcard,
        proxy.tproxy,  # a transparent virtualOutbound
        tuple(proxy.labels.get(k) for k in label_keys),
        own if own in headless else None,
    )


def _class_facts(
    ctx: SidecarContext, proxy_class: tuple[object, ...]
) -> tuple[tuple[str, ...], frozenset[str]]:
    """(label keys mesh VirtualServices' tcp/tls matches test, headless endpoint IPs that
    get listeners): the same for every proxy of a class and namespace."""
    memo = ctx.push.memo.setdefault(_FACTS, {})
    assert isinstance(memo, dict)
    key = (proxy_class, ctx.proxy.namespace)
    found: tuple[tuple[str, ...], frozenset[str]] | None = memo.get(key)
    if found is None:
        keys: set[str] = set()
        for vs in ctx.mesh_virtual_services:
            spec = vs.obj.model.spec
            for tcp in spec.tcp:
                keys.update(k for m in tcp.match for k in m.source_labels)
            for tls in spec.tls:
                keys.update(k for m in tls.match for k in m.source_labels)
        found = memo[key] = (tuple(sorted(keys)), per_endpoint_addresses(ctx))
    return found
