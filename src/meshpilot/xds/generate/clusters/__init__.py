"""Clusters (CDS) for sidecars and gateways.

Module map: common.py (base cluster, metadata, protocol), outbound.py (per service port and
subset), inbound.py (the local app), special.py (blackhole and passthrough), traffic_policy.py
(DestinationRule load balancer, pool, outlier detection), tls.py (DestinationRule TLS).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from envoy.config.cluster.v3 import cluster_pb2

from meshpilot.config.hosts import host_matches
from meshpilot.model.merged_gateway import merged_gateway_for
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.cache import cache_for
from meshpilot.xds.generate.clusters.inbound import build_inbound_clusters
from meshpilot.xds.generate.clusters.outbound import build_outbound_clusters
from meshpilot.xds.generate.clusters.special import (
    blackhole_cluster,
    inbound_passthrough_cluster,
    passthrough_cluster,
)
from meshpilot.xds.names import parse_cluster_name, sni_name

__all__ = ["generate_gateway_clusters", "generate_sidecar_clusters"]


def generate_sidecar_clusters(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[cluster_pb2.Cluster]:
    clusters = list(_outbound(push, proxy))
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
    clusters = list(_outbound(push, proxy))
    merged = merged_gateway_for(push, proxy)
    if merged is not None and merged.contains_auto_passthrough:
        clusters.extend(sni_dnat_clusters(clusters, merged.auto_passthrough_sni_hosts))
    clusters.append(blackhole_cluster(push))
    return _unique_sorted(clusters)


def sni_dnat_clusters(
    outbound: Sequence[cluster_pb2.Cluster], hosts: Collection[str]
) -> list[cluster_pb2.Cluster]:
    """AUTO_PASSTHROUGH servers route by SNI to clusters named after it
    (`outbound_.<port>_.<subset>_.<host>`); the client's own mTLS passes through untouched,
    so these copies carry no transport socket."""
    out = []
    for cluster in outbound:
        parsed = parse_cluster_name(cluster.name)
        if parsed is None or not any(host_matches(h, parsed[3]) for h in hosts):
            continue
        copy = cluster_pb2.Cluster()
        copy.CopyFrom(cluster)
        copy.name = sni_name(parsed[1], parsed[2], parsed[3])
        copy.alt_stat_name = copy.name + ";"
        if copy.HasField("eds_cluster_config"):
            copy.eds_cluster_config.service_name = copy.name
        copy.ClearField("transport_socket")
        copy.ClearField("transport_socket_matches")
        out.append(copy)
    return out


def _outbound(push: PushContext, proxy: Proxy) -> tuple[cluster_pb2.Cluster, ...]:
    """Outbound clusters are the same for every proxy of a class: built once per push."""

    def build() -> list[cluster_pb2.Cluster]:
        # ExternalName aliases have no cluster (Istio Alias).
        services = [s for s in push.proxy_scope(proxy).services if not s.is_alias]
        return build_outbound_clusters(push, proxy, services)

    key = ("cds-outbound", push.proxy_class(proxy))
    return cache_for(push).get_or_build(key, build).messages


def _unique_sorted(clusters: list[cluster_pb2.Cluster]) -> list[cluster_pb2.Cluster]:
    """The first cluster of a name wins, as in Istio's normalizeClusters."""
    seen: dict[str, cluster_pb2.Cluster] = {}
    for cluster in clusters:
        seen.setdefault(cluster.name, cluster)
    return [seen[name] for name in sorted(seen)]
