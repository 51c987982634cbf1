"""The Envoy bootstrap the proxy agent writes, as istio-proxy's pilot-agent renders it.

Pure: `AgentOptions` in, `envoy.config.bootstrap.v3.Bootstrap` out (Istio's template
`tools/packaging/common/envoy_bootstrap.json`):

- node: id `sidecar~<ip>~<pod>.<ns>~<ns>.svc.cluster.local`, cluster `<app>.<ns>`, locality
  from the topology labels, and the metadata Istio's agent sends (NAMESPACE, LABELS, ...);
- admin on 127.0.0.1 only;
- ADS (GRPC or DELTA_GRPC) over the static cluster `xds-grpc`, LDS and CDS from ADS;
  the stream is retried with full jitter, from 100 ms doubling to at most 1 s (Envoy's
  default grows to 30 s: a proxy came back up to 20 s after a control plane restart);
  Istio's Envoy dials pilot-agent's UDS `XDS` proxy; ours dials the control plane directly:
  plaintext (15010), or mTLS (15012) verifying the control plane's certificate against the
  mesh root (`./var/run/secrets/istio/root-cert.pem`) and the name `istiod.istio-system.svc`,
  presenting the workload certificate `default` from the agent's SDS;
- static clusters `prometheus_stats` (admin), `agent` (status server 15020) and `sds-grpc`
  (the agent's SDS socket, relative to Envoy's working directory, as in Istio), `wasm-fetch`
  (the agent's fetcher of http(s) Wasm modules, a socket there too);
- static listeners 0.0.0.0:15090 `/stats/prometheus` and 0.0.0.0:15021 `/healthz/ready`.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from envoy.config.accesslog.v3 import accesslog_pb2
from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2
from envoy.config.core.v3 import (
    address_pb2,
    backoff_pb2,
    base_pb2,
    config_source_pb2,
    extension_pb2,
    grpc_service_pb2,
    protocol_pb2,
)
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.overload.v3 import overload_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.access_loggers.file.v3 import file_pb2
from envoy.extensions.bootstrap.internal_listener.v3 import internal_listener_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.resource_monitors.downstream_connections.v3 import (
    downstream_connections_pb2,
)
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from google.protobuf import struct_pb2

from meshpilot.agent.certs.xds_tls import xds_tls_context
from meshpilot.agent.options import SDS_SOCKET_PATH, AgentOptions, discovery_endpoint
from meshpilot.agent.stats_config import stats_config
from meshpilot.agent.wasm_fetch import WASM_SOCKET_PATH
from meshpilot.config.duration import format_duration
from meshpilot.model.proxy import ProxyType
from meshpilot.registry.workloads import locality_from_labels
from meshpilot.xds.names import SDS_CLUSTER, WASM_FETCH_CLUSTER, XDS_CLUSTER
from meshpilot.xds.protos import Filters, ads_source, duration, pack, seconds, u32

__all__ = [
    "AGENT_CLUSTER",
    "PROMETHEUS_CLUSTER",
    "XDS_RETRY_BASE_S",
    "XDS_RETRY_MAX_S",
    "build_bootstrap",
    "node_metadata",
]

PROMETHEUS_CLUSTER = "prometheus_stats"
AGENT_CLUSTER = "agent"
LOCALHOST = "127.0.0.1"
WILDCARD = "0.0.0.0"
# The ADS stream's reconnect backoff: a proxy is back within ~1 s of its control plane.
XDS_RETRY_BASE_S = 0.1
XDS_RETRY_MAX_S = 1.0
_HTTP_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
# Runtime flag Istio sets: RE2 programs as large as generated regexes need.
_RUNTIME = {"re2.max_program_size.error_level": "32768"}
# Istio's "no connection limit" (its runtime key overload.global_downstream_max_connections,
# deprecated in Envoy 1.40 for this resource monitor).
_MAX_CONNECTIONS = 2147483647


def build_bootstrap(options: AgentOptions) -> bootstrap_pb2.Bootstrap:
    boot = bootstrap_pb2.Bootstrap(
        node=_node(options),
        stats_config=stats_config(
            options.stats_inclusion_prefixes, options.stats_inclusion_regexps
        ),
        admin=_admin(options.ports.envoy_admin),
        dynamic_resources=_dynamic_resources(options),
        static_resources=bootstrap_pb2.Bootstrap.StaticResources(
            clusters=[
                _local_cluster(PROMETHEUS_CLUSTER, options.ports.envoy_admin),
                _local_cluster(AGENT_CLUSTER, options.ports.agent_status),
                _sds_cluster(),
                _wasm_fetch_cluster(),
                _xds_cluster(options),
            ],
            listeners=[
                _static_listener(
                    options.ports.prometheus, "stats", "/stats/prometheus", PROMETHEUS_CLUSTER
                ),
                _static_listener(options.ports.health, "agent", "/healthz/ready", AGENT_CLUSTER),
            ],
        ),
    )
    runtime = struct_pb2.Struct()
    runtime.update(_RUNTIME)
    boot.layered_runtime.layers.add(name="global config", static_layer=runtime)
    boot.layered_runtime.layers.add(name="admin", admin_layer={})
    boot.overload_manager.resource_monitors.append(
        overload_pb2.ResourceMonitor(
            name="envoy.resource_monitors.global_downstream_max_connections",
            typed_config=pack(
                downstream_connections_pb2.DownstreamConnectionsConfig(
                    max_active_downstream_connections=_MAX_CONNECTIONS
                )
            ),
        )
    )
    boot.bootstrap_extensions.append(
        extension_pb2.TypedExtensionConfig(
            name="envoy.bootstrap.internal_listener",
            typed_config=pack(internal_listener_pb2.InternalListener(buffer_size_kb=u32(64))),
        )
    )
    return boot


def node_metadata(options: AgentOptions) -> dict[str, Any]:
    """The node metadata Istio's agent sends (pilot's NodeMetadata JSON names)."""
    meta: dict[str, Any] = {
        "CLUSTER_ID": options.cluster_id,
        "ENVOY_PROMETHEUS_PORT": options.ports.prometheus,
        "ENVOY_STATUS_PORT": options.ports.health,
        "INSTANCE_IPS": ",".join(options.ip_addresses),
        "ISTIO_VERSION": options.istio_version,
        "LABELS": dict(sorted(options.labels.items())),
        "MESH_ID": options.trust_domain,
        "NAME": options.pod_name,
        "NAMESPACE": options.namespace,
        "PROXY_CONFIG": _proxy_config(options),
        "SERVICE_ACCOUNT": options.service_account,
        "WORKLOAD_NAME": options.workload,
    }
    if options.proxy_type is ProxyType.SIDECAR:
        meta["INTERCEPTION_MODE"] = str(options.interception_mode)
    return meta


def _proxy_config(options: AgentOptions) -> dict[str, Any]:
    """The ProxyConfig fields that hold for this proxy (mesh config JSON, camelCase)."""
    return {
        "concurrency": options.concurrency,
        "discoveryAddress": options.discovery_address,
        "drainDuration": f"{options.drain_duration_s}s",
        "proxyAdminPort": options.ports.envoy_admin,
        "serviceCluster": options.service_cluster,
        "statusPort": options.ports.agent_status,
        "terminationDrainDuration": format_duration(
            round(options.termination_drain_duration_s * 1e9)
        ),
    }


def _node(options: AgentOptions) -> base_pb2.Node:
    node = base_pb2.Node(id=options.node_id, cluster=options.service_cluster)
    locality = locality_from_labels(options.labels)
    node.locality.region = locality.region
    node.locality.zone = locality.zone
    node.locality.sub_zone = locality.subzone
    node.metadata.update(node_metadata(options))
    return node


def _admin(port: int) -> bootstrap_pb2.Admin:
    log = file_pb2.FileAccessLog(path="/dev/null")
    return bootstrap_pb2.Admin(
        access_log=[
            accesslog_pb2.AccessLog(name="envoy.access_loggers.file", typed_config=pack(log))
        ],
        address=_socket_address(LOCALHOST, port),
    )


def _dynamic_resources(options: AgentOptions) -> bootstrap_pb2.Bootstrap.DynamicResources:
    api_type = config_source_pb2.ApiConfigSource.ApiType.Value(str(options.xds_type))
    # The xDS stream's reconnect backoff (EnvoyGrpc's, not GrpcService's: that one is for
    # other async streams): jittered exponential, random up to base * 2^n, at most max.
    retry = base_pb2.RetryPolicy(
        retry_back_off=backoff_pb2.BackoffStrategy(
            base_interval=seconds(XDS_RETRY_BASE_S), max_interval=seconds(XDS_RETRY_MAX_S)
        )
    )
    ads = config_source_pb2.ApiConfigSource(
        api_type=api_type,
        set_node_on_first_message_only=True,
        transport_api_version=config_source_pb2.V3,
        grpc_services=[
            grpc_service_pb2.GrpcService(
                envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(
                    cluster_name=XDS_CLUSTER, retry_policy=retry
                ),
            )
        ],
    )
    return bootstrap_pb2.Bootstrap.DynamicResources(
        lds_config=ads_source(), cds_config=ads_source(), ads_config=ads
    )


def _socket_address(address: str, port: int) -> address_pb2.Address:
    return address_pb2.Address(
        socket_address=address_pb2.SocketAddress(
            protocol=address_pb2.SocketAddress.TCP, address=address, port_value=port
        )
    )


def _load_assignment(
    name: str, *addresses: address_pb2.Address
) -> endpoint_pb2.ClusterLoadAssignment:
    return endpoint_pb2.ClusterLoadAssignment(
        cluster_name=name,
        endpoints=[
            endpoint_components_pb2.LocalityLbEndpoints(
                lb_endpoints=[
                    endpoint_components_pb2.LbEndpoint(
                        endpoint=endpoint_components_pb2.Endpoint(address=address)
                    )
                    for address in addresses
                ]
            )
        ],
    )


def _local_cluster(name: str, port: int) -> cluster_pb2.Cluster:
    return cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.STATIC,
        connect_timeout=seconds(0.25),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        load_assignment=_load_assignment(name, _socket_address(LOCALHOST, port)),
    )


def _http2(max_requests_per_connection: int | None = None) -> dict[str, Any]:
    options = http_protocol_options_pb2.HttpProtocolOptions(
        explicit_http_config=http_protocol_options_pb2.HttpProtocolOptions.ExplicitHttpConfig(
            http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
        )
    )
    if max_requests_per_connection is not None:
        options.common_http_protocol_options.max_requests_per_connection.value = (
            max_requests_per_connection
        )
    return {_HTTP_OPTIONS: pack(options)}


def _sds_cluster() -> cluster_pb2.Cluster:
    pipe = address_pb2.Address(pipe=address_pb2.Pipe(path=SDS_SOCKET_PATH))
    return cluster_pb2.Cluster(
        name=SDS_CLUSTER,
        type=cluster_pb2.Cluster.STATIC,
        typed_extension_protocol_options=_http2(),
        connect_timeout=duration(1_000_000_000),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        load_assignment=_load_assignment(SDS_CLUSTER, pipe),
    )


def _wasm_fetch_cluster() -> cluster_pb2.Cluster:
    """The agent's fetcher of http(s) WasmPlugin modules (agent/wasm_fetch.py)."""
    pipe = address_pb2.Address(pipe=address_pb2.Pipe(path=WASM_SOCKET_PATH))
    return cluster_pb2.Cluster(
        name=WASM_FETCH_CLUSTER,
        type=cluster_pb2.Cluster.STATIC,
        connect_timeout=duration(1_000_000_000),
        load_assignment=_load_assignment(WASM_FETCH_CLUSTER, pipe),
    )


def _xds_cluster(options: AgentOptions) -> cluster_pb2.Cluster:
    """Istio's xds-grpc cluster, aimed at the control plane: a pipe for `unix:<path>` (as
    Istio's Envoy reaches its agent), STATIC for IP addresses, STRICT_DNS (IPv4 preferred)
    for host names. Several replicas are several endpoints: the ADS stream is one request
    on its own connection (max_requests_per_connection 1), so when a replica dies, the
    next attempt (after the retry backoff) goes round-robin to another, while Envoy keeps
    the configuration it has."""
    kind = cluster_pb2.Cluster.STATIC
    socket_path = options.discovery_uds
    addresses = []
    if socket_path is not None:
        addresses.append(address_pb2.Address(pipe=address_pb2.Pipe(path=socket_path)))
    else:
        for entry in options.discovery_addresses:
            host, port = discovery_endpoint(entry)
            addresses.append(_socket_address(host, port))
            if not _is_ip(host):
                kind = cluster_pb2.Cluster.STRICT_DNS
    limits = {
        "max_connections": u32(100000),
        "max_pending_requests": u32(100000),
        "max_requests": u32(100000),
    }
    cluster = cluster_pb2.Cluster(
        name=XDS_CLUSTER,
        type=kind,
        connect_timeout=duration(1_000_000_000),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        load_assignment=_load_assignment(XDS_CLUSTER, *addresses),
        circuit_breakers=circuit_breaker_pb2.CircuitBreakers(
            thresholds=[
                circuit_breaker_pb2.CircuitBreakers.Thresholds(priority=priority, **limits)
                for priority in (base_pb2.DEFAULT, base_pb2.HIGH)
            ]
        ),
        upstream_connection_options=cluster_pb2.UpstreamConnectionOptions(
            tcp_keepalive=address_pb2.TcpKeepalive(keepalive_time=u32(300))
        ),
        typed_extension_protocol_options=_http2(max_requests_per_connection=1),
    )
    if kind == cluster_pb2.Cluster.STRICT_DNS:
        cluster.dns_lookup_family = cluster_pb2.Cluster.V4_PREFERRED
    if options.secure_xds:
        cluster.transport_socket.name = "envoy.transport_sockets.tls"
        cluster.transport_socket.typed_config.Pack(xds_tls_context(options.xds_server_name))
    return cluster


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _static_listener(
    port: int, stat_prefix: str, prefix: str, cluster: str
) -> listener_pb2.Listener:
    """Istio's unnamed static listener: one path prefix on 0.0.0.0:<port> to a local cluster."""
    hcm = hcm_pb2.HttpConnectionManager(
        codec_type=hcm_pb2.HttpConnectionManager.AUTO,
        stat_prefix=stat_prefix,
        route_config=route_pb2.RouteConfiguration(
            virtual_hosts=[
                route_components_pb2.VirtualHost(
                    name="backend",
                    domains=["*"],
                    routes=[
                        route_components_pb2.Route(
                            match=route_components_pb2.RouteMatch(prefix=prefix),
                            route=route_components_pb2.RouteAction(cluster=cluster),
                        )
                    ],
                )
            ]
        ),
        http_filters=[
            hcm_pb2.HttpFilter(name=Filters.ROUTER, typed_config=pack(router_pb2.Router()))
        ],
    )
    return listener_pb2.Listener(
        address=_socket_address(WILDCARD, port),
        filter_chains=[
            listener_components_pb2.FilterChain(
                filters=[listener_components_pb2.Filter(name=Filters.HCM, typed_config=pack(hcm))]
            )
        ],
    )
