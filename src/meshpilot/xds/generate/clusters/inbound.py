"""Inbound clusters `inbound|<port>||`: deliver to the local app from 127.0.0.6 (see spec §2.3)."""

from __future__ import annotations

from collections import defaultdict

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.model.traffic_policy import effective_traffic_policy
from meshpilot.registry.model import Service, ServicePort
from meshpilot.xds.generate.clusters.common import (
    MAX_DURATION_SECONDS,
    attach_protocol_options,
    base_cluster,
    istio_metadata,
    protocol_options,
)
from meshpilot.xds.generate.clusters.sidecar_ingress import build_ingress_clusters
from meshpilot.xds.generate.clusters.traffic_policy import apply_traffic_policy
from meshpilot.xds.generate.service_targets import service_targets
from meshpilot.xds.names import INBOUND_PASSTHROUGH_BIND_IPV4, inbound_cluster

__all__ = ["build_inbound_clusters", "inbound_targets"]

LOCALHOST = "127.0.0.1"


def inbound_targets(
    push: PushContext, proxy: Proxy
) -> dict[int, list[tuple[Service, ServicePort]]]:
    """The services this workload serves, by the port its app listens on (target port)."""
    targets: dict[int, list[tuple[Service, ServicePort]]] = defaultdict(list)
    for svc, ep in service_targets(push, proxy):
        port = svc.port(ep.service_port)
        if port is not None and (svc, port) not in targets[ep.port]:
            targets[ep.port].append((svc, port))
    return {p: sorted(v, key=lambda t: (t[0].hostname, t[1].port)) for p, v in targets.items()}


def build_inbound_clusters(push: PushContext, proxy: Proxy) -> list[cluster_pb2.Cluster]:
    if push.sidecar_scope(proxy).ingress is not None:
        return build_ingress_clusters(push, proxy)  # the Sidecar's ingress replaces these
    out = []
    for target_port, services in sorted(inbound_targets(push, proxy).items()):
        svc, port = services[0]
        out.append(_inbound_cluster(push, proxy, target_port, svc, port, services))
    return out


def _inbound_cluster(
    push: PushContext,
    proxy: Proxy,
    target_port: int,
    svc: Service,
    port: ServicePort,
    services: list[tuple[Service, ServicePort]],
) -> cluster_pb2.Cluster:
    name = inbound_cluster(target_port)
    localhost = push.mesh.inbound_traffic_policy.mode == "LOCALHOST" or not proxy.intercept
    if localhost:
        cluster = base_cluster(name, cluster_pb2.Cluster.STATIC, push.mesh.connect_timeout)
        cluster.load_assignment.cluster_name = name
        cluster.load_assignment.endpoints.append(
            ec_pb2.LocalityLbEndpoints(
                lb_endpoints=[
                    ec_pb2.LbEndpoint(
                        endpoint=ec_pb2.Endpoint(
                            address=address_pb2.Address(
                                socket_address=address_pb2.SocketAddress(
                                    address=LOCALHOST, port_value=target_port
                                )
                            )
                        )
                    )
                ]
            )
        )
    else:
        cluster = base_cluster(name, cluster_pb2.Cluster.ORIGINAL_DST, push.mesh.connect_timeout)
        # Never clean up: the only destination is the local app.
        cluster.cleanup_interval.seconds = MAX_DURATION_SECONDS
    rule = push.destination_rule(proxy, svc)
    policy = effective_traffic_policy(rule.obj.model if rule else None, port.port)
    if policy is not None:
        # Only the connection pool applies inbound (server-side circuit breakers).
        policy = policy.model_copy(
            update={"load_balancer": None, "outlier_detection": None, "tls": None}
        )
    options = apply_traffic_policy(cluster, policy, protocol_options(port.protocol, sniff=True))
    if not localhost:
        cluster.lb_policy = cluster_pb2.Cluster.CLUSTER_PROVIDED
        bind = cluster.upstream_bind_config.source_address
        bind.address = INBOUND_PASSTHROUGH_BIND_IPV4
        bind.port_value = 0
    attach_protocol_options(cluster, options)
    istio_metadata(
        cluster,
        [s for s, p in services if p.port == port.port],
        (rule.namespace, rule.obj.name) if rule and policy else None,
    )
    return cluster
