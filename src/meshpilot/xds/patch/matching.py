"""`match` of an EnvoyFilter patch against one generated object, as Istio's envoyfilter
package matches: context, listener (port, name, listener filter, filter chain), route
configuration (port, port name, gateway, virtual host, route), cluster (service, subset,
port, name). The match fields are read as written (JSON or proto names)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2

from meshpilot.xds.patch.selection import ConfigPatch

__all__ = [
    "canonical_filter_name",
    "chain_matches",
    "cluster_matches",
    "context_matches",
    "field",
    "listener_matches",
    "route_config_matches",
    "route_matches",
    "vhost_matches",
]

Match = Mapping[str, Any]
_VIRTUAL = ("virtualInbound", "virtualOutbound")
# Deprecated filter names Istio still matches (xds.ToEnvoyFilterName's table, the ones in use).
_ALIASES = {
    "envoy.http_connection_manager": "envoy.filters.network.http_connection_manager",
    "envoy.tcp_proxy": "envoy.filters.network.tcp_proxy",
    "envoy.router": "envoy.filters.http.router",
    "envoy.cors": "envoy.filters.http.cors",
    "envoy.fault": "envoy.filters.http.fault",
    "envoy.lua": "envoy.filters.http.lua",
    "envoy.listener.tls_inspector": "envoy.filters.listener.tls_inspector",
    "envoy.listener.original_dst": "envoy.filters.listener.original_dst",
    "envoy.listener.http_inspector": "envoy.filters.listener.http_inspector",
}


def canonical_filter_name(name: str) -> str:
    return _ALIASES.get(name, name)


def field(match: Match | None, camel: str) -> Any:
    """A match field by its JSON name or its proto (snake case) name."""
    if not match:
        return None
    if camel in match:
        return match[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return match.get(snake)


def context_matches(patch: ConfigPatch, context: str) -> bool:
    return patch.context in ("ANY", context)


def listener_matches(listener: listener_pb2.Listener, match: Match | None) -> bool:
    if not match:
        return True
    name = field(match, "name")
    if name and name != listener.name:
        return False
    port = field(match, "portNumber")
    # The virtual listeners carry their ports in filter chain matches (chain_matches
    # narrows to them); Istio skips the port here, so a LISTENER patch naming any port
    # would reach them: meshpilot asks for a chain of that port.
    if port and listener.name in _VIRTUAL:
        if not any(
            c.filter_chain_match.destination_port.value == int(port) for c in listener.filter_chains
        ):
            return False
    elif port and listener.address.socket_address.port_value != int(port):
        return False
    wanted = field(match, "listenerFilter")
    if not wanted:
        return True
    wanted = canonical_filter_name(wanted)
    return any(canonical_filter_name(f.name) == wanted for f in listener.listener_filters)


def chain_matches(
    listener: listener_pb2.Listener, chain: listener_components_pb2.FilterChain, match: Match | None
) -> bool:
    if not match:
        return True
    fcm = chain.filter_chain_match
    port = field(match, "portNumber")
    if port and listener.name in _VIRTUAL and fcm.destination_port.value != int(port):
        return False
    wanted = field(match, "filterChain")
    if not wanted:
        return True
    name = field(wanted, "name")
    if name and name != chain.name:
        return False
    sni = field(wanted, "sni")
    if sni and sni not in fcm.server_names:
        return False
    transport = field(wanted, "transportProtocol")
    if transport and fcm.transport_protocol != transport:
        return False
    protocols = field(wanted, "applicationProtocols")
    if protocols and not all(p in fcm.application_protocols for p in str(protocols).split(",")):
        return False
    destination = field(wanted, "destinationPort")
    return not destination or (
        fcm.HasField("destination_port") and fcm.destination_port.value == int(destination)
    )


def route_config_matches(name: str, gateway: bool, match: Match | None) -> bool:
    """By the route config's name: `<port>` (sidecar outbound), `inbound|<port>||`, and
    `http.<port>` or `https.<port>.<port name>.<gateway>.<namespace>` (gateways)."""
    if not match:
        return True
    port, port_name, gateway_name = _parse_route_name(name, gateway)
    wanted_port = field(match, "portNumber")
    if wanted_port and int(wanted_port) != port:
        return False
    if gateway:
        if (wanted := field(match, "portName")) and wanted != port_name:
            return False
        if (wanted := field(match, "gateway")) and wanted != gateway_name:
            return False
    wanted_name = field(match, "name")
    return not wanted_name or wanted_name == name


def _parse_route_name(name: str, gateway: bool) -> tuple[int, str, str]:
    if gateway:
        if name.startswith("http."):
            rest = name.removeprefix("http.")
            return (int(rest) if rest.isdigit() else 0), "", ""
        parts = name.split(".")
        if name.startswith("https.") and len(parts) == 5 and parts[1].isdigit():
            return int(parts[1]), parts[2], f"{parts[4]}/{parts[3]}"
        return 0, "", ""
    port = name.split("|")[1] if name.startswith("inbound|") else name.rpartition(":")[2]
    return (int(port) if port.isdigit() else 0), "", ""


def vhost_matches(vhost: route_components_pb2.VirtualHost, match: Match | None) -> bool:
    wanted = field(match, "vhost")
    if not wanted:
        return True
    name = field(wanted, "name")
    if name and name != vhost.name:
        return False
    domain = field(wanted, "domainName")
    return not domain or domain in vhost.domains


def route_matches(route: route_components_pb2.Route, match: Match | None) -> bool:
    wanted = field(field(match, "vhost"), "route")
    if not wanted:
        return True
    name = field(wanted, "name")
    if name and name != route.name:
        return False
    action = field(wanted, "action") or "ANY"
    kinds = {"ROUTE": "route", "REDIRECT": "redirect", "DIRECT_RESPONSE": "direct_response"}
    return action == "ANY" or route.WhichOneof("action") == kinds.get(action)


def cluster_matches(cluster: cluster_pb2.Cluster, match: Match | None) -> bool:
    """By name, or by the parts of an `outbound|<port>|<subset>|<host>` name."""
    if not match:
        return True
    name = field(match, "name")
    if name:
        return bool(name == cluster.name)
    parts = cluster.name.split("|")
    direction, port, subset, host = parts if len(parts) == 4 else ("", "", "", "")
    if (wanted := field(match, "subset")) and wanted != subset:
        return False
    if (wanted := field(match, "service")) and (direction != "outbound" or wanted != host):
        return False
    wanted_port = field(match, "portNumber")
    return not wanted_port or (port.isdigit() and int(port) == int(wanted_port))
