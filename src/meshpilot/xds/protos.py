"""Type URLs, Any packing, durations and the well-known Envoy filter names."""

from __future__ import annotations

from envoy.config.core.v3 import config_source_pb2
from google.protobuf import any_pb2, duration_pb2, message, wrappers_pb2

__all__ = [
    "TypeUrl",
    "ads_source",
    "duration",
    "pack",
    "u32",
]


class TypeUrl:
    LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener"
    ROUTE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
    CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
    ENDPOINT = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
    SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
    # VHDS (opt-in, Delta only): virtual hosts of sidecar route configs, see xds/vhds.py.
    VIRTUAL_HOST = "type.googleapis.com/envoy.config.route.v3.VirtualHost"
    # ECDS: HTTP filter configs named by `config_discovery` (WasmPlugin, EnvoyFilter).
    EXTENSION_CONFIG = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"


class Filters:
    ORIGINAL_DST = "envoy.filters.listener.original_dst"
    ORIGINAL_SRC = "envoy.filters.listener.original_src"
    TLS_INSPECTOR = "envoy.filters.listener.tls_inspector"
    HTTP_INSPECTOR = "envoy.filters.listener.http_inspector"
    HCM = "envoy.filters.network.http_connection_manager"
    TCP_PROXY = "envoy.filters.network.tcp_proxy"
    ROUTER = "envoy.filters.http.router"
    FAULT = "envoy.filters.http.fault"
    CORS = "envoy.filters.http.cors"
    GRPC_WEB = "envoy.filters.http.grpc_web"
    TLS_TRANSPORT = "envoy.transport_sockets.tls"
    RAW_BUFFER = "envoy.transport_sockets.raw_buffer"


def pack(msg: message.Message) -> any_pb2.Any:
    out = any_pb2.Any()
    out.Pack(msg)
    return out


def duration(nanos: int) -> duration_pb2.Duration:
    seconds, rest = divmod(nanos, 1_000_000_000)
    return duration_pb2.Duration(seconds=seconds, nanos=rest)


def seconds(value: float) -> duration_pb2.Duration:
    return duration(round(value * 1_000_000_000))


def u32(value: int) -> wrappers_pb2.UInt32Value:
    return wrappers_pb2.UInt32Value(value=value)


def ads_source() -> config_source_pb2.ConfigSource:
    """`{ads: {}, initial_fetch_timeout: 0s, resource_api_version: V3}` as Istio emits it."""
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(),
        initial_fetch_timeout=duration(0),
        resource_api_version=config_source_pb2.V3,
    )


def boolean(value: bool) -> wrappers_pb2.BoolValue:
    return wrappers_pb2.BoolValue(value=value)


__all__ += ["boolean"]
