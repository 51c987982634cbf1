"""The EDS and SDS names a proxy's clusters refer to, memoised per cluster for the push.

Most clusters come from the per-push ResourceCache, so the proxies of a class hand back the
very same message objects: reading each one's EDS service name and unpacking its TLS
contexts once per push, not once per proxy, keeps a warm generation near serialization.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from meshpilot.model.push_context import PushContext
from meshpilot.xds.protos import Filters
from meshpilot.xds.references import sds_names

__all__ = ["cluster_references", "remember_all", "remember_references"]

_MEMO = "xds.cluster_references"
_NO_NAMES: frozenset[str] = frozenset()


@dataclass(slots=True)
class _Known:
    """By id(cluster): the cluster (kept so that its id cannot be reused by another object
    while the push lives), its EDS name ("" for none) and SDS names. Three flat maps rather
    than a tuple per cluster: thousands of tuples were work for the garbage collector."""

    clusters: dict[int, cluster_pb2.Cluster] = field(default_factory=dict)
    eds: dict[int, str] = field(default_factory=dict)
    sds: dict[int, frozenset[str]] = field(default_factory=dict)

    def add(self, cluster: cluster_pb2.Cluster, eds: str, sds: frozenset[str]) -> None:
        key = id(cluster)
        self.clusters[key] = cluster
        self.eds[key] = eds
        self.sds[key] = sds


def _known(push: PushContext) -> _Known:
    found = push.memo.get(_MEMO)
    if found is None:
        found = push.memo[_MEMO] = _Known()
    assert isinstance(found, _Known)
    return found


def cluster_references(
    push: PushContext, clusters: Sequence[cluster_pb2.Cluster]
) -> tuple[set[str], frozenset[str]]:
    """(EDS service names, SDS secret names) of `clusters`."""
    known = _known(push)
    by_id, eds_of, sds_of = known.clusters, known.eds, known.sds
    eds: set[str] = set()
    sds: set[str] = set()
    last: frozenset[str] = _NO_NAMES
    for cluster in clusters:
        key = id(cluster)
        if by_id.get(key) is not cluster:
            known.add(cluster, _eds_name(cluster), _sds(cluster))
        if name := eds_of[key]:
            eds.add(name)
        names = sds_of[key]
        if names is not last and names:  # most clusters share one set: added once
            sds |= names
            last = names
    return eds, frozenset(sds)


def remember_references(
    push: PushContext, cluster: cluster_pb2.Cluster, sds: frozenset[str], eds: str | None = None
) -> None:
    """Record a finished cluster's SDS names (and EDS name, unless None), known to its
    builder, so that `cluster_references` need not unpack its TLS contexts. The cluster must
    not change afterwards."""
    _known(push).add(cluster, _eds_name(cluster) if eds is None else eds, sds)


def remember_all(
    push: PushContext,
    clusters: Sequence[cluster_pb2.Cluster],
    eds_names: Sequence[str],
    sds: Sequence[frozenset[str] | None],
) -> None:
    """`remember_references(push, clusters[i], sds[i], eds_names[i])` for each cluster
    whose SDS names are known (not None): one memo lookup for a builder's whole batch."""
    known = _known(push)
    by_id, eds_of, sds_of = known.clusters, known.eds, known.sds
    for cluster, eds, names in zip(clusters, eds_names, sds, strict=True):
        if names is not None:
            key = id(cluster)
            by_id[key] = cluster
            eds_of[key] = eds
            sds_of[key] = names


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
