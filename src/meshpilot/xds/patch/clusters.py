"""CLUSTER patches: MERGE into and REMOVE matching clusters; ADD is done once per proxy
(xds/patch/apply.py)."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2

from meshpilot.xds.patch.matching import cluster_matches, context_matches
from meshpilot.xds.patch.merge import merge_message
from meshpilot.xds.patch.selection import ConfigPatch

__all__ = ["cluster_context", "patch_cluster"]

_INBOUND = ("inbound|", "InboundPassthroughCluster")


def cluster_context(cluster: cluster_pb2.Cluster, gateway: bool) -> str:
    if gateway:
        return "GATEWAY"
    return "SIDECAR_INBOUND" if cluster.name.startswith(_INBOUND) else "SIDECAR_OUTBOUND"


def patch_cluster(cluster: cluster_pb2.Cluster, patch: ConfigPatch, context: str) -> bool | str:
    if patch.operation == "ADD" or not context_matches(patch, context):
        return False
    if not cluster_matches(cluster, patch.cluster):
        return False
    if patch.operation == "REMOVE":
        return "removed"
    if patch.operation == "MERGE" and patch.value is not None:
        merge_message(cluster, patch.value)
        return True
    return False
