"""BlackHoleCluster, PassthroughCluster and InboundPassthroughCluster."""

from __future__ import annotations

from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2

from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.clusters.common import (
    attach_protocol_options,
    base_cluster,
    default_thresholds,
    use_downstream_protocol,
)
from meshpilot.xds.names import (
    BLACKHOLE_CLUSTER,
    INBOUND_PASSTHROUGH_BIND_IPV4,
    INBOUND_PASSTHROUGH_CLUSTER,
    PASSTHROUGH_CLUSTER,
)

__all__ = ["blackhole_cluster", "inbound_passthrough_cluster", "passthrough_cluster"]


def blackhole_cluster(push: PushContext) -> cluster_pb2.Cluster:
    """A STATIC cluster with no endpoints: traffic sent here fails (REGISTRY_ONLY, bad routes)."""
    cluster = base_cluster(BLACKHOLE_CLUSTER, cluster_pb2.Cluster.STATIC, push.mesh.connect_timeout)
    cluster.ClearField("common_lb_config")
    return cluster


def passthrough_cluster(push: PushContext) -> cluster_pb2.Cluster:
    """ORIGINAL_DST to wherever the app was connecting (ALLOW_ANY)."""
    cluster = base_cluster(
        PASSTHROUGH_CLUSTER, cluster_pb2.Cluster.ORIGINAL_DST, push.mesh.connect_timeout
    )
    cluster.ClearField("common_lb_config")
    cluster.lb_policy = cluster_pb2.Cluster.CLUSTER_PROVIDED
    cluster.circuit_breakers.CopyFrom(
        circuit_breaker_pb2.CircuitBreakers(thresholds=[default_thresholds()])
    )
    attach_protocol_options(cluster, use_downstream_protocol())
    return cluster


def inbound_passthrough_cluster(push: PushContext) -> cluster_pb2.Cluster:
    """Inbound traffic to ports no service declares, delivered from 127.0.0.6."""
    cluster = passthrough_cluster(push)
    cluster.name = INBOUND_PASSTHROUGH_CLUSTER
    cluster.alt_stat_name = f"{INBOUND_PASSTHROUGH_CLUSTER};"
    bind = cluster.upstream_bind_config.source_address
    bind.address = INBOUND_PASSTHROUGH_BIND_IPV4
    bind.port_value = 0
    return cluster
