"""Inbound clusters of a Sidecar's `ingress` listeners (Istio's buildInboundClusters with a
SidecarScope that has ingress), one `inbound|<port>||` per entry.

Where the entry's defaultEndpoint delivers:
- empty: ORIGINAL_DST from 127.0.0.6, like a service-derived inbound cluster;
- `127.0.0.1:PORT`: STATIC to localhost;
- `0.0.0.0:PORT`: STATIC to the pod's (first IPv4) address, localhost when it has none;
- `unix:///path`: STATIC to the Unix domain socket.
The entry's connectionPool, else the Sidecar's inboundConnectionPool, sets the circuit
breakers.
"""

from __future__ import annotations

import ipaddress

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2

from meshpilot.config.istio.destination_rule import ConnectionPoolSettings, TrafficPolicy
from meshpilot.config.istio.sidecar import IstioIngressListener
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import parse_protocol
from meshpilot.xds.generate.clusters.common import (
    MAX_DURATION_SECONDS,
    attach_protocol_options,
    base_cluster,
    protocol_options,
)
from meshpilot.xds.generate.clusters.traffic_policy import apply_traffic_policy
from meshpilot.xds.names import INBOUND_PASSTHROUGH_BIND_IPV4, inbound_cluster

__all__ = ["build_ingress_clusters", "default_endpoint_address"]

UNIX_PREFIX = "unix://"
LOCALHOST = "127.0.0.1"
POD_IP = "0.0.0.0"


def default_endpoint_address(default_endpoint: str, proxy: Proxy) -> tuple[str, int]:
    """(address, port) a defaultEndpoint delivers to; ("", 0) for ORIGINAL_DST passthrough,
    (`unix://...`, 0) for a Unix socket."""
    if not default_endpoint:
        return "", 0
    if default_endpoint.startswith(UNIX_PREFIX):
        return default_endpoint, 0
    host, _, port = default_endpoint.rpartition(":")
    host = host.strip("[]")
    if host == POD_IP:
        ipv4 = [ip for ip in proxy.ip_addresses if ipaddress.ip_address(ip).version == 4]
        host = ipv4[0] if ipv4 else LOCALHOST
    return host, int(port)


def build_ingress_clusters(push: PushContext, proxy: Proxy) -> list[cluster_pb2.Cluster]:
    scope = push.sidecar_scope(proxy)
    sidecar_pool = scope.sidecar.model.spec.inbound_connection_pool if scope.sidecar else None
    out: dict[str, cluster_pb2.Cluster] = {}
    for ingress in scope.ingress or ():
        name = inbound_cluster(ingress.port.number)
        if name not in out:  # the first entry of a port wins, as for the listener
            out[name] = _cluster(push, proxy, name, ingress, sidecar_pool)
    return [out[n] for n in sorted(out)]


def _cluster(
    push: PushContext,
    proxy: Proxy,
    name: str,
    ingress: IstioIngressListener,
    sidecar_pool: ConnectionPoolSettings | None,
) -> cluster_pb2.Cluster:
    address, port = default_endpoint_address(ingress.default_endpoint, proxy)
    if address:
        cluster = base_cluster(name, cluster_pb2.Cluster.STATIC, push.mesh.connect_timeout)
        cluster.load_assignment.cluster_name = name
        endpoint = ec_pb2.Endpoint(address=_address(address, port))
        cluster.load_assignment.endpoints.append(
            ec_pb2.LocalityLbEndpoints(lb_endpoints=[ec_pb2.LbEndpoint(endpoint=endpoint)])
        )
    else:
        cluster = base_cluster(name, cluster_pb2.Cluster.ORIGINAL_DST, push.mesh.connect_timeout)
        cluster.cleanup_interval.seconds = MAX_DURATION_SECONDS
    pool = ingress.connection_pool or sidecar_pool
    policy = TrafficPolicy(connection_pool=pool) if pool is not None else None
    protocol = parse_protocol(ingress.port.protocol)
    options = apply_traffic_policy(cluster, policy, protocol_options(protocol, sniff=True))
    if not address:
        cluster.lb_policy = cluster_pb2.Cluster.CLUSTER_PROVIDED
        bind = cluster.upstream_bind_config.source_address
        bind.address = INBOUND_PASSTHROUGH_BIND_IPV4
        bind.port_value = 0
    attach_protocol_options(cluster, options)
    return cluster


def _address(address: str, port: int) -> address_pb2.Address:
    if address.startswith(UNIX_PREFIX):
        return address_pb2.Address(pipe=address_pb2.Pipe(path=address[len(UNIX_PREFIX) :]))
    return address_pb2.Address(
        socket_address=address_pb2.SocketAddress(address=address, port_value=port)
    )
