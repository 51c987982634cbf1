"""State-of-the-world ADS: answers to requests and pushes, one DiscoveryResponse per type.

Every response carries all resources of its type the proxy watches (all of them for LDS and
CDS, the subscribed names for EDS, RDS and SDS), `version_info` = the push version and a
fresh nonce. A full push sends the watched types in PUSH_ORDER (CDS, EDS, LDS, RDS, SDS:
make before break); an EDS-only push sends EDS alone.
"""

from __future__ import annotations

import time

from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.model.push_context import PushContext
from meshpilot.xds.connection import SHORT_TYPE, Connection
from meshpilot.xds.generate import PUSH_ORDER
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.protocol import Action, should_respond
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.push_request import PushRequest
from meshpilot.xds.resources import generate_resources, new_nonce, requested_names

__all__ = ["CONTROL_PLANE", "on_request", "push_responses", "record_decision"]

CONTROL_PLANE = "meshpilot"


def record_decision(type_url: str, action: Action, metrics: Metrics) -> None:
    short = SHORT_TYPE.get(type_url, type_url)
    if action is Action.NACK:
        metrics.rejects.inc(short)
    elif action is Action.STALE:
        metrics.expired_nonce.inc(short)


def on_request(
    conn: Connection, request: discovery_pb2.DiscoveryRequest, metrics: Metrics
) -> list[discovery_pb2.DiscoveryResponse]:
    type_url = request.type_url
    decision = should_respond(conn.watch(type_url), request)
    record_decision(type_url, decision.action, metrics)
    conn.set_watch(type_url, decision.watched)
    conn.mark_always_respond(decision.warm)
    if not decision.respond or type_url not in SHORT_TYPE:
        return []
    return [respond(conn, type_url, conn.push, metrics)]


def push_responses(
    conn: Connection, req: PushRequest, metrics: Metrics
) -> list[discovery_pb2.DiscoveryResponse]:
    assert req.push is not None
    types = PUSH_ORDER if req.full_for(conn.proxy) else (TypeUrl.ENDPOINT,)
    return [respond(conn, t, req.push, metrics) for t in types if t in conn.watched]


def respond(
    conn: Connection, type_url: str, push: PushContext, metrics: Metrics
) -> discovery_pb2.DiscoveryResponse:
    started = time.perf_counter()
    watched = conn.watched[type_url]
    resources = generate_resources(push, conn.proxy, type_url, requested_names(watched))
    nonce = new_nonce()
    response = discovery_pb2.DiscoveryResponse(
        version_info=push.version,
        type_url=type_url,
        nonce=nonce,
        resources=[r.packed(type_url) for r in resources],
    )
    response.control_plane.identifier = CONTROL_PLANE
    conn.record_sent(type_url, push.version, nonce)
    short = SHORT_TYPE[type_url]
    metrics.pushes.inc(short)
    metrics.push_time.observe(time.perf_counter() - started, short)
    return response
