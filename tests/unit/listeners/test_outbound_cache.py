"""Outbound listeners are built once per proxy class and push (outbound_cache.py): a second
sidecar of the class gets the same messages, and what the cache key leaves out must not
change them. Each proxy's listeners must equal a generation from a fresh push."""

from __future__ import annotations

import dataclasses

from envoy.config.listener.v3 import listener_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.listeners import generate_sidecar_listeners
from tests.conftest import proxy_for, push_from_text
from tests.unit.listeners.lds_helpers import Target, outbound_call, target
from tests.unit.listeners.meshes import CLIENT, CLIENT_POD, join
from tests.unit.listeners.test_outbound_tcp import DB, DB_V, _vs

SOURCE_LABEL_VS = _vs(
    """\
  - match: [{sourceLabels: {app: other}}]
    route: [{destination: {host: db, subset: replica}}]
  - route: [{destination: {host: db, subset: primary}}]
"""
)


def _mesh() -> tuple[PushContext, Proxy]:
    _, push = push_from_text(join(CLIENT_POD, DB, DB_V, SOURCE_LABEL_VS))
    return push, proxy_for(push, CLIENT)


def _fresh(proxy: Proxy) -> list[bytes]:
    push, _ = _mesh()
    return [m.SerializeToString(deterministic=True) for m in _listeners(push, proxy)]


def _listeners(push: PushContext, proxy: Proxy) -> list[listener_pb2.Listener]:
    return generate_sidecar_listeners(push, proxy, None)


def _db_target(push: PushContext, proxy: Proxy) -> Target | None:
    _, chain = outbound_call(_listeners(push, proxy), "10.96.0.5", 5432)
    return target(chain)


def test_second_sidecar_of_a_class_shares_the_outbound_listeners() -> None:
    push, first = _mesh()
    # Another workload of the namespace: labels no VirtualService match asks about differ.
    second = dataclasses.replace(
        first, labels={**first.labels, "version": "v2"}, ip_addresses=("10.1.0.10",)
    )
    a = {m.name: m for m in _listeners(push, first)}
    b = {m.name: m for m in _listeners(push, second)}
    assert a["10.96.0.5_5432"] is b["10.96.0.5_5432"]
    assert a["virtualOutbound"] is b["virtualOutbound"]
    assert [m.SerializeToString(deterministic=True) for m in b.values()] == _fresh(second)


def test_source_labels_of_a_tcp_route_split_the_cache() -> None:
    push, sleep = _mesh()
    other = dataclasses.replace(sleep, labels={**sleep.labels, "app": "other"})
    primary = Target("tcp", "outbound|5432|primary|db.demo.svc.cluster.local")
    replica = Target("tcp", "outbound|5432|replica|db.demo.svc.cluster.local")
    assert _db_target(push, sleep) == primary
    assert _db_target(push, other) == replica  # same push: not served from sleep's entry
    assert _db_target(push, sleep) == primary
    fresh = [m.SerializeToString(deterministic=True) for m in _listeners(push, other)]
    assert fresh == _fresh(other)
