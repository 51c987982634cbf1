"""Resources assembled from serialized parts parse to the messages built field by field.

The cold generation path writes Istio's metadata, cluster names and auto-mTLS socket
matches straight to the wire (struct_bytes.py, clusters/encoded.py); these tests pin each
encoder to the upb message it replaces, so a protobuf or schema change shows up here
rather than as a golden diff.
"""

from __future__ import annotations

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from google.protobuf import struct_pb2

from meshpilot.registry.model import Protocol, Resolution, Service, ServicePort
from meshpilot.xds.generate.clusters.common import istio_metadata, istio_metadata_struct
from meshpilot.xds.generate.clusters.encoded import identity_fields, metadata_field
from meshpilot.xds.generate.clusters.mtls import istio_mutual_context, mutual_context_bytes
from meshpilot.xds.generate.struct_bytes import (
    bool_value,
    list_value,
    metadata,
    string_value,
    struct,
    struct_value,
)
from meshpilot.xds.wire import length_delimited, varint


def _reference_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**32 - 1, 2**63])
def test_varint_matches_the_protobuf_encoding(value: int) -> None:
    assert varint(value) == _reference_varint(value)
    wrapped = struct_pb2.ListValue.FromString(
        length_delimited(1, length_delimited(3, b"x" * (value % 70000)))
    )
    assert wrapped.values[0].string_value == "x" * (value % 70000)


def test_varint_refuses_negative_numbers() -> None:
    with pytest.raises(ValueError):
        varint(-1)


def test_struct_bytes_parse_to_the_struct_built_through_upb() -> None:
    expected = struct_pb2.Struct()
    expected["name"] = "a;b"
    expected["empty"] = ""
    expected["on"] = True
    expected["off"] = False
    expected.get_or_create_struct("inner")["host"] = "h.ns.svc.cluster.local"
    expected.get_or_create_list("items").extend(["x", "y"])
    encoded = struct(
        [
            ("name", string_value("a;b")),
            ("empty", string_value("")),
            ("on", bool_value(True)),
            ("off", bool_value(False)),
            ("inner", struct_value([("host", string_value("h.ns.svc.cluster.local"))])),
            ("items", list_value([string_value("x"), string_value("y")])),
        ]
    )
    assert struct_pb2.Struct.FromString(encoded) == expected


def test_metadata_bytes_parse_to_the_metadata_built_through_upb() -> None:
    expected = base_pb2.Metadata()
    expected.filter_metadata["istio"]["workload"] = "w" * 200  # a two-byte length
    expected.filter_metadata["envoy.transport_socket_match"]["tlsMode"] = "istio"
    encoded = metadata(
        [
            ("istio", struct([("workload", string_value("w" * 200))])),
            ("envoy.transport_socket_match", struct([("tlsMode", string_value("istio"))])),
        ]
    )
    assert base_pb2.Metadata.FromString(encoded) == expected


def _service(name: str, kube_name: str = "") -> Service:
    return Service(
        hostname=f"{name}.shop.svc.cluster.local",
        namespace="shop",
        ports=(ServicePort("http", 80, Protocol.HTTP),),
        resolution=Resolution.CLIENT_SIDE_LB,
        kube_name=kube_name,
    )


@pytest.mark.parametrize("rule", [None, ("shop", "api-dr")])
@pytest.mark.parametrize("external", [False, True])
def test_istio_cluster_metadata_struct_matches_the_message_builder(
    rule: tuple[str, str] | None, external: bool
) -> None:
    services = [_service("api", "api"), _service("db")]
    holder = cluster_pb2.Cluster()
    istio_metadata(holder, services, rule, external=external)
    encoded = istio_metadata_struct(services, rule, external=external)
    assert struct_pb2.Struct.FromString(encoded) == holder.metadata.filter_metadata["istio"]


@pytest.mark.parametrize("subset", ["", "v1"])
@pytest.mark.parametrize("eds", [False, True])
def test_cluster_tail_merges_like_field_by_field_writes(subset: str, eds: bool) -> None:
    name = f"outbound|80|{subset}|api.shop.svc.cluster.local"
    template = cluster_pb2.Cluster(alt_stat_name=";", type=cluster_pb2.Cluster.EDS)
    if eds:
        template.eds_cluster_config.eds_config.ads.SetInParent()
    services = [_service("api")]

    expected = cluster_pb2.Cluster()
    expected.CopyFrom(template)
    expected.name = name
    expected.alt_stat_name = name + ";"
    if eds:
        expected.eds_cluster_config.service_name = name
    istio_metadata(expected, services, ("shop", "api"), subset=subset)

    merged = cluster_pb2.Cluster()
    merged.CopyFrom(template)
    struct_bytes = istio_metadata_struct(services, ("shop", "api"))
    merged.MergeFromString(identity_fields(name, eds) + metadata_field(struct_bytes, subset))
    assert merged == expected


@pytest.mark.parametrize(
    "sans",
    [
        (),
        ("spiffe://cluster.local/ns/shop/sa/api",),
        ("spiffe://td/ns/a/sa/b", "api.example.com", "spiffe://alias/ns/a/sa/" + "b" * 200),
    ],
)
@pytest.mark.parametrize("http2", [False, True])
def test_mutual_tls_context_bytes_equal_the_serialized_message(
    sans: tuple[str, ...], http2: bool
) -> None:
    # Byte-equal, not only parse-equal: the bytes are the Any value Envoy receives, and the
    # Delta resource version hashes them.
    expected = istio_mutual_context("", sans, http2).SerializeToString()
    assert mutual_context_bytes(sans, http2) == expected
