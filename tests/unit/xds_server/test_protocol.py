"""The ACK/NACK rules, table-tested like Istio's TestShouldRespond (pkg/xds/server_test.go)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import pytest
from envoy.service.discovery.v3 import discovery_pb2
from google.rpc import status_pb2

from meshpilot.xds.connection import WatchedResource
from meshpilot.xds.protocol import Action, should_respond, should_respond_delta
from meshpilot.xds.protos import TypeUrl

CDS, EDS, LDS, RDS, SDS = (
    TypeUrl.CLUSTER,
    TypeUrl.ENDPOINT,
    TypeUrl.LISTENER,
    TypeUrl.ROUTE,
    TypeUrl.SECRET,
)


def sotw(
    type_url: str, names: tuple[str, ...] = (), nonce: str = "", version: str = "", error: str = ""
) -> discovery_pb2.DiscoveryRequest:
    req = discovery_pb2.DiscoveryRequest(
        type_url=type_url, resource_names=names, response_nonce=nonce, version_info=version
    )
    if error:
        req.error_detail.CopyFrom(status_pb2.Status(code=3, message=error))
    return req


def sent(
    type_url: str, names: tuple[str, ...] = (), nonce: str = "n1", **changes: Any
) -> WatchedResource:
    """What a connection knows after sending response `nonce` (version v1)."""
    wildcard = type_url in (CDS, LDS) and not names
    base = WatchedResource(
        type_url, frozenset(names), wildcard, nonce_sent=nonce, version_sent="v1"
    )
    return replace(base, **changes)


@dataclass(frozen=True)
class Case:
    name: str
    watched: WatchedResource | None
    request: discovery_pb2.DiscoveryRequest
    respond: bool
    action: Action
    names: frozenset[str] | None = None  # expected watched names afterwards (None: unchanged)
    added: frozenset[str] = field(default_factory=frozenset)


SOTW_CASES = [
    Case("initial CDS", None, sotw(CDS), True, Action.INIT, frozenset()),
    Case("initial EDS", None, sotw(EDS, ("a", "b")), True, Action.INIT, frozenset({"a", "b"})),
    Case(
        "reconnect: nonce of another server, nothing known",
        None,
        sotw(RDS, ("80",), nonce="old", version="v0"),
        True,
        Action.INIT,
        frozenset({"80"}),
    ),
    Case("ACK", sent(CDS), sotw(CDS, nonce="n1", version="v1"), False, Action.ACK),
    Case("ACK of names", sent(EDS, ("a",)), sotw(EDS, ("a",), "n1", "v1"), False, Action.ACK),
    Case(
        "NACK is recorded, not answered",
        sent(LDS),
        sotw(LDS, nonce="n1", version="v0", error="bad listener"),
        False,
        Action.NACK,
    ),
    Case("stale nonce", sent(CDS, nonce="n2"), sotw(CDS, nonce="n1"), False, Action.STALE),
    Case(
        "new EDS name is answered",
        sent(EDS, ("a",)),
        sotw(EDS, ("a", "b"), "n1", "v1"),
        True,
        Action.RESOURCE_CHANGE,
        frozenset({"a", "b"}),
        frozenset({"b"}),
    ),
    Case(
        "removed RDS name needs no answer",
        sent(RDS, ("80", "8080")),
        sotw(RDS, ("80",), "n1", "v1"),
        False,
        Action.ACK,
        frozenset({"80"}),
    ),
    Case(
        "no names for EDS: unsubscribe",
        sent(EDS, ("a",)),
        sotw(EDS, (), "n1"),
        False,
        Action.UNSUBSCRIBE,
    ),
    Case(
        "ACK answered while clusters warm",
        sent(EDS, ("a",), always_respond=True),
        sotw(EDS, ("a",), "n1", "v1"),
        True,
        Action.FORCED,
    ),
    Case(
        "empty nonce restarts the subscription",
        sent(EDS, ("a",)),
        sotw(EDS, ("a", "c")),
        True,
        Action.INIT,
        frozenset({"a", "c"}),
    ),
    Case(
        "NACK on a stream with no state starts over",
        None,
        sotw(SDS, ("kubernetes://x",), "n9", error="bad"),
        True,
        Action.INIT,
        frozenset({"kubernetes://x"}),
    ),
]


@pytest.mark.parametrize("case", SOTW_CASES, ids=lambda c: c.name)
def test_should_respond(case: Case) -> None:
    decision = should_respond(case.watched, case.request)
    assert (decision.respond, decision.action) == (case.respond, case.action)
    assert decision.added == case.added
    if case.action is Action.UNSUBSCRIBE:
        assert decision.watched is None
        return
    assert decision.watched is not None
    expected = case.names if case.names is not None else case.watched.names  # type: ignore[union-attr]
    assert decision.watched.names == expected


def test_ack_records_nonce_and_version_and_clears_error() -> None:
    watched = sent(LDS, last_error="old error", nonce_nacked="n0")
    decision = should_respond(watched, sotw(LDS, nonce="n1", version="v1"))
    assert decision.watched is not None
    assert (decision.watched.nonce_acked, decision.watched.version_acked) == ("n1", "v1")
    assert decision.watched.last_error == ""
    assert decision.watched.status == "SYNCED"


def test_nack_keeps_error_and_nonce_per_type() -> None:
    decision = should_respond(sent(CDS), sotw(CDS, nonce="n1", version="v0", error="boom"))
    assert decision.watched is not None
    assert decision.watched.last_error == "boom"
    assert decision.watched.nonce_nacked == "n1"
    assert decision.watched.nonce_acked == ""
    assert decision.watched.status == "NACKED"


def test_first_cds_request_makes_eds_answer_next() -> None:
    assert should_respond(None, sotw(CDS)).warm == frozenset({EDS})
    assert should_respond(None, sotw(LDS)).warm == frozenset()


def test_wildcard_star_for_lds() -> None:
    decision = should_respond(None, sotw(LDS, ("*",)))
    assert decision.watched is not None and decision.watched.wildcard


def delta(
    type_url: str,
    subscribe: tuple[str, ...] = (),
    unsubscribe: tuple[str, ...] = (),
    nonce: str = "",
    initial: dict[str, str] | None = None,
    error: str = "",
) -> discovery_pb2.DeltaDiscoveryRequest:
    req = discovery_pb2.DeltaDiscoveryRequest(
        type_url=type_url,
        resource_names_subscribe=subscribe,
        resource_names_unsubscribe=unsubscribe,
        response_nonce=nonce,
        initial_resource_versions=initial or {},
    )
    if error:
        req.error_detail.CopyFrom(status_pb2.Status(code=3, message=error))
    return req


DELTA_CASES = [
    Case("initial wildcard CDS", None, delta(CDS), True, Action.INIT, frozenset()),
    Case("initial explicit *", None, delta(LDS, ("*",)), True, Action.INIT, frozenset()),
    Case("initial EDS", None, delta(EDS, ("a",)), True, Action.INIT, frozenset({"a"})),
    Case(
        "reconnect with versions",
        None,
        delta(RDS, initial={"80": "x"}),
        True,
        Action.INIT,
        frozenset({"80"}),
    ),
    Case("ACK", sent(CDS), delta(CDS, nonce="n1"), False, Action.ACK),
    Case("NACK", sent(EDS, ("a",)), delta(EDS, nonce="n1", error="bad"), False, Action.NACK),
    Case("stale", sent(EDS, ("a",), nonce="n2"), delta(EDS, nonce="n1"), False, Action.STALE),
    Case(
        "subscribe without nonce",
        sent(EDS, ("a",)),
        delta(EDS, ("b",)),
        True,
        Action.RESOURCE_CHANGE,
        frozenset({"a", "b"}),
        frozenset({"b"}),
    ),
    Case(
        "subscribe along with an ACK",
        sent(RDS, ("80",)),
        delta(RDS, ("81",), nonce="n1"),
        True,
        Action.RESOURCE_CHANGE,
        frozenset({"80", "81"}),
        frozenset({"81"}),
    ),
    Case(
        "unsubscribe only: no answer",
        sent(EDS, ("a", "b")),
        delta(EDS, unsubscribe=("b",)),
        False,
        Action.UNSUBSCRIBE,
        frozenset({"a"}),
    ),
    Case(
        "ACK answered while clusters warm",
        sent(EDS, ("a",), always_respond=True),
        delta(EDS, nonce="n1"),
        True,
        Action.FORCED,
    ),
]


@pytest.mark.parametrize("case", DELTA_CASES, ids=lambda c: c.name)
def test_should_respond_delta(case: Case) -> None:
    decision = should_respond_delta(case.watched, case.request)
    assert (decision.respond, decision.action) == (case.respond, case.action)
    assert decision.added == case.added
    assert decision.watched is not None
    expected = case.names if case.names is not None else case.watched.names  # type: ignore[union-attr]
    assert decision.watched.names == expected


def test_delta_ack_copies_the_version_sent() -> None:
    decision = should_respond_delta(sent(CDS), delta(CDS, nonce="n1"))
    assert decision.watched is not None
    assert (decision.watched.nonce_acked, decision.watched.version_acked) == ("n1", "v1")
    assert decision.watched.wildcard


def _every_field_set() -> WatchedResource:
    values: dict[str, object] = {}
    for f in fields(WatchedResource):
        if f.type in ("bool",):
            values[f.name] = True
        elif "float" in str(f.type):
            values[f.name] = 1.0
        elif "frozenset" in str(f.type):
            values[f.name] = frozenset({f.name})
        else:
            values[f.name] = f"the {f.name}"
    return WatchedResource(**values)  # type: ignore[arg-type]


def test_sent_and_acked_keep_every_other_field() -> None:
    """Written out field by field for speed: a field added later must not be dropped."""
    w = _every_field_set()
    sent = w.sent("v2", "n2")
    assert sent == replace(w, version_sent="v2", nonce_sent="n2", sent_at=sent.sent_at)
    assert sent.sent_at != w.sent_at
    acked = w.acked()
    assert acked == replace(
        w,
        nonce_acked=w.nonce_sent,
        version_acked=w.version_sent,
        last_error="",
        acked_at=acked.acked_at,
    )
