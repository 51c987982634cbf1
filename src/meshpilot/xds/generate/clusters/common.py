"""Parts every cluster shares: the base cluster, circuit breakers, Istio metadata, protocol."""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2
from envoy.config.core.v3 import protocol_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as hpo_pb2
from google.protobuf import struct_pb2

from meshpilot.registry.model import Protocol, Service
from meshpilot.xds.generate.payload_heads import PayloadHeads
from meshpilot.xds.generate.struct_bytes import bool_value, struct
from meshpilot.xds.protos import ads_source, duration, pack, u32
from meshpilot.xds.wire import field_number, length_delimited, tag, varint

__all__ = [
    "HTTP_PROTOCOL_OPTIONS",
    "MAX_UINT32",
    "base_cluster",
    "default_thresholds",
    "istio_metadata",
    "istio_metadata_struct",
    "protocol_options",
    "set_eds",
]

HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
MAX_UINT32 = 4294967295
# Istio's maxSecondsValue (about 292 years): the largest Duration Envoy accepts, used to
# disable ORIGINAL_DST host cleanup on inbound clusters.
MAX_DURATION_SECONDS = 9223372035
ISTIO_CONFIG_API = "/apis/networking.istio.io/v1/namespaces/{ns}/destination-rule/{name}"


def base_cluster(
    name: str, kind: cluster_pb2.Cluster.DiscoveryType, connect_timeout: int
) -> cluster_pb2.Cluster:
    """A cluster as Istio's buildCluster starts it: type, timeout, empty common LB config and
    the `;`-delimited alt stat name."""
    cluster = cluster_pb2.Cluster(name=name, type=kind, alt_stat_name=f"{name};")
    cluster.connect_timeout.CopyFrom(duration(connect_timeout))
    cluster.common_lb_config.SetInParent()
    return cluster


def set_eds(cluster: cluster_pb2.Cluster) -> None:
    cluster.eds_cluster_config.service_name = cluster.name
    cluster.eds_cluster_config.eds_config.CopyFrom(ads_source())


def default_thresholds() -> circuit_breaker_pb2.CircuitBreakers.Thresholds:
    """Istio's defaults: effectively unlimited, with remaining capacity tracked."""
    return circuit_breaker_pb2.CircuitBreakers.Thresholds(
        max_connections=u32(MAX_UINT32),
        max_pending_requests=u32(MAX_UINT32),
        max_requests=u32(MAX_UINT32),
        max_retries=u32(MAX_UINT32),
        track_remaining=True,
    )


def _service_struct(svc: Service) -> struct_pb2.Value:
    value = struct_pb2.Value()
    name = svc.kube_name or svc.hostname
    value.struct_value.update({"host": svc.hostname, "name": name, "namespace": svc.namespace})
    return value


def istio_metadata(
    cluster: cluster_pb2.Cluster,
    services: Sequence[Service],
    rule: tuple[str, str] | None = None,
    subset: str = "",
    external: bool = False,
) -> None:
    """`filter_metadata.istio`: the services behind the cluster, and the DestinationRule that
    shaped it (Istio's provenance format), read by telemetry and by `meshpilot explain`."""
    istio = cluster.metadata.filter_metadata["istio"]
    if rule is not None:
        istio["config"] = ISTIO_CONFIG_API.format(ns=rule[0], name=rule[1])
    if external:
        istio["external"] = True
    services_value = struct_pb2.Value()
    services_value.list_value.values.extend(_service_struct(s) for s in services)
    istio.fields["services"].CopyFrom(services_value)
    if subset:
        istio["subset"] = subset


def istio_metadata_struct(
    services: Sequence[Service], rule: tuple[str, str] | None = None, external: bool = False
) -> bytes:
    """`istio_metadata`'s Struct (without subset), serialized directly: the same bytes as
    struct_bytes.py's functions write (a test holds them equal), in a few concatenations
    (once per service per push)."""
    out = b""
    if rule is not None:
        out = _CONFIG_ENTRY(ISTIO_CONFIG_API.format(ns=rule[0], name=rule[1]).encode())
    if external:
        out += _EXTERNAL_ENTRY
    items = []
    for s in services:
        value = (
            _HOST_ENTRY(s.hostname.encode())
            + _NAME_ENTRY((s.kube_name or s.hostname).encode())
            + _NAMESPACE_ENTRY(s.namespace.encode())
        )
        if len(services) == 1:  # the usual cluster: its headers from one table
            return out + _ONE_SERVICE(value)
        value = _framed(_STRUCT_VALUE_TAG, value)  # Value.struct_value
        items.append(_framed(_LIST_VALUES_TAG, value))  # ListValue.values
    values = _framed(_LIST_VALUE_TAG, b"".join(items))  # Value.list_value
    return out + _services_entry(values)


def _services_entry(values: bytes) -> bytes:
    """The Struct `fields` entry `services` holding the serialized Value.list_value."""
    return _framed(_FIELDS_TAG, _SERVICES_KEY + _framed(_MAP_VALUE_TAG, values))


def _one_service(value: bytes) -> bytes:
    """`_services_entry` of a list of one Struct value (its serialized fields)."""
    item = _framed(_LIST_VALUES_TAG, _framed(_STRUCT_VALUE_TAG, value))
    return _services_entry(_framed(_LIST_VALUE_TAG, item))


def _framed(field_tag: bytes, payload: bytes) -> bytes:
    n = len(payload)
    return field_tag + (_ONE_BYTE[n] if n < 0x80 else varint(n)) + payload


def _string_entry(key: bytes) -> PayloadHeads:
    """A Struct `fields` entry (`key`: the entry's serialized key) holding a string, from
    the encoded string: its headers depend on its length alone."""

    def entry(encoded: bytes) -> bytes:
        value = _framed(_STRING_VALUE_TAG, encoded)
        return _framed(_FIELDS_TAG, key + _framed(_MAP_VALUE_TAG, value))

    return PayloadHeads(entry)


_ONE_BYTE = tuple(varint(n) for n in range(0x80))
_FIELDS_TAG = tag(field_number(struct_pb2.Struct.DESCRIPTOR, "fields"))
_MAP_VALUE_TAG = tag(2)  # a map entry is a message {key = 1, value = 2}
_VALUE = struct_pb2.Value.DESCRIPTOR
_STRING_VALUE_TAG = tag(field_number(_VALUE, "string_value"))
_STRUCT_VALUE_TAG = tag(field_number(_VALUE, "struct_value"))
_LIST_VALUE_TAG = tag(field_number(_VALUE, "list_value"))
_LIST_VALUES_TAG = tag(field_number(struct_pb2.ListValue.DESCRIPTOR, "values"))
_CONFIG_KEY, _HOST_KEY, _NAME_KEY, _NAMESPACE_KEY, _SERVICES_KEY = (
    length_delimited(1, key.encode()) for key in ("config", "host", "name", "namespace", "services")
)
_EXTERNAL_ENTRY = struct([("external", bool_value(True))])
_CONFIG_ENTRY, _HOST_ENTRY, _NAME_ENTRY, _NAMESPACE_ENTRY = (
    _string_entry(key) for key in (_CONFIG_KEY, _HOST_KEY, _NAME_KEY, _NAMESPACE_KEY)
)
_ONE_SERVICE = PayloadHeads(_one_service)


def protocol_options(protocol: Protocol, sniff: bool) -> hpo_pb2.HttpProtocolOptions | None:
    """Upstream protocol selection (Istio's setUpstreamProtocol): h2 for HTTP2/gRPC ports, the
    downstream's protocol for sniffed ports on sidecars, nothing (HTTP/1.1) otherwise."""
    if protocol.is_http2:
        return hpo_pb2.HttpProtocolOptions(
            explicit_http_config=hpo_pb2.HttpProtocolOptions.ExplicitHttpConfig(
                http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
            )
        )
    if sniff and protocol is Protocol.AUTO:
        return use_downstream_protocol()
    return None


def use_downstream_protocol() -> hpo_pb2.HttpProtocolOptions:
    return hpo_pb2.HttpProtocolOptions(
        use_downstream_protocol_config=hpo_pb2.HttpProtocolOptions.UseDownstreamHttpConfig(
            http_protocol_options=protocol_pb2.Http1ProtocolOptions(),
            http2_protocol_options=protocol_pb2.Http2ProtocolOptions(),
        )
    )


def attach_protocol_options(
    cluster: cluster_pb2.Cluster, options: hpo_pb2.HttpProtocolOptions | None
) -> None:
    """Pack protocol options, defaulting the required upstream choice to HTTP/1.1 as Istio's
    clusterWrapper.build does when only common options were set."""
    if options is None:
        return
    if options.WhichOneof("upstream_protocol_options") is None:
        options.explicit_http_config.http_protocol_options.SetInParent()
    cluster.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(pack(options))
