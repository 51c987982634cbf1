"""The HTTP filter chain of every HTTP connection manager meshpilot emits.

Current Istio's order: grpc_web (gRPC-Web ports only), grpc_stats, fault, cors, router. Fault
and CORS are present (empty) on every HCM, so that a VirtualService turns them on per route
through `typed_per_filter_config` without touching listeners. Only stock Envoy filters are
used: Istio's own extensions (istio.metadata_exchange, istio.stats, istio.alpn) would be
rejected by upstream Envoy.
"""

from __future__ import annotations

from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.grpc_stats.v3 import config_pb2 as grpc_stats_pb2
from envoy.extensions.filters.http.grpc_web.v3 import grpc_web_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf import message

from meshpilot.xds.protos import Filters, pack

__all__ = ["inbound_http_filters", "outbound_http_filters"]

GRPC_STATS = "envoy.filters.http.grpc_stats"


def _filter(name: str, config: message.Message) -> hcm_pb2.HttpFilter:
    return hcm_pb2.HttpFilter(name=name, typed_config=pack(config))


def outbound_http_filters(grpc_web: bool = False) -> list[hcm_pb2.HttpFilter]:
    """Sidecar outbound and gateway HCMs."""
    filters = [_filter(Filters.GRPC_WEB, grpc_web_pb2.GrpcWeb())] if grpc_web else []
    filters += [
        _filter(GRPC_STATS, grpc_stats_pb2.FilterConfig(emit_filter_state=True)),
        _filter(Filters.FAULT, fault_pb2.HTTPFault()),
        _filter(Filters.CORS, cors_pb2.Cors()),
        _filter(Filters.ROUTER, router_pb2.Router()),
    ]
    return filters


def inbound_http_filters(grpc_web: bool = False) -> list[hcm_pb2.HttpFilter]:
    """Sidecar inbound HCMs: the same chain. A workload's jwt_authn and RBAC filters go in
    front of it (xds/generate/security/apply.py), as Istio puts authn and authz first."""
    return outbound_http_filters(grpc_web)
