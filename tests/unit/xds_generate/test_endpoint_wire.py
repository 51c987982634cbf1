"""endpoint_wire.py's pieces parse to what upb builds from the same inputs.

The pieces are written with precomputed headers that depend on lengths (the workload
string's, a group's, a weight's varint), so each is checked across the sizes where a
length starts taking one more byte.
"""

from __future__ import annotations

import pytest
from envoy.config.core.v3 import base_pb2, health_check_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2
from envoy.config.endpoint.v3 import endpoint_pb2

from meshpilot.xds.generate.endpoint_wire import (
    PORT_TAG,
    TLS_MATCH_KEY,
    framed_group,
    lb_endpoint_address,
    shared_part,
    unframe,
)
from meshpilot.xds.wire import length_delimited, varint

_SIZES = [0, 1, 60, 95, 96, 100, 127, 128, 200, 16_300, 16_400]


def _upb_shared(workload: str, tls_mode: str, weight: int) -> ec_pb2.LbEndpoint:
    lb = ec_pb2.LbEndpoint(health_status=health_check_pb2.HEALTHY)
    lb.load_balancing_weight.value = weight
    lb.load_balancing_weight.SetInParent()
    if workload:
        lb.metadata.filter_metadata["istio"].fields["workload"].string_value = workload
    if tls_mode:
        lb.metadata.filter_metadata[TLS_MATCH_KEY].fields["tlsMode"].string_value = tls_mode
    return lb


@pytest.mark.parametrize("size", _SIZES)
@pytest.mark.parametrize("tls_mode", ["", "istio"])
def test_shared_part_parses_as_upb_builds_it(size: int, tls_mode: str) -> None:
    workload = "w" * size
    for weight in (0, 1, 127, 128, 70_000):
        ours = ec_pb2.LbEndpoint.FromString(shared_part(workload, tls_mode, weight))
        assert ours == _upb_shared(workload, tls_mode, weight)
        # The weight message is there even at 0, as Istio sets it.
        assert ours.HasField("load_balancing_weight")


def _lb(address: str, port: int) -> ec_pb2.LbEndpoint:
    lb = _upb_shared("svc-0-v1;ns-0;svc-0;v1;Kubernetes", "istio", 1)
    lb.endpoint.address.socket_address.address = address
    lb.endpoint.address.socket_address.port_value = port
    return lb


@pytest.mark.parametrize("size", [1, 100, 200, 20_000])
def test_long_address_path_is_a_framed_lb_endpoint(size: int) -> None:
    prefix = shared_part("svc-0-v1;ns-0;svc-0;v1;Kubernetes", "istio", 1)
    address = "a" * size
    port = PORT_TAG + varint(8080)
    framed = lb_endpoint_address(prefix, address.encode(), port)
    assert framed[0] == 0x12  # LocalityLbEndpoints.lb_endpoints
    assert ec_pb2.LbEndpoint.FromString(unframe(framed)) == _lb(address, 8080)


@pytest.mark.parametrize("count", [1, 3, 200])
@pytest.mark.parametrize("weight", [0, 1, 127, 128, 70_000])
@pytest.mark.parametrize("zone", ["", "z1"])
def test_framed_group_is_a_cla_endpoints_field(count: int, weight: int, zone: str) -> None:
    lbs = [_lb(f"10.0.{i // 250}.{i % 250}", 8080) for i in range(count)]
    locality = base_pb2.Locality(region="r1", zone=zone) if zone else None
    field = length_delimited(1, locality.SerializeToString()) if locality else b""
    framed = framed_group(
        field, [length_delimited(2, lb.SerializeToString()) for lb in lbs], weight
    )
    expected = endpoint_pb2.ClusterLoadAssignment()
    group = expected.endpoints.add()
    if locality is not None:
        group.locality.CopyFrom(locality)
    group.lb_endpoints.extend(lbs)
    group.load_balancing_weight.value = weight
    group.load_balancing_weight.SetInParent()
    assert endpoint_pb2.ClusterLoadAssignment.FromString(framed) == expected
    assert ec_pb2.LocalityLbEndpoints.FromString(unframe(framed)) == group


@pytest.mark.parametrize("size", [0, 1, 127, 128, 16_383, 16_384, 3_000_000])
def test_unframe_skips_tag_and_length(size: int) -> None:
    payload = b"p" * size
    assert unframe(length_delimited(2, payload)) == payload
