"""DestinationRule traffic policy on a cluster: load balancer, pool, outlier detection."""

from __future__ import annotations

from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2, outlier_detection_pb2
from envoy.config.core.v3 import protocol_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as hpo_pb2
from envoy.type.v3 import percent_pb2

from meshpilot.config.istio.destination_rule import (
    ConnectionPoolSettings,
    LoadBalancerSettings,
    OutlierDetection,
    TrafficPolicy,
)
from meshpilot.xds.generate.clusters.common import default_thresholds, use_downstream_protocol
from meshpilot.xds.protos import duration, u32

__all__ = ["apply_traffic_policy"]

_SIMPLE_LB = {
    "ROUND_ROBIN": cluster_pb2.Cluster.ROUND_ROBIN,
    "LEAST_CONN": cluster_pb2.Cluster.LEAST_REQUEST,
    "LEAST_REQUEST": cluster_pb2.Cluster.LEAST_REQUEST,
    "RANDOM": cluster_pb2.Cluster.RANDOM,
    "UNSPECIFIED": cluster_pb2.Cluster.LEAST_REQUEST,
}
_DEFAULT_RING_SIZE = 1024


def apply_traffic_policy(
    cluster: cluster_pb2.Cluster,
    policy: TrafficPolicy | None,
    options: hpo_pb2.HttpProtocolOptions | None,
) -> hpo_pb2.HttpProtocolOptions | None:
    """Apply the policy in place; returns the (possibly new) HTTP protocol options."""
    pool = policy.connection_pool if policy else None
    options = _apply_connection_pool(cluster, pool, options)
    _apply_load_balancer(cluster, policy.load_balancer if policy else None)
    if policy is not None and policy.outlier_detection is not None:
        _apply_outlier_detection(cluster, policy.outlier_detection)
    return options


def _apply_load_balancer(cluster: cluster_pb2.Cluster, lb: LoadBalancerSettings | None) -> None:
    if cluster.type == cluster_pb2.Cluster.ORIGINAL_DST:
        cluster.lb_policy = cluster_pb2.Cluster.CLUSTER_PROVIDED
        return
    if lb is not None and lb.consistent_hash is not None:
        ch = lb.consistent_hash
        if ch.maglev is not None:
            cluster.lb_policy = cluster_pb2.Cluster.MAGLEV
            if ch.maglev.table_size:
                cluster.maglev_lb_config.table_size.value = ch.maglev.table_size
            else:
                cluster.maglev_lb_config.SetInParent()
        else:
            cluster.lb_policy = cluster_pb2.Cluster.RING_HASH
            size = (ch.ring_hash.minimum_ring_size if ch.ring_hash else 0) or (
                ch.minimum_ring_size or _DEFAULT_RING_SIZE
            )
            cluster.ring_hash_lb_config.minimum_ring_size.value = size
        return
    if lb is not None and lb.simple == "PASSTHROUGH":
        cluster.type = cluster_pb2.Cluster.ORIGINAL_DST
        cluster.lb_policy = cluster_pb2.Cluster.CLUSTER_PROVIDED
        cluster.ClearField("eds_cluster_config")
        return
    simple = lb.simple if lb is not None and lb.simple else "UNSPECIFIED"
    cluster.lb_policy = _SIMPLE_LB.get(simple, cluster_pb2.Cluster.LEAST_REQUEST)


def _apply_connection_pool(
    cluster: cluster_pb2.Cluster,
    pool: ConnectionPoolSettings | None,
    options: hpo_pb2.HttpProtocolOptions | None,
) -> hpo_pb2.HttpProtocolOptions | None:
    thresholds = default_thresholds()
    if pool is not None and pool.http is not None:
        http = pool.http
        if http.http2_max_requests:
            thresholds.max_requests.value = http.http2_max_requests
        if http.http1_max_pending_requests:
            thresholds.max_pending_requests.value = http.http1_max_pending_requests
        if http.max_retries:
            thresholds.max_retries.value = http.max_retries
        common = _common_http_options(http.idle_timeout, http.max_requests_per_connection)
        if common is not None:
            options = options or hpo_pb2.HttpProtocolOptions()
            options.common_http_protocol_options.MergeFrom(common)
        if http.h2_upgrade_policy == "UPGRADE" or http.use_client_protocol:
            options = _upgrade(options, http.use_client_protocol)
        if http.max_concurrent_streams and options is not None:
            h2 = options.explicit_http_config.http2_protocol_options
            h2.max_concurrent_streams.value = http.max_concurrent_streams
        if (ping := http.http2_keep_alive) is not None and options is not None:
            keepalive = options.explicit_http_config.http2_protocol_options.connection_keepalive
            keepalive.SetInParent()
            if ping.interval is not None:
                keepalive.interval.CopyFrom(duration(ping.interval))
            if ping.timeout is not None:
                keepalive.timeout.CopyFrom(duration(ping.timeout))
    if pool is not None and pool.tcp is not None:
        tcp = pool.tcp
        if tcp.max_connections:
            thresholds.max_connections.value = tcp.max_connections
        if tcp.connect_timeout is not None:
            cluster.connect_timeout.CopyFrom(duration(tcp.connect_timeout))
        if tcp.max_connection_duration is not None:
            options = options or hpo_pb2.HttpProtocolOptions()
            options.common_http_protocol_options.max_connection_duration.CopyFrom(
                duration(tcp.max_connection_duration)
            )
        if tcp.tcp_keepalive is not None:
            keepalive = cluster.upstream_connection_options.tcp_keepalive
            keepalive.SetInParent()
            if tcp.tcp_keepalive.probes:
                keepalive.keepalive_probes.value = tcp.tcp_keepalive.probes
            if tcp.tcp_keepalive.time is not None:
                keepalive.keepalive_time.value = tcp.tcp_keepalive.time // 1_000_000_000
            if tcp.tcp_keepalive.interval is not None:
                keepalive.keepalive_interval.value = tcp.tcp_keepalive.interval // 1_000_000_000
    cluster.circuit_breakers.CopyFrom(circuit_breaker_pb2.CircuitBreakers(thresholds=[thresholds]))
    return options


def _common_http_options(
    idle_timeout: int | None, max_requests_per_connection: int
) -> protocol_pb2.HttpProtocolOptions | None:
    if idle_timeout is None and not max_requests_per_connection:
        return None
    common = protocol_pb2.HttpProtocolOptions()
    if idle_timeout is not None:
        common.idle_timeout.CopyFrom(duration(idle_timeout))
    if max_requests_per_connection:
        common.max_requests_per_connection.value = max_requests_per_connection
    return common


def _upgrade(
    options: hpo_pb2.HttpProtocolOptions | None, use_client: bool
) -> hpo_pb2.HttpProtocolOptions:
    options = options or hpo_pb2.HttpProtocolOptions()
    if use_client:
        downstream = use_downstream_protocol()
        options.use_downstream_protocol_config.CopyFrom(downstream.use_downstream_protocol_config)
    else:
        options.explicit_http_config.http2_protocol_options.SetInParent()
    return options


def _apply_outlier_detection(cluster: cluster_pb2.Cluster, outlier: OutlierDetection) -> None:
    """Istio's applyOutlierDetection: success-rate ejection off, 5xx and gateway errors
    enforced at 100% when set, and the panic threshold from minHealthPercent."""
    out = outlier_detection_pb2.OutlierDetection(enforcing_success_rate=u32(0))
    consecutive_5xx = outlier.consecutive_5xx_errors
    if consecutive_5xx is None and outlier.consecutive_errors:
        consecutive_5xx = outlier.consecutive_errors  # deprecated field, same meaning
    if consecutive_5xx is not None:
        out.consecutive_5xx.value = consecutive_5xx
        out.enforcing_consecutive_5xx.value = 100 if consecutive_5xx > 0 else 0
    if outlier.consecutive_gateway_errors is not None:
        out.consecutive_gateway_failure.value = outlier.consecutive_gateway_errors
        out.enforcing_consecutive_gateway_failure.value = (
            100 if outlier.consecutive_gateway_errors > 0 else 0
        )
    if outlier.interval is not None:
        out.interval.CopyFrom(duration(outlier.interval))
    if outlier.base_ejection_time is not None:
        out.base_ejection_time.CopyFrom(duration(outlier.base_ejection_time))
    if outlier.max_ejection_percent > 0:
        out.max_ejection_percent.value = outlier.max_ejection_percent
    if outlier.split_external_local_origin_errors:
        out.split_external_local_origin_errors = True
        if outlier.consecutive_local_origin_failures is not None:
            out.consecutive_local_origin_failure.value = outlier.consecutive_local_origin_failures
            out.enforcing_consecutive_local_origin_failure.value = 100
        out.enforcing_local_origin_success_rate.value = 0
    cluster.outlier_detection.CopyFrom(out)
    cluster.common_lb_config.healthy_panic_threshold.CopyFrom(
        percent_pb2.Percent(value=float(outlier.min_health_percent))
    )
