"""EDS groups and the per-push indexes of the cold path, pinned to what they replace.

endpoint_groups.py writes each LbEndpoint with one precomputed header for its three
enclosing messages and keeps a port's groups flat; service_targets.py indexes endpoints by
address with positions instead of tuples. These tests hold the bytes to upb's own
serialization and the index to PushContext.service_targets, so a shortcut that drifts
shows up here rather than as a golden diff.
"""

from __future__ import annotations

import pytest
from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2

from meshpilot.model.indexes.authn import peer_authn
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Endpoint, Locality, Protocol, Service, ServicePort
from meshpilot.xds.generate import endpoint_groups
from meshpilot.xds.generate.endpoint_groups import assignment_endpoints, group_bytes
from meshpilot.xds.generate.endpoint_wire import ADDRESS_HEADS, unframe
from meshpilot.xds.generate.service_targets import service_targets
from meshpilot.xds.wire import length_delimited
from tests.conftest import proxy_for, push_from_text

_HEADS = ADDRESS_HEADS


@pytest.mark.parametrize("size", [0, 1, 20, 60, len(_HEADS) - 1])
def test_address_head_is_three_length_delimited_headers(size: int) -> None:
    socket = b"s" * size
    nested = length_delimited(1, length_delimited(1, length_delimited(1, socket)))
    assert _HEADS[size] + socket == nested
    assert all(n < 0x80 for n in (size + 2, size + 4))


def _mesh(address: str) -> str:
    return f"""\
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: prod}}
spec:
  clusterIP: 10.96.0.2
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: 8080}}, {{name: grpc, port: 90, targetPort: 9090}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: web-7d9f8c6b5-aaaaa
  namespace: prod
  labels: {{app: web, version: v1, pod-template-hash: 7d9f8c6b5,
           security.istio.io/tlsMode: istio, topology.kubernetes.io/zone: b}}
spec: {{serviceAccountName: web}}
status: {{podIP: "{address}"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-7d9f8c6b5-bbbbb
  namespace: prod
  labels: {{app: web, version: v2, pod-template-hash: 7d9f8c6b5, topology.kubernetes.io/zone: a}}
spec: {{serviceAccountName: web}}
status: {{podIP: 10.0.0.9}}
"""


def _web(push: PushContext) -> Service:
    return next(s for s in push.registry.services if s.hostname.startswith("web."))


def _upb_lb_endpoint(ep: Endpoint, shared: bytes) -> ec_pb2.LbEndpoint:
    """The shared part (health, weight, metadata) with the address set through upb."""
    lb = ec_pb2.LbEndpoint.FromString(shared)
    lb.endpoint.address.socket_address.address = ep.address
    lb.endpoint.address.socket_address.port_value = ep.port
    return lb


@pytest.mark.parametrize("address", ["10.0.0.1", "fd00:10:244::7"])
def test_lb_endpoints_equal_upb_serialization_and_groups_follow_locality(address: str) -> None:
    _, push = push_from_text(_mesh(address))
    svc = _web(push)
    encoder = endpoint_groups._encoder(push)
    for port in (80, 90):
        groups = encoder.groups(svc, port)
        # Zone a sorts before zone b: the second pod comes first.
        assert [ep.address for ep in groups.endpoints] == ["10.0.0.9", address]
        assert groups.ends == (1, 2)
        for ep, lb in zip(groups.endpoints, groups.lb_endpoints, strict=True):
            shared = encoder._shared_part_of(ep)
            # A lb_endpoints field (tag 2): the workload's part, then the address.
            assert lb[0] == 0x12 and unframe(lb).startswith(shared)
            assert ec_pb2.LbEndpoint.FromString(unframe(lb)) == _upb_lb_endpoint(ep, shared)
        parsed = [
            ec_pb2.LocalityLbEndpoints.FromString(g) for g in group_bytes(push, svc, port, None)
        ]
        assert [g.locality.zone for g in parsed] == ["a", "b"]
        assert [g.load_balancing_weight.value for g in parsed] == [1, 1]


def test_long_addresses_take_the_generic_path() -> None:
    """A DNS name (ServiceEntry endpoints) may be longer than the table covers."""
    svc = Service("h.example.com", "prod", (ServicePort("http", 80, Protocol.HTTP),))
    long_name = "a" * 140 + ".example.com"
    ep = Endpoint(long_name, 80, 80, namespace="prod", locality=Locality("r", "z"))
    _, push = push_from_text("")
    encoder = endpoint_groups._Encoder(peer_authn(push), lambda s, p: (ep,))
    groups = encoder.groups(svc, 80)
    shared = encoder._shared_part_of(ep)
    lb = unframe(groups.lb_endpoints[0])
    assert ec_pb2.LbEndpoint.FromString(lb) == _upb_lb_endpoint(ep, shared)
    assert groups.endpoints == (ep,)  # already in order: the registry's own tuple


def test_subsets_filter_groups_and_reframe_partial_ones() -> None:
    text = _mesh("10.0.0.1").replace("zone: a}", "zone: b}")  # both pods in zone b
    _, push = push_from_text(text)
    svc = _web(push)
    (whole,) = group_bytes(push, svc, 80, None)
    (v1,) = group_bytes(push, svc, 80, {"version": "v1"})
    assert group_bytes(push, svc, 80, {"version": "v3"}) == []
    assert group_bytes(push, svc, 80, {"version": "v1", "app": "web"}) == [v1]
    full, part = (
        ec_pb2.LocalityLbEndpoints.FromString(whole),
        ec_pb2.LocalityLbEndpoints.FromString(v1),
    )
    assert len(full.lb_endpoints) == 2 and full.load_balancing_weight.value == 2
    assert [lb.endpoint.address.socket_address.address for lb in part.lb_endpoints] == ["10.0.0.1"]
    assert part.load_balancing_weight.value == 1 and part.locality == full.locality
    # The port's own assignment is its groups framed as ClusterLoadAssignment.endpoints.
    assert assignment_endpoints(push, svc, 80, None) == length_delimited(2, whole)
    assert assignment_endpoints(push, svc, 80, {"version": "v1"}) == length_delimited(2, v1)


def test_service_targets_index_matches_the_push_scan() -> None:
    _, push = push_from_text(_mesh("10.0.0.1"))
    for ref in ("web-7d9f8c6b5-aaaaa.prod", "web-7d9f8c6b5-bbbbb.prod"):
        proxy = proxy_for(push, ref)
        expected = push.service_targets(proxy)
        assert len(expected) == 2
        assert service_targets(push, proxy) == expected
