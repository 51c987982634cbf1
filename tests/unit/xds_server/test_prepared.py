"""A stream's Delta push worked out while its change was debounced (xds/prepared.py): applied
only while the stream is where it was, and the same as the push worked out at once."""

from __future__ import annotations

from dataclasses import replace

import pytest
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DeltaDiscoveryResponse

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.xds.connection import Connection, WatchedResource
from meshpilot.xds.delta import on_delta_request, push_delta_responses, warm_delta_push
from meshpilot.xds.grpc_service import SendBudget
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.prepared import PreparedPush, take_prepared
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.push_request import PushRequest, request_for_change
from meshpilot.xds.push_timeline import PushTimelines
from meshpilot.xds.stream_loop import StreamLoop, stream_proxy
from tests.unit.xds_server.test_vhds import API_VH, WEB_VH
from tests.unit.xds_server.test_vhds_kept import _pushes
from tests.unit.xds_server.test_vhds_split import _stream

WEB_KEY = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "web")


def _change() -> tuple[PushRequest, list[Connection], StreamLoop]:
    before, after = _pushes()  # the web VirtualService's timeout changed
    request = replace(request_for_change(frozenset({WEB_KEY})), push=after, full=True)
    streams = [_stream(before)[0] for _ in range(2)]
    return request, streams, StreamLoop(SendBudget(1 << 20), Metrics(), PushTimelines())


def _warm(conn: Connection, request: PushRequest) -> None:
    warm_delta_push(conn, request, stream_proxy(conn, request))


def _sent(raw: list[bytes]) -> list[tuple[str, list[str], list[str]]]:
    got = [DeltaDiscoveryResponse.FromString(r) for r in raw]
    return [(r.type_url, sorted(x.name for x in r.resources), list(r.removed_resources))
            for r in got]  # fmt: skip


def _push(loop: StreamLoop, conn: Connection, request: PushRequest) -> list[bytes]:
    """What the stream's loop does with a push: takes what was prepared, then pushes."""
    prepared = take_prepared(request.push, conn, loop.metrics.prepared)
    return loop._push(conn, request, prepared)


def _prepared(loop: StreamLoop, result: str) -> float:
    return loop.metrics.prepared.get(result)


def test_a_prepared_push_is_the_push_worked_out_at_once() -> None:
    request, (ahead, now), loop = _change()
    assert request.push is not None
    _warm(ahead, request)
    got = _push(loop, ahead, request)
    assert _prepared(loop, "applied") == 1
    expected = _push(loop, now, request)  # nothing prepared for it: worked out now
    assert _sent(got) == _sent(expected) == [(TypeUrl.VIRTUAL_HOST, [WEB_VH], [])]
    (response,) = (DeltaDiscoveryResponse.FromString(r) for r in got)
    for conn in (ahead, now):  # recorded the same way: versions, nonce, in flight, push
        assert conn.push is request.push
        watched = conn.watched[TypeUrl.VIRTUAL_HOST]
        assert watched.version_sent == request.push.version
        assert conn.in_flight[TypeUrl.VIRTUAL_HOST][0] == watched.nonce_sent
    assert ahead.watched[TypeUrl.VIRTUAL_HOST].nonce_sent == response.nonce
    assert ahead.known[TypeUrl.VIRTUAL_HOST] is now.known[TypeUrl.VIRTUAL_HOST]
    assert ahead.proxy == now.proxy
    assert take_prepared(request.push, ahead, loop.metrics.prepared) is None  # taken once


def test_a_stream_that_moved_since_is_worked_out_again() -> None:
    request, (moved, _), loop = _change()
    _warm(moved, request)
    # Envoy asks for the api virtual host by name meanwhile: answered, its state moves on.
    ask = DeltaDiscoveryRequest(type_url=TypeUrl.VIRTUAL_HOST, resource_names_subscribe=[API_VH])
    (answer,) = on_delta_request(moved, ask, loop.metrics)
    ack = DeltaDiscoveryResponse.FromString(answer)
    on_delta_request(
        moved,
        DeltaDiscoveryRequest(type_url=TypeUrl.VIRTUAL_HOST, response_nonce=ack.nonce),
        loop.metrics,
    )
    got = _push(loop, moved, request)
    assert (_prepared(loop, "redone"), _prepared(loop, "applied")) == (1, 0)
    assert _sent(got) == [(TypeUrl.VIRTUAL_HOST, [WEB_VH], [])]
    assert (
        moved.watched[TypeUrl.VIRTUAL_HOST].nonce_sent
        == DeltaDiscoveryResponse.FromString(got[0]).nonce
    )


def test_a_stream_with_its_own_versions_is_not_prepared() -> None:
    request, (own, _), loop = _change()
    assert request.push is not None
    own.known[TypeUrl.VIRTUAL_HOST] = dict(own.known[TypeUrl.VIRTUAL_HOST])  # changed in place
    del own.known[TypeUrl.VIRTUAL_HOST][API_VH]  # (as after a NACK of it)
    _warm(own, request)
    assert take_prepared(request.push, own, loop.metrics.prepared) is None
    assert loop.metrics.prepared.values == {}
    (raw,) = push_delta_responses(own, request, loop.metrics)
    assert _sent([raw]) == [(TypeUrl.VIRTUAL_HOST, [API_VH, WEB_VH], [])]


def _moves() -> dict[str, object]:
    def other_push(conn: Connection, request: PushRequest) -> None:
        assert request.push is not None
        conn.push = request.push

    def other_proxy(conn: Connection, request: PushRequest) -> None:
        conn.proxy = replace(conn.proxy)

    def replaced_watch(conn: Connection, request: PushRequest) -> None:
        conn.watched[TypeUrl.ROUTE] = replace(conn.watched[TypeUrl.ROUTE])

    def new_watch(conn: Connection, request: PushRequest) -> None:
        conn.set_watch(TypeUrl.CLUSTER, WatchedResource(TypeUrl.CLUSTER, wildcard=True))

    def copied_versions(conn: Connection, request: PushRequest) -> None:
        conn.known[TypeUrl.VIRTUAL_HOST] = dict(conn.known[TypeUrl.VIRTUAL_HOST])

    return {f.__name__: f for f in (other_push, other_proxy, replaced_watch, new_watch,
                                    copied_versions)}  # fmt: skip


@pytest.mark.parametrize("move", sorted(_moves()))
def test_a_prepared_push_holds_only_while_nothing_it_read_moved(move: str) -> None:
    request, (conn, _), _ = _change()
    assert request.push is not None
    _warm(conn, request)
    memo = request.push.memo["xds.prepared"]
    assert isinstance(memo, dict)
    prepared: PreparedPush = memo[id(conn)]
    assert prepared.holds_for(conn)
    _moves()[move](conn, request)  # type: ignore[operator]
    assert not prepared.holds_for(conn)


def test_a_prepared_push_with_a_large_answer_is_not_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large answers worked out ahead still wait for the send budget (xds/stream_loop.py):
    gRPC would otherwise hold a thousand of them at once."""
    request, (small, large), _ = _change()
    assert request.push is not None
    _warm(small, request)
    monkeypatch.setattr("meshpilot.xds.delta.LARGE_RESPONSE", 100)  # a VHDS answer is larger
    _warm(large, request)
    memo = request.push.memo["xds.prepared"]
    assert isinstance(memo, dict)
    assert memo[id(small)].small and not memo[id(large)].small
