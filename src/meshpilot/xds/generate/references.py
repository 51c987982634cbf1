"""The EDS and SDS names a proxy's clusters refer to, memoised per cluster for the push.

Most clusters come from the per-push ResourceCache, so the proxies of a class hand back the
very same message objects: reading each one's EDS service name and unpacking its TLS
contexts once per push, not once per proxy, keeps a warm generation near serialization.
"""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from meshpilot.model.push_context import PushContext
from meshpilot.xds.protos import Filters
from meshpilot.xds.references import sds_names

__all__ = ["cluster_references", "remember_references"]

_MEMO = "xds.cluster_references"
_NO_NAMES: frozenset[str] = frozenset()

# id(cluster) -> (cluster, EDS name or "", SDS names). The message itself is kept in the
# entry so that its id cannot be reused by another object while the push lives.
_Entry = tuple[cluster_pb2.Cluster, str, frozenset[str]]


def cluster_references(
    push: PushContext, clusters: Sequence[cluster_pb2.Cluster]
) -> tuple[set[str], frozenset[str]]:
    """(EDS service names, SDS secret names) of `clusters`."""
    memo = push.memo.setdefault(_MEMO, {})
    assert isinstance(memo, dict)
    eds: set[str] = set()
    sds: set[str] = set()
    for cluster in clusters:
        entry: _Entry | None = memo.get(id(cluster))
        if entry is None or entry[0] is not cluster:
            entry = memo[id(cluster)] = (cluster, _eds_name(cluster), _sds(cluster))
        if entry[1]:
            eds.add(entry[1])
        if entry[2]:
            sds |= entry[2]
    return eds, frozenset(sds)


def remember_references(
    push: PushContext, cluster: cluster_pb2.Cluster, sds: frozenset[str], eds: str | None = None
) -> None:
    """Record a finished cluster's SDS names (and EDS name, unless None), known to its
    builder, so that `cluster_references` need not unpack its TLS contexts. The cluster must
    not change afterwards."""
    memo = push.memo.setdefault(_MEMO, {})
    assert isinstance(memo, dict)
    memo[id(cluster)] = (cluster, _eds_name(cluster) if eds is None else eds, sds)


def _eds_name(cluster: cluster_pb2.Cluster) -> str:
    if not cluster.HasField("eds_cluster_config"):
        return ""
    return str(cluster.eds_cluster_config.service_name or cluster.name)


def _sds(cluster: cluster_pb2.Cluster) -> frozenset[str]:
    if not cluster.HasField("transport_socket") and not cluster.transport_socket_matches:
        return _NO_NAMES
    sockets = [m.transport_socket for m in cluster.transport_socket_matches]
    if cluster.HasField("transport_socket"):
        sockets.append(cluster.transport_socket)
    names: set[str] = set()
    for socket in sockets:
        if socket.name != Filters.TLS_TRANSPORT:
            continue
        if socket.typed_config.type_url == _UPSTREAM_TLS_URL:
            # The common case, read directly (references.py also tries other TLS types).
            common = tls_pb2.UpstreamTlsContext.FromString(
                socket.typed_config.value
            ).common_tls_context
            names.update(s.name for s in common.tls_certificate_sds_secret_configs)
            if common.HasField("validation_context_sds_secret_config"):
                names.add(common.validation_context_sds_secret_config.name)
            if common.HasField("combined_validation_context"):
                combined = common.combined_validation_context
                names.add(combined.validation_context_sds_secret_config.name)
        else:
            names |= sds_names((), (cluster_pb2.Cluster(transport_socket=socket),))
    names.discard("")
    return frozenset(names) if names else _NO_NAMES


_UPSTREAM_TLS_URL = "type.googleapis.com/" + tls_pb2.UpstreamTlsContext.DESCRIPTOR.full_name
