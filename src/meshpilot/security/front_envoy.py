"""The control plane's front Envoy: its bootstrap (built as protobuf, written 0600).

    listeners one per front port, TLS with the control plane's serving certificate (ALPN h2),
              HTTP/2 only: /istio.v1.auth.IstioCertificateService/ to the CA; on the secure
              port (15012) everything else (ADS) to grpc.aio
    clusters  the CA's HTTP/1.1 Unix socket (ca_http.py), trailers enabled, so the gRPC
              status travels back as an HTTP/1.1 trailer; grpc.aio's private Unix socket
              (HTTP/2 in the clear) for ADS streams

No admin endpoint (nothing to reach it by), no access log, no stats, no request ids. The
bootstrap carries the serving key inline, so the file is private (0600, in a 0700
directory) and removed on stop.

Why not Envoy's grpc_http1_reverse_bridge: it maps the upstream's HTTP status to a gRPC
code and drops the message, so a refused CSR would reach the agent as a bare
PERMISSION_DENIED; it also costs Envoy more CPU per call than plain HTTP/1.1 with
trailers (docs/benchmarks.md, B7).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
from meshpilot.xds.grpc_service import PEER_HEADER
from meshpilot.xds.protos import boolean, pack, seconds, u32

__all__ = ["FrontPort", "front_bootstrap"]

CLUSTER = "meshpilot_ca"
XDS_CLUSTER = "meshpilot_xds"
# Calls in flight to the CA: a mesh cold start queues thousands; Envoy's defaults (1024)
# would turn the excess into 503s instead of letting them wait their turn.
_MAX_REQUESTS = 100_000
_MAX_CONNECTIONS = 50_000  # proxies connected at once, each for one call or a few
# ADS streams in flight to grpc.aio: one per connected proxy, for as long as it is connected.
_MAX_STREAMS = 100_000


@dataclass(frozen=True, slots=True)
class FrontPort:
    """One listener of the front Envoy: `xds` ports carry ADS too (15012), others the CA
    alone (15011). With `path`, a Unix socket instead of host:port (`--secure-uds`)."""

    name: str
    host: str
    port: int
    xds: bool
    path: str = ""


def front_bootstrap(
    ports: Sequence[FrontPort],
    chain_pem: bytes,
    key_pem: bytes,
    ca_socket: str,
    xds_socket: str = "",
    client_roots_pem: bytes = b"",
) -> bootstrap_pb2.Bootstrap:
    """With `client_roots_pem`, callers may present a certificate chaining to those roots
    (renewal by the current certificate). Raises ValueError if a port carries ADS but no
    `xds_socket` is given."""
    if any(p.xds for p in ports) and not xds_socket:
        raise ValueError("an xDS front port needs the ADS server's socket")
    connections = downstream_connections_pb2.DownstreamConnectionsConfig(
        max_active_downstream_connections=_MAX_CONNECTIONS
    )
    clusters = [_ca_cluster(ca_socket)]
    if xds_socket:
        clusters.append(_xds_cluster(xds_socket))
    return bootstrap_pb2.Bootstrap(
        node=base_pb2.Node(id="meshpilot-front", cluster="meshpilot-front"),
        static_resources=bootstrap_pb2.Bootstrap.StaticResources(
            listeners=[_listener(p, chain_pem, key_pem, client_roots_pem) for p in ports],
            clusters=clusters,
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


def _listener(
    front: FrontPort, chain_pem: bytes, key_pem: bytes, client_roots_pem: bytes
) -> listener_pb2.Listener:
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
    if client_roots_pem:
        # Istio's 15012: a client certificate is asked for, not required; one that does not
        # chain to the mesh roots fails the handshake.
        tls.common_tls_context.validation_context.trusted_ca.inline_bytes = client_roots_pem
        tls.require_client_certificate.value = False
    routes = [
        route_components_pb2.Route(
            match=route_components_pb2.RouteMatch(prefix=f"/{SERVICE_NAME}/"),
            route=route_components_pb2.RouteAction(cluster=CLUSTER, timeout=seconds(30)),
        )
    ]
    if front.xds:
        # ADS streams last as long as the proxy is connected: no route timeout.
        routes.append(
            route_components_pb2.Route(
                match=route_components_pb2.RouteMatch(prefix="/"),
                route=route_components_pb2.RouteAction(cluster=XDS_CLUSTER, timeout=seconds(0)),
            )
        )
    route = route_pb2.RouteConfiguration(
        name=front.name,
        virtual_hosts=[
            route_components_pb2.VirtualHost(
                name=front.name,
                domains=["*"],
                routes=routes,
                # Who called (the connection's, never x-forwarded-for's: Envoy's own gRPC client
                # sends one), for logs and /debug/syncz; whatever the caller sent is replaced.
                request_headers_to_add=[
                    base_pb2.HeaderValueOption(
                        header=base_pb2.HeaderValue(
                            key=PEER_HEADER, value="%DOWNSTREAM_DIRECT_REMOTE_ADDRESS%"
                        ),
                        append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
                    )
                ],
            )
        ],
    )
    manager = hcm_pb2.HttpConnectionManager(
        stat_prefix=front.name,
        codec_type=hcm_pb2.HttpConnectionManager.HTTP2,
        route_config=route,
        generate_request_id=boolean(False),
        # The verified client certificate goes to the CA as x-forwarded-client-cert (the
        # only one: whatever the caller sent under that name is dropped first).
        forward_client_cert_details=hcm_pb2.HttpConnectionManager.SANITIZE_SET,
        set_current_client_cert_details=hcm_pb2.HttpConnectionManager.SetCurrentClientCertDetails(
            cert=True
        ),
        # Envoy's default resets a stream after 5 minutes without a frame: an ADS stream is
        # quiet for as long as the configuration does not change.
        stream_idle_timeout=seconds(0) if front.xds else None,
        http_filters=[
            hcm_pb2.HttpFilter(
                name="envoy.filters.http.router",
                typed_config=pack(router_pb2.Router(suppress_envoy_headers=True)),
            )
        ],
    )
    return listener_pb2.Listener(
        name=front.name,
        address=_address(front),
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


def _address(front: FrontPort) -> address_pb2.Address:
    if front.path:
        # Anyone on the host may connect, as to the TCP port on the loopback: the socket
        # is TLS, and who is calling is proven per call (token or certificate). A mode set
        # here also holds after Envoy is restarted and makes the socket again.
        return address_pb2.Address(pipe=address_pb2.Pipe(path=front.path, mode=0o666))
    return address_pb2.Address(
        socket_address=address_pb2.SocketAddress(address=front.host, port_value=front.port)
    )


def _ca_cluster(upstream_socket: str) -> cluster_pb2.Cluster:
    http1 = upstream_pb2.HttpProtocolOptions(
        explicit_http_config=upstream_pb2.HttpProtocolOptions.ExplicitHttpConfig(
            http_protocol_options=protocol_pb2.Http1ProtocolOptions(enable_trailers=True)
        )
    )
    return _unix_cluster(CLUSTER, upstream_socket, http1, _MAX_REQUESTS)


def _xds_cluster(upstream_socket: str) -> cluster_pb2.Cluster:
    http2 = upstream_pb2.HttpProtocolOptions(
        explicit_http_config=upstream_pb2.HttpProtocolOptions.ExplicitHttpConfig(
            http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
        )
    )
    return _unix_cluster(XDS_CLUSTER, upstream_socket, http2, _MAX_STREAMS)


def _unix_cluster(
    name: str,
    upstream_socket: str,
    protocol: upstream_pb2.HttpProtocolOptions,
    max_requests: int,
) -> cluster_pb2.Cluster:
    # Envoy's defaults (1024 requests) would turn the 1025th proxy's call into a 503.
    limits = circuit_breaker_pb2.CircuitBreakers.Thresholds(
        max_connections=u32(1024),
        max_pending_requests=u32(max_requests),
        max_requests=u32(max_requests),
    )
    endpoint = endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(
            address=address_pb2.Address(pipe=address_pb2.Pipe(path=upstream_socket))
        )
    )
    cluster = cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.STATIC,
        connect_timeout=seconds(1),
        circuit_breakers=circuit_breaker_pb2.CircuitBreakers(thresholds=[limits]),
        load_assignment=endpoint_pb2.ClusterLoadAssignment(
            cluster_name=name,
            endpoints=[endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=[endpoint])],
        ),
    )
    cluster.typed_extension_protocol_options[
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ].CopyFrom(pack(protocol))
    return cluster
