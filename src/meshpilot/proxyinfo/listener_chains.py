"""istioctl's words for a listener's filter chains: what a chain matches (`SNI: ...;
Trans: tls; App: HTTP; Addr: 10.0.0.0/8:80`, or `ALL`), where it sends traffic
(`Route: 9080`, `Cluster: outbound|...`, `PassthroughCluster`, `Inline Route: ...`,
`Non-HTTP/Non-TCP`) and the listener's type (HTTP, TCP, HTTP+TCP, UNKNOWN)."""

from __future__ import annotations

from meshpilot.proxyinfo.fields import JsonObject, integer, obj, objs, strings, text
from meshpilot.proxyinfo.route_text import describe_inline_routes
from meshpilot.xds.names import BLACKHOLE_CLUSTER

__all__ = ["chain_destination", "chain_match", "filter_chains", "listener_type"]

HCM = "envoy.filters.network.http_connection_manager"
TCP_PROXY = "envoy.filters.network.tcp_proxy"

# Known ALPN lists and istioctl's names for them.
_ALPN_NAMES = (
    (
        "App: HTTP TLS",
        ["http/1.0", "http/1.1", "h2c", "istio-http/1.0", "istio-http/1.1", "istio-h2"],
    ),
    ("App: Istio HTTP Plain", ["istio", "istio-http/1.0", "istio-http/1.1", "istio-h2"]),
    ("App: TCP TLS", ["istio-peer-exchange", "istio"]),
    ("App: HTTP", ["http/1.0", "http/1.1", "h2c"]),
)


def filter_chains(listener: JsonObject) -> list[JsonObject]:
    chains = objs(listener, "filter_chains")
    if default := obj(listener, "default_filter_chain"):
        chains.append(default)
    return chains


def chain_match(chain: JsonObject) -> str:
    match = obj(chain, "filter_chain_match")
    described = []
    if names := strings(match, "server_names"):
        described.append(f"SNI: {','.join(names)}")
    if transport := text(match, "transport_protocol"):
        described.append(f"Trans: {transport}")
    if alpn := strings(match, "application_protocols"):
        named = next((label for label, known in _ALPN_NAMES if alpn == known), "")
        described.append(named or f"App: {','.join(alpn)}")
    port = f":{integer(match, 'destination_port')}" if "destination_port" in match else ""
    if ranges := objs(match, "prefix_ranges"):
        prefixes = [f"{text(r, 'address_prefix')}/{integer(r, 'prefix_len')}" for r in ranges]
        described.append(f"Addr: {','.join(prefixes)}{port}")
    elif port:
        described.append(f"Addr: *{port}")
    return "; ".join(described) or "ALL"


def _tcp_cluster(config: JsonObject) -> str:
    if cluster := text(config, "cluster"):
        return cluster
    weighted = objs(config, "weighted_clusters", "clusters")
    return ",".join(text(c, "name") for c in weighted)


def _is_blackhole(tcp: JsonObject) -> bool:
    config = obj(tcp, "typed_config")
    return BLACKHOLE_CLUSTER in (_tcp_cluster(config), text(config, "stat_prefix"))


def chain_destination(chain: JsonObject) -> str:
    for network_filter in objs(chain, "filters"):
        name = text(network_filter, "name")
        config = obj(network_filter, "typed_config")
        if name == HCM:
            if inline := obj(config, "route_config"):
                return describe_inline_routes(inline)
            if route := text(config, "rds", "route_config_name"):
                return f"Route: {route}"
            return "HTTP"
        if name == TCP_PROXY and not _is_blackhole(network_filter):
            cluster = _tcp_cluster(config)
            return cluster if "Cluster" in cluster else f"Cluster: {cluster}"
    return "Non-HTTP/Non-TCP"


def listener_type(listener: JsonObject) -> str:
    http = tcp = 0
    for chain in filter_chains(listener):
        for network_filter in objs(chain, "filters"):
            name = text(network_filter, "name")
            if name == HCM:
                http += 1
            elif name == TCP_PROXY and not _is_blackhole(network_filter):
                tcp += 1
    if http:
        return "HTTP+TCP" if tcp else "HTTP"
    return "TCP" if tcp else "UNKNOWN"
