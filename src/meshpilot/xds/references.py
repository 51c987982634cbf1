"""The names generated resources refer to: RDS route configs and SDS secrets."""

from __future__ import annotations

from collections.abc import Iterable

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from meshpilot.xds.protos import Filters

__all__ = ["rds_names", "sds_names"]


def _chains(listener: listener_pb2.Listener) -> list[listener_pb2.FilterChain]:
    chains = list(listener.filter_chains)
    if listener.HasField("default_filter_chain"):
        chains.append(listener.default_filter_chain)
    return chains


def rds_names(listeners: Iterable[listener_pb2.Listener]) -> set[str]:
    names = set()
    for listener in listeners:
        for chain in _chains(listener):
            for f in chain.filters:
                if f.name == Filters.HCM:
                    hcm = hcm_pb2.HttpConnectionManager()
                    f.typed_config.Unpack(hcm)
                    if hcm.HasField("rds"):
                        names.add(hcm.rds.route_config_name)
    return names


def _tls_sds(sock: base_pb2.TransportSocket, names: set[str]) -> None:
    if sock.name != Filters.TLS_TRANSPORT:
        return
    for cls in (tls_pb2.DownstreamTlsContext, tls_pb2.UpstreamTlsContext):
        if sock.typed_config.Is(cls.DESCRIPTOR):
            ctx = cls()
            sock.typed_config.Unpack(ctx)
            common = ctx.common_tls_context
            names.update(s.name for s in common.tls_certificate_sds_secret_configs)
            if common.HasField("validation_context_sds_secret_config"):
                names.add(common.validation_context_sds_secret_config.name)
            if common.HasField("combined_validation_context"):
                names.add(
                    common.combined_validation_context.validation_context_sds_secret_config.name
                )


def sds_names(
    listeners: Iterable[listener_pb2.Listener], clusters: Iterable[cluster_pb2.Cluster]
) -> set[str]:
    names: set[str] = set()
    for listener in listeners:
        for chain in _chains(listener):
            if chain.HasField("transport_socket"):
                _tls_sds(chain.transport_socket, names)
    for cluster in clusters:
        if cluster.HasField("transport_socket"):
            _tls_sds(cluster.transport_socket, names)
        for match in cluster.transport_socket_matches:
            _tls_sds(match.transport_socket, names)
    names.discard("")
    return names
