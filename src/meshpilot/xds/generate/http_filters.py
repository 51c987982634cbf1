"""The HTTP filter chain of every HTTP connection manager meshpilot emits.

Fault and CORS are present (empty) on every outbound and gateway HCM, as in Istio, so that a
VirtualService turns them on per route through `typed_per_filter_config` without touching
listeners. The router is always last. Only filters in stock Envoy are used: Istio's own
extensions (istio.metadata_exchange, istio.stats, ...) would be rejected by upstream Envoy.
"""

from __future__ import annotations

from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.grpc_web.v3 import grpc_web_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from meshpilot.xds.protos import Filters, pack

__all__ = ["inbound_http_filters", "outbound_http_filters"]


def _filter(name: str, config: object) -> hcm_pb2.HttpFilter:
    return hcm_pb2.HttpFilter(name=name, typed_config=pack(config))  # type: ignore[arg-type]


def outbound_http_filters() -> list[hcm_pb2.HttpFilter]:
    """Sidecar outbound and gateway HCMs: grpc-web, fault, cors, router."""
    return [
        _filter(Filters.GRPC_WEB, grpc_web_pb2.GrpcWeb()),
        _filter(Filters.FAULT, fault_pb2.HTTPFault()),
        _filter(Filters.CORS, cors_pb2.Cors()),
        _filter(Filters.ROUTER, router_pb2.Router()),
    ]


def inbound_http_filters() -> list[hcm_pb2.HttpFilter]:
    """Sidecar inbound HCMs: grpc-web, fault, cors, router. Authn/authz filters are
    inserted before the router by the security builders."""
    return outbound_http_filters()
