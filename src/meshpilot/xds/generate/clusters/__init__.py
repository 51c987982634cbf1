"""Clusters (CDS) for sidecars and gateways.

Module map: common.py (base cluster, metadata, protocol), outbound.py (per service port and
subset), inbound.py (the local app), special.py (blackhole and passthrough), traffic_policy.py
(DestinationRule load balancer, pool, outlier detection), tls.py (DestinationRule TLS).
"""

from __future__ import annotations

from collections.abc import Collection

from envoy.config.cluster.v3 import cluster_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.clusters.inbound import build_inbound_clusters
from meshpilot.xds.generate.clusters.outbound import build_outbound_clusters
from meshpilot.xds.generate.clusters.special import (
    blackhole_cluster,
    inbound_passthrough_cluster,
    passthrough_cluster,
)

__all__ = ["generate_gateway_clusters", "generate_sidecar_clusters"]


def generate_sidecar_clusters(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[cluster_pb2.Cluster]:
    clusters: list[cluster_pb2.Cluster] = []
    for svc in push.sidecar_scope(proxy).services:
        clusters.extend(build_outbound_clusters(push, proxy, svc))
    clusters.extend(build_inbound_clusters(push, proxy))
    clusters += [
        blackhole_cluster(push),
        passthrough_cluster(push),
        inbound_passthrough_cluster(push),
    ]
    return _unique_sorted(clusters)


def generate_gateway_clusters(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[cluster_pb2.Cluster]:
    """Gateways see every exported service (Sidecar resources do not apply) and have no
    inbound or passthrough clusters."""
    clusters: list[cluster_pb2.Cluster] = []
    for svc in push.proxy_scope(proxy).services:
        clusters.extend(build_outbound_clusters(push, proxy, svc))
    clusters.append(blackhole_cluster(push))
    return _unique_sorted(clusters)


def _unique_sorted(clusters: list[cluster_pb2.Cluster]) -> list[cluster_pb2.Cluster]:
    """The first cluster of a name wins, as in Istio's normalizeClusters."""
    seen: dict[str, cluster_pb2.Cluster] = {}
    for cluster in clusters:
        seen.setdefault(cluster.name, cluster)
    return [seen[name] for name in sorted(seen)]
