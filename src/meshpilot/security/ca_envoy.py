"""The CA port's front Envoy: its bootstrap (built as protobuf, written 0600).

    listener  host:port, TLS with the control plane's serving certificate (ALPN h2), HTTP/2
              only, one route: /istio.v1.auth.IstioCertificateService/ to the CA
    cluster   the CA's HTTP/1.1 Unix socket (ca_http.py), trailers enabled, so the gRPC
              status travels back as an HTTP/1.1 trailer

No admin endpoint (nothing to reach it by), no access log, no stats, no request ids. The
bootstrap carries the serving key inline, so the file is private (0600, in a 0700
directory) and removed on stop.

Why not Envoy's grpc_http1_reverse_bridge: it maps the upstream's HTTP status to a gRPC
code and drops the message, so a refused CSR would reach the agent as a bare
PERMISSION_DENIED; it also cost more Envoy CPU per call (150-200 us against 110-140 us
for the echo call, README B7).
"""

from __future__ import annotations

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, protocol_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.metrics.v3 import stats_pb2
from envoy.config.overload.v3 import overload_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.resource_monitors.downstream_connections.v3 import (
    downstream_connections_pb2,
)
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as upstream_pb2

from meshpilot.security.ca_api import SERVICE_NAME
from meshpilot.xds.protos import boolean, pack, seconds, u32

__all__ = ["front_bootstrap"]

CLUSTER = "meshpilot_ca"
# Calls in flight to the CA: a mesh cold start queues thousands; Envoy's defaults (1024)
# would turn the excess into 503s instead of letting them wait their turn.
_MAX_REQUESTS = 100_000
_MAX_CONNECTIONS = 50_000  # proxies connected at once, each for one call or a few


def front_bootstrap(
    host: str, port: int, chain_pem: bytes, key_pem: bytes, upstream_socket: str
) -> bootstrap_pb2.Bootstrap:
    connections = downstream_connections_pb2.DownstreamConnectionsConfig(
        max_active_downstream_connections=_MAX_CONNECTIONS
    )
    return bootstrap_pb2.Bootstrap(
        node=base_pb2.Node(id="meshpilot-ca-front", cluster="meshpilot-ca"),
        static_resources=bootstrap_pb2.Bootstrap.StaticResources(
            listeners=[_listener(host, port, chain_pem, key_pem)],
            clusters=[_cluster(upstream_socket)],
        ),
        # Nobody reads this Envoy's stats (no admin): recording them is CPU per call.
        stats_config=stats_pb2.StatsConfig(stats_matcher=stats_pb2.StatsMatcher(reject_all=True)),
        overload_manager=overload_pb2.OverloadManager(
            resource_monitors=[
                overload_pb2.ResourceMonitor(
                    name="envoy.resource_monitors.global_downstream_max_connections",
                    typed_config=pack(connections),
                )
            ]
        ),
    )


def _listener(host: str, port: int, chain_pem: bytes, key_pem: bytes) -> listener_pb2.Listener:
    tls = tls_pb2.DownstreamTlsContext(
        common_tls_context=tls_pb2.CommonTlsContext(
            alpn_protocols=["h2"],
            tls_certificates=[
                common_pb2.TlsCertificate(
                    certificate_chain=base_pb2.DataSource(inline_bytes=chain_pem),
                    private_key=base_pb2.DataSource(inline_bytes=key_pem),
                )
            ],
        )
    )
    route = route_pb2.RouteConfiguration(
        name="ca",
        virtual_hosts=[
            route_components_pb2.VirtualHost(
                name="ca",
                domains=["*"],
                routes=[
                    route_components_pb2.Route(
                        match=route_components_pb2.RouteMatch(prefix=f"/{SERVICE_NAME}/"),
                        route=route_components_pb2.RouteAction(
                            cluster=CLUSTER, timeout=seconds(30)
                        ),
                    )
                ],
            )
        ],
    )
    manager = hcm_pb2.HttpConnectionManager(
        stat_prefix="ca",
        codec_type=hcm_pb2.HttpConnectionManager.HTTP2,
        route_config=route,
        use_remote_address=boolean(True),
        generate_request_id=boolean(False),
        http_filters=[
            hcm_pb2.HttpFilter(
                name="envoy.filters.http.router",
                typed_config=pack(router_pb2.Router(suppress_envoy_headers=True)),
            )
        ],
    )
    return listener_pb2.Listener(
        name="ca",
        address=address_pb2.Address(
            socket_address=address_pb2.SocketAddress(address=host, port_value=port)
        ),
        filter_chains=[
            listener_components_pb2.FilterChain(
                transport_socket=base_pb2.TransportSocket(
                    name="envoy.transport_sockets.tls", typed_config=pack(tls)
                ),
                filters=[
                    listener_components_pb2.Filter(
                        name="envoy.filters.network.http_connection_manager",
                        typed_config=pack(manager),
                    )
                ],
            )
        ],
    )


def _cluster(upstream_socket: str) -> cluster_pb2.Cluster:
    http1 = upstream_pb2.HttpProtocolOptions(
        explicit_http_config=upstream_pb2.HttpProtocolOptions.ExplicitHttpConfig(
            http_protocol_options=protocol_pb2.Http1ProtocolOptions(enable_trailers=True)
        )
    )
    limits = circuit_breaker_pb2.CircuitBreakers.Thresholds(
        max_connections=u32(1024),
        max_pending_requests=u32(_MAX_REQUESTS),
        max_requests=u32(_MAX_REQUESTS),
    )
    endpoint = endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(
            address=address_pb2.Address(pipe=address_pb2.Pipe(path=upstream_socket))
        )
    )
    cluster = cluster_pb2.Cluster(
        name=CLUSTER,
        type=cluster_pb2.Cluster.STATIC,
        connect_timeout=seconds(1),
        circuit_breakers=circuit_breaker_pb2.CircuitBreakers(thresholds=[limits]),
        load_assignment=endpoint_pb2.ClusterLoadAssignment(
            cluster_name=CLUSTER,
            endpoints=[endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=[endpoint])],
        ),
    )
    cluster.typed_extension_protocol_options[
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ].CopyFrom(pack(http1))
    return cluster
